//! The traces' settings (`ENABLE_TELEMETRY`, `OTEL_*`): off by default, every variable checked
//! when on, each problem naming its variable and never a header's value or an endpoint.

use secrecy::ExposeSecret;

use super::tests::with;
use super::*;

fn settings(extra: &[(&str, &str)]) -> Settings {
    Settings::from_vars(with(extra)).unwrap_or_else(|e| panic!("{extra:?} refused: {e}"))
}

fn problems(extra: &[(&str, &str)]) -> String {
    match Settings::from_vars(with(extra)) {
        Ok(_) => panic!("{extra:?} accepted"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn traces_are_off_unless_enabled_whatever_the_otel_variables_say() {
    assert!(settings(&[]).traces.is_none());
    let off = settings(&[
        ("ENABLE_TELEMETRY", "false"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url"),
    ]);
    assert!(off.traces.is_none());
    assert!(problems(&[("ENABLE_TELEMETRY", "maybe")])
        .contains("ENABLE_TELEMETRY must be true or false"));
}

#[test]
fn the_defaults_and_the_standard_variables_decide_the_export() {
    let on = settings(&[("ENABLE_TELEMETRY", "true")])
        .traces
        .expect("on");
    assert_eq!(on.endpoint, "http://localhost:4318/v1/traces");
    assert_eq!(on.protocol, TraceProtocol::Protobuf);
    assert_eq!(on.service_name, "fetcher-worker");
    assert!(on.headers.is_empty() && on.resource.is_empty());

    let set = settings(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20tok,x-org=acme",
        ),
        ("OTEL_SERVICE_NAME", "worker-eu"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
    ])
    .traces
    .expect("on");
    assert_eq!(set.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(set.protocol, TraceProtocol::Json);
    assert_eq!(set.service_name, "worker-eu");
    assert_eq!(set.headers.len(), 2);
    assert_eq!(set.headers[0].0, "authorization");
    assert_eq!(set.headers[0].1.expose_secret(), "Bearer tok");
    assert_eq!(
        set.resource,
        vec![("deployment.environment".to_owned(), "prod".to_owned())]
    );
    assert!(!format!("{set:?}").contains("Bearer tok"), "{set:?}");

    // The traces endpoint wins, and is used as it is.
    let traces = settings(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://wrong:4318"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://right:9999/custom",
        ),
    ]);
    assert_eq!(
        traces.traces.expect("on").endpoint,
        "http://right:9999/custom"
    );
    let tls = settings(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otlp.example.com"),
    ]);
    assert_eq!(
        tls.traces.expect("on").endpoint,
        "https://otlp.example.com/v1/traces"
    );
}

#[test]
fn grpc_a_bad_protocol_and_a_bad_url_are_problems_naming_the_variable() {
    let grpc = problems(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ]);
    assert!(
        grpc.contains("OTEL_EXPORTER_OTLP_PROTOCOL is grpc"),
        "{grpc}"
    );
    let bad = problems(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
    ]);
    assert!(bad.contains("OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json"));
    for (url, expected) in [
        ("collector:4318", "it must be an http:// or https:// URL"),
        (
            "grpc://collector:4318",
            "it must be an http:// or https:// URL",
        ),
        ("http://:4318", "must be a URL http[s]://host[:port]"),
        (
            "https://collector:99999",
            "must be a URL http[s]://host[:port]",
        ),
        (
            "http://user:token-secret@collector:4318",
            "no user information",
        ),
    ] {
        let out = problems(&[
            ("ENABLE_TELEMETRY", "true"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url),
        ]);
        assert!(
            out.contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") && out.contains(expected),
            "{url}: {out}"
        );
        assert!(!out.contains(url), "the value is repeated: {out}");
    }
    // A blank name is unset: the default name.
    let blank = settings(&[("ENABLE_TELEMETRY", "true"), ("OTEL_SERVICE_NAME", " ")]);
    assert_eq!(blank.traces.expect("on").service_name, "fetcher-worker");
}

#[test]
fn a_bad_header_list_is_refused_without_its_values() {
    for headers in [
        "authorization",
        "authorization=Bearer%2",
        "=Bearer-secret-1",
        "bad name=Bearer-secret-1",
        "authorization=Bearer%0Asecret-1",
    ] {
        let out = problems(&[
            ("ENABLE_TELEMETRY", "true"),
            ("OTEL_EXPORTER_OTLP_HEADERS", headers),
        ]);
        assert!(out.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{out}");
        assert!(
            !out.contains("secret-1") && !out.contains("Bearer"),
            "{out}"
        );
    }
    let resource = problems(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_RESOURCE_ATTRIBUTES", "no-equals"),
    ]);
    assert!(
        resource.contains("OTEL_RESOURCE_ATTRIBUTES must be"),
        "{resource}"
    );
}

#[test]
fn port_4317_with_http_is_a_warning_that_it_is_grpcs() {
    let on = settings(&[
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
    ]);
    assert!(
        on.warnings
            .iter()
            .any(|w| w.contains("OTEL_EXPORTER_OTLP_ENDPOINT names port 4317")),
        "{:?}",
        on.warnings
    );
    assert_eq!(
        on.traces.expect("on").endpoint,
        "http://collector:4317/v1/traces"
    );
}
