//! OTLP export, set up from OpenTelemetry's standard variables: traces are exported when
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (unless
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`), over OTLP/HTTP: protobuf, or JSON
//! with `OTEL_EXPORTER_OTLP_PROTOCOL=http/json` (gRPC is not built in). The exporter reads the
//! rest itself (`…_HEADERS`, `…_TIMEOUT`, `…_COMPRESSION` unsupported), the SDK reads
//! `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_BSP_*`, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
//! Spans are sent in batches from a thread of the SDK's, through the gateway's own HTTP client on
//! the gateway's runtime: a collector that is down costs dropped spans, never a request.

use std::time::Duration;

use bytes::Bytes;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// Exporting traces: flushes what is left when it ends.
pub struct Exporting {
    provider: SdkTracerProvider,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot export traces: {0}")]
pub struct ExportError(String);

/// Whether the standard variables ask for traces to be exported.
pub fn requested(env: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| env(name).is_some_and(|value| !value.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let none = env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT")) && !disabled && !none
}

impl Exporting {
    /// Starts exporting when the environment asks for it (`None` when it does not). HTTP calls
    /// to the collector run on `runtime`.
    pub fn from_env(runtime: tokio::runtime::Handle) -> Result<Option<Self>, ExportError> {
        let env = |name: &str| std::env::var(name).ok();
        if !requested(env) {
            return Ok(None);
        }
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(OnRuntime::new(runtime).map_err(|e| ExportError(e.to_string()))?);
        // OTLP's default protocol is protobuf; the variables choose JSON.
        if env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL")).is_none() {
            exporter = exporter.with_protocol(Protocol::HttpBinary);
        }
        let exporter = exporter.build().map_err(|e| ExportError(e.to_string()))?;
        let mut resource = Resource::builder();
        let named = env("OTEL_SERVICE_NAME").is_some()
            || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attrs| attrs.contains("service.name="));
        if !named {
            resource = resource.with_service_name("chatgate");
        }
        let resource =
            resource.with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        super::exporting();
        Ok(Some(Self { provider }))
    }

    /// The tracer the `tracing` bridge makes its spans with.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer(super::TRACER)
    }

    /// Sends what is still buffered (within five seconds) and stops.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!(%error, "traces not all exported at shutdown");
        }
    }
}

/// The exporter's HTTP client: the gateway's reqwest, its calls spawned on the gateway's runtime
/// (the SDK's export thread has no runtime of its own).
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OnRuntime {
    fn new(runtime: tokio::runtime::Handle) -> reqwest::Result<Self> {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
        Ok(Self { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let call = async move {
            let response = client.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        };
        self.runtime.spawn(call).await?
    }
}

#[cfg(test)]
mod tests {
    use super::requested;

    #[test]
    fn the_standard_variables_decide_whether_traces_are_exported() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            requested(move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned()))
        };
        assert!(!with(&[]));
        assert!(with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]));
        assert!(with(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")]));
        assert!(!with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]));
        assert!(!with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_SDK_DISABLED", "TRUE")]));
        assert!(!with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_TRACES_EXPORTER", "none")]));
        assert!(with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_TRACES_EXPORTER", "otlp")]));
    }
}
