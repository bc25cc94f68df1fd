//! Traces (issue 37): with `ENABLE_TELEMETRY=true`, the Worker's spans (a `job` span per
//! delivery, a span per stage) go to an OTLP/HTTP endpoint, continuing the inbound message's W3C
//! trace context; off, no exporter exists and the stage spans are disabled `tracing` spans.
//!
//! Only spans of the Worker's own code are exported (no log event, no dependency's span): their
//! fields are ids, names and counts, never a secret or a row.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use secrecy::ExposeSecret as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{TraceProtocol, TraceSettings};

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the stop waits for the last spans to leave.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether an exporter was built: until then no span belongs to an exported trace, and
/// [`traceparent`] answers at once. Asking `tracing-opentelemetry` instead costs some 450 ns a
/// look-up with no layer to answer (BENCHMARKS.md, "Traces off").
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// The exporter, while traces are on; flushed at the stop.
pub struct Traces {
    provider: SdkTracerProvider,
}

/// Builds the exporter and the layer that feeds it. Needs the Tokio runtime (the batch
/// processor runs on it).
pub fn layer<S>(
    settings: &TraceSettings,
) -> Result<(Traces, impl tracing_subscriber::Layer<S>), opentelemetry_otlp::ExporterBuildError>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let headers: HashMap<String, String> = settings
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.expose_secret().to_owned()))
        .collect();
    // http:// and https:// alike, TLS with the system's roots.
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .map_err(|error| {
            opentelemetry_otlp::ExporterBuildError::InternalFailure(format!(
                "the system's root certificates could not be read: {error}"
            ))
        })?
        .https_or_http()
        .enable_http1()
        .build();
    let client = opentelemetry_http::hyper::HyperClient::new(connector, EXPORT_TIMEOUT, None);
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(settings.endpoint.clone())
        .with_protocol(match settings.protocol {
            TraceProtocol::Protobuf => Protocol::HttpBinary,
            TraceProtocol::Json => Protocol::HttpJson,
        })
        .with_timeout(EXPORT_TIMEOUT)
        .with_headers(headers)
        .build()?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_attributes(
            settings
                .resource
                .iter()
                .map(|(key, value)| KeyValue::new(key.clone(), value.clone())),
        )
        .with_service_name(settings.service_name.clone())
        .with_attribute(KeyValue::new("service.version", crate::build_info::VERSION))
        .build();
    // Every job sampled unless its sender's parent says not; pinned, so the SDK's own reading
    // of OTEL_TRACES_SAMPLER (a variable the Worker does not check) changes nothing.
    let sampler = opentelemetry_sdk::trace::Sampler::ParentBased(Box::new(
        opentelemetry_sdk::trace::Sampler::AlwaysOn,
    ));
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampler)
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("fetcher-worker");
    EXPORTING.store(true, Ordering::Relaxed);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false);
    // Spans of the Worker's own code only: a log line is no span event, a driver's span no span.
    let only_ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.is_span() && meta.target().starts_with("worker")
    });
    Ok((
        Traces { provider },
        tracing_subscriber::Layer::with_filter(layer, only_ours),
    ))
}

impl Traces {
    /// Sends the spans not yet exported, for at most a few seconds.
    pub async fn flush(self) {
        let provider = self.provider;
        let flushed =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT));
        match tokio::time::timeout(FLUSH_TIMEOUT + Duration::from_secs(1), flushed).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "Could not send the last spans."),
            _ => tracing::warn!("Could not send the last spans in time."),
        }
    }
}

/// A W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), parsed strictly: version `00` exactly
/// as long as the specification says, lower-case hex, ids not all zero. Anything else is no
/// context (the delivery starts a trace of its own).
pub fn parse_traceparent(header: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let bytes = header.as_bytes();
    if !header.is_ascii()
        || bytes.len() != 55
        || bytes[2] != b'-'
        || bytes[35] != b'-'
        || bytes[52] != b'-'
    {
        return None;
    }
    let lower_hex = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let (version, trace, span, flags) =
        (&header[..2], &header[3..35], &header[36..52], &header[53..]);
    if version != "00" || ![version, trace, span, flags].into_iter().all(lower_hex) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let state = tracestate
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        state,
    ))
}

/// Makes `span` continue the inbound trace `parent`.
pub fn continue_trace(span: &tracing::Span, parent: SpanContext) {
    let cx = opentelemetry::Context::new().with_remote_span_context(parent);
    // Fails only when the span is disabled or already started its trace: nothing to continue.
    let _ = span.set_parent(cx);
}

/// The `traceparent` of the current span, when it belongs to an exported trace (telemetry on).
/// Off, it answers at once, without looking the current span up (that alone costs hundreds of
/// nanoseconds under the Worker's subscriber).
pub fn current_traceparent() -> Option<String> {
    if !EXPORTING.load(Ordering::Relaxed) {
        return None;
    }
    traceparent(&tracing::Span::current())
}

/// The `traceparent` of `span`, when it belongs to an exported trace (telemetry on).
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if !EXPORTING.load(Ordering::Relaxed) {
        return None;
    }
    let cx = span.context();
    let context = cx.span().span_context().clone();
    context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_well_formed_traceparent_is_its_context() {
        let context = parse_traceparent(GOOD, Some("vendor=value")).expect("valid");
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled());
        assert!(context.is_remote());
        assert_eq!(context.trace_state().get("vendor"), Some("value"));
    }

    #[test]
    fn a_malformed_traceparent_is_no_context() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b-01",
        ] {
            assert!(parse_traceparent(bad, None).is_none(), "{bad:?}");
        }
        // A bad tracestate is dropped, the parent kept.
        let context = parse_traceparent(GOOD, Some("not a state")).expect("valid");
        assert_eq!(context.trace_state().header(), "");
    }

    #[test]
    fn a_span_outside_any_exported_trace_has_no_traceparent() {
        assert_eq!(traceparent(&tracing::Span::none()), None);
    }
}
