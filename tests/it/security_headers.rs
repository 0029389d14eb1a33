//! Issue 27.8 over plain HTTP: every response says `nosniff`; every console and step-up response
//! also carries a Content-Security-Policy that forbids framing, `X-Frame-Options`, a
//! `Referrer-Policy`, and `Strict-Transport-Security` when the gateway is reached over https.

use reqwest::header::HeaderMap;

use crate::helpers::{TestDb, api_token, spawn_app_with};

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn pages_cannot_be_framed_and_nothing_is_sniffed() {
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let token = api_token(&db, "demo", "ops-1", "commands:read");
    let signed = crate::helpers::console_sign_in(&app, &token, &[]).await;
    let set = signed.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    let cookie = format!("chatgate_session={}", cookie::Cookie::parse(set).expect("cookie").value());

    let pages = [
        "/console/sign-in",
        "/console/commands",
        "/console",
        "/console/static/console.js",
        "/console/static/console.css",
        "/console/nowhere",
        "/step-up?command=none&nonce=none",
        "/step-up/style.css",
    ];
    for path in pages {
        let response = client.get(app.url(path)).header("cookie", &cookie).send().await.expect("page");
        let headers = response.headers();
        let policy = header(headers, "content-security-policy").unwrap_or_default();
        assert!(policy.contains("frame-ancestors 'none'"), "{path}: {policy}");
        assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"), "{path}: {policy}");
        assert_eq!(header(headers, "x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(header(headers, "x-content-type-options"), Some("nosniff"), "{path}");
        assert_eq!(header(headers, "referrer-policy"), Some("no-referrer"), "{path}");
        assert_eq!(header(headers, "strict-transport-security"), None, "{path}: plain http here");
        let behind_https =
            client.get(app.url(path)).header("cookie", &cookie).header("x-forwarded-proto", "https").send().await;
        let hsts = behind_https.expect("page").headers().get("strict-transport-security").cloned();
        assert!(hsts.is_some_and(|v| v.to_str().is_ok_and(|v| v.starts_with("max-age="))), "{path} behind https");
    }
    let html = client.get(app.url("/console/commands")).header("cookie", &cookie).send().await.expect("page");
    let html = html.text().await.expect("html");
    assert!(!html.contains("<style") && !html.contains(" style=") && !html.contains("<script>"), "nothing inline");

    // Every other response: no sniffing either, whatever it is.
    let others = [
        client.get(app.url("/healthz")).send().await,
        client.get(app.url("/openapi.json")).send().await,
        client.get(app.url("/v1/commands")).send().await,
        client.post(app.url("/webhooks/whatsapp")).body("{}").send().await,
        client.get(app.url("/nowhere")).send().await,
    ];
    for response in others {
        let response = response.expect("response");
        let url = response.url().to_string();
        assert_eq!(header(response.headers(), "x-content-type-options"), Some("nosniff"), "{url}");
        assert_eq!(header(response.headers(), "content-security-policy"), None, "{url}: not a page");
    }
    app.stop().await.expect("stop");
}
