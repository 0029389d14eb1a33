//! The headers every response carries, and those of the pages a browser shows (the console and
//! the step-up page): they cannot be framed by another site (clickjacking past the form tokens),
//! load nothing but this gateway's own script and stylesheet, and leak no link (the step-up link
//! carries its nonce) to another site through `Referer`. Behind https, browsers are told to come
//! back only over https.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// What a page may load and who may frame it: this gateway's own script, stylesheet, images and
/// event stream, forms posted back here, and no frame anywhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Whether the gateway is reached over https (its public URL says so, or its proxy does).
#[derive(Debug, Clone, Copy)]
pub struct Https(pub bool);

pub async fn security_headers(State(Https(https)): State<Https>, request: Request, next: Next) -> Response {
    let page = is_page(request.uri().path());
    let proxied_https = request.headers().get("x-forwarded-proto").is_some_and(|p| p.as_bytes() == b"https");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if page {
        set_page_headers(headers, https || proxied_https);
    }
    response
}

/// The console's and the step-up page's paths: what a browser shows as a page.
fn is_page(path: &str) -> bool {
    path == "/console" || path.starts_with("/console/") || path == "/step-up" || path.starts_with("/step-up/")
}

fn set_page_headers(headers: &mut HeaderMap, https: bool) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if https {
        headers.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static("max-age=31536000"));
    }
}
