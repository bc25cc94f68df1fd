//! Traces (issue 37): with `ENABLE_TELEMETRY=true` the job's spans reach an OTLP/HTTP receiver
//! under the trace of the message's `Traceparent`, and its event carries that trace in
//! `ce-traceparent`; off, the event has none.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use uuid::Uuid;

use crate::harness::World;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";
const STAGES: [&str; 8] = [
    "job",
    "claim",
    "extract",
    "extract_datasource",
    "seal",
    "store",
    "record",
    "publish",
];

/// An OTLP/HTTP receiver: every span posted to `/v1/traces` (protobuf), kept.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Serves `app` on a local port of its own: its address and its task.
async fn serve(app: axum::Router) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    (addr, task)
}

impl Receiver {
    async fn start() -> Receiver {
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let (addr, task) = serve(
            axum::Router::new()
                .route("/v1/traces", post(receive))
                .with_state(spans.clone()),
        )
        .await;
        Receiver { addr, spans, task }
    }

    /// Its base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until the spans of `job_id`'s trace include every stage.
    async fn wait_for_stages(&self, within: Duration) -> Vec<Span> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let spans: Vec<Span> = self
                .spans()
                .into_iter()
                .filter(|span| hex(&span.trace_id) == TRACE_ID)
                .collect();
            let names: Vec<String> = spans.iter().map(|s| s.name.clone()).collect();
            if every_stage(&names) {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not every stage's span arrived under the trace; got {names:?} (all: {})",
                self.spans().len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(spans): State<Arc<Mutex<Vec<Span>>>>, body: Bytes) -> &'static str {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
    let mut kept = spans.lock().unwrap();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            kept.extend(scope.spans);
        }
    }
    ""
}

/// Whether `names` include every one of [`STAGES`].
fn every_stage(names: &[String]) -> bool {
    STAGES.iter().all(|stage| names.iter().any(|n| n == stage))
}

/// `ENABLE_TELEMETRY=true` exporting to `endpoint` (`OTEL_EXPORTER_OTLP_ENDPOINT`), and `more`.
fn telemetry(endpoint: String, more: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut vars = vec![
        ("ENABLE_TELEMETRY".to_owned(), "true".to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), endpoint),
    ];
    vars.extend(more.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    vars
}

/// Submits a job reading the source's `payments`, with the message headers `extra` (a trace's,
/// or none).
async fn submit_payments(
    world: &World,
    job_id: Uuid,
    tenant: Option<&str>,
    extra: &[(&str, &str)],
) {
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["memo", "id", "amount"]),
            tenant,
            extra,
        )
        .await;
}

/// [`submit_payments`] under a new job id, then its event, asserting the job completed.
async fn completed_payments(
    world: &World,
    events: &mut crate::harness::Listener,
    tenant: Option<&str>,
    extra: &[(&str, &str)],
) -> (Uuid, crate::harness::Event) {
    let job_id = Uuid::now_v7();
    submit_payments(world, job_id, tenant, extra).await;
    let event = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
    (job_id, event)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|value| match value {
            Value::StringValue(text) => text.clone(),
            other => format!("{other:?}"),
        })
}

#[tokio::test]
async fn a_jobs_spans_continue_the_messages_trace_and_its_event_carries_it() {
    let receiver = Receiver::start().await;
    let world = World::new().await;
    let worker = world
        .start_worker_with(telemetry(
            receiver.endpoint(),
            &[
                ("OTEL_SERVICE_NAME", "fetcher-worker-e2e"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "authorization=Bearer%20otlp-secret-e2e",
                ),
            ],
        ))
        .await;
    let mut events = world.listen().await;

    let traceparent = format!("00-{TRACE_ID}-{PARENT_SPAN}-01");
    let (job_id, event) = completed_payments(
        &world,
        &mut events,
        Some("acme"),
        &[("Traceparent", &traceparent), ("Tracestate", "vendor=e2e")],
    )
    .await;
    let carried = event.text("ce-traceparent");
    assert!(
        carried.starts_with(&format!("00-{TRACE_ID}-")) && carried.len() == 55,
        "ce-traceparent {carried:?}"
    );
    assert_ne!(carried, traceparent, "the event names the Worker's span");
    event.verify(&world.keys).expect("the event still verifies");

    let spans = receiver.wait_for_stages(Duration::from_secs(30)).await;
    let job = spans.iter().find(|s| s.name == "job").expect("job span");
    assert_eq!(
        hex(&job.parent_span_id),
        PARENT_SPAN,
        "continues the sender's span"
    );
    assert_eq!(attribute(job, "job_id"), Some(job_id.to_string()));
    assert_eq!(attribute(job, "tenant").as_deref(), Some("acme"));
    for span in spans
        .iter()
        .filter(|s| s.name != "job" && s.name != "extract_datasource")
    {
        assert_eq!(
            span.parent_span_id, job.span_id,
            "{} is the job's child",
            span.name
        );
    }
    let extract = spans.iter().find(|s| s.name == "extract").expect("extract");
    let datasource = spans
        .iter()
        .find(|s| s.name == "extract_datasource")
        .expect("extract_datasource");
    assert_eq!(datasource.parent_span_id, extract.span_id);
    assert_eq!(attribute(datasource, "datasource").as_deref(), Some("src"));
    // The event's traceparent names one of the job's spans.
    let named = &carried[36..52];
    assert!(
        spans.iter().any(|s| hex(&s.span_id) == named),
        "ce-traceparent's span {named} is one of the job's"
    );
    // No secret, no row in any span, and the header's value in no log line.
    let everything = format!("{spans:?}");
    for secret in ["otlp-secret-e2e", "first <ok>", "10.50"] {
        assert!(!everything.contains(secret), "{secret:?} in the spans");
    }
    assert!(!worker.output().contains("otlp-secret-e2e"));
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn without_telemetry_the_event_has_no_traceparent() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;
    let (_, event) = completed_payments(
        &world,
        &mut events,
        None,
        &[(
            "Traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )],
    )
    .await;
    assert!(event.header("ce-traceparent").is_none());
    assert!(event.body().get("traceparent").is_none());
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_malformed_traceparent_never_fails_the_job() {
    let receiver = Receiver::start().await;
    let world = World::new().await;
    let worker = world
        .start_worker_with(vec![
            ("ENABLE_TELEMETRY".into(), "true".into()),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".into(),
                format!("{}/v1/traces", receiver.endpoint()),
            ),
        ])
        .await;
    let mut events = world.listen().await;
    let (_, event) = completed_payments(
        &world,
        &mut events,
        None,
        &[
            ("Traceparent", "00-NOT-A-TRACE-01"),
            ("Tracestate", "bad state"),
        ],
    )
    .await;
    // A trace of its own: valid, and not the malformed one.
    let carried = event.text("ce-traceparent");
    assert_eq!(carried.len(), 55, "{carried:?}");
    drop(worker);
    world.cleanup().await;
}

/// The span names of every span posted as OTLP/JSON to `/v1/traces`, with their trace ids.
type JsonSpans = Arc<Mutex<Vec<(String, String)>>>;

async fn receive_json(State(spans): State<JsonSpans>, body: Bytes) -> &'static str {
    let request: serde_json::Value = serde_json::from_slice(&body).expect("an OTLP JSON request");
    let mut kept = spans.lock().unwrap();
    for resource in request["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                kept.push((
                    span["traceId"].as_str().unwrap_or_default().to_owned(),
                    span["name"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    ""
}

#[tokio::test]
async fn http_json_sends_the_same_trace() {
    let spans: JsonSpans = Arc::default();
    let (addr, server) = serve(
        axum::Router::new()
            .route("/v1/traces", post(receive_json))
            .with_state(spans.clone()),
    )
    .await;
    let world = World::new().await;
    let worker = world
        .start_worker_with(telemetry(
            format!("http://{addr}"),
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
        ))
        .await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    submit_payments(
        &world,
        job_id,
        None,
        &[("traceparent", &format!("00-{TRACE_ID}-{PARENT_SPAN}-01"))],
    )
    .await;
    let event = events.event_for(job_id, Duration::from_secs(30)).await;
    assert!(event
        .text("ce-traceparent")
        .starts_with(&format!("00-{TRACE_ID}-")));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let names: Vec<String> = spans
            .lock()
            .unwrap()
            .iter()
            .filter(|(trace, _)| trace.eq_ignore_ascii_case(TRACE_ID))
            .map(|(_, name)| name.clone())
            .collect();
        if every_stage(&names) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every stage arrived as JSON: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.abort();
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_collector_that_is_down_never_fails_a_job() {
    // A port nothing listens on.
    let closed = crate::harness::free_port();
    let world = World::new().await;
    let worker = world
        .start_worker_with(telemetry(format!("http://127.0.0.1:{closed}"), &[]))
        .await;
    let mut events = world.listen().await;
    for _ in 0..3 {
        let (_, event) = completed_payments(&world, &mut events, None, &[]).await;
        assert_eq!(event.text("ce-traceparent").len(), 55);
    }
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_parent_not_sampled_gets_no_exported_span() {
    let receiver = Receiver::start().await;
    let world = World::new().await;
    let worker = world
        .start_worker_with(telemetry(receiver.endpoint(), &[]))
        .await;
    let mut events = world.listen().await;
    let unsampled_trace = "0af7651916cd43dd8448eb211c80319c";
    let unsampled = Uuid::now_v7();
    submit_payments(
        &world,
        unsampled,
        None,
        &[(
            "Traceparent",
            &format!("00-{unsampled_trace}-b7ad6b7169203331-00"),
        )],
    )
    .await;
    let event = events.event_for(unsampled, Duration::from_secs(30)).await;
    let carried = event.text("ce-traceparent");
    assert!(
        carried.starts_with(&format!("00-{unsampled_trace}-")) && carried.ends_with("-00"),
        "{carried:?}"
    );
    // A sampled job after it: once its spans are in, the first job's would have been too.
    let sampled = Uuid::now_v7();
    submit_payments(
        &world,
        sampled,
        None,
        &[("Traceparent", &format!("00-{TRACE_ID}-{PARENT_SPAN}-01"))],
    )
    .await;
    events.event_for(sampled, Duration::from_secs(30)).await;
    receiver.wait_for_stages(Duration::from_secs(30)).await;
    assert!(
        !receiver
            .spans()
            .iter()
            .any(|span| hex(&span.trace_id) == unsampled_trace),
        "a span of the unsampled trace was exported"
    );
    drop(worker);
    world.cleanup().await;
}

/// Waits for `job_id`'s events until one has `routing_key`; every event seen on the way, in
/// order, that one last.
async fn events_until(
    events: &mut crate::harness::Listener,
    job_id: Uuid,
    routing_key: &str,
) -> Vec<crate::harness::Event> {
    let mut seen = Vec::new();
    loop {
        let event = events.event_for(job_id, Duration::from_secs(30)).await;
        let last = event.delivery.routing_key.as_str() == routing_key;
        seen.push(event);
        if last {
            return seen;
        }
    }
}

/// The routing keys of `events`, in order.
fn routing_keys(events: &[crate::harness::Event]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e.delivery.routing_key.as_str())
        .collect()
}

/// [`events_until`] the last of `expected`, asserting each of `expected` came on the way.
async fn events_among(
    events: &mut crate::harness::Listener,
    job_id: Uuid,
    expected: &[&str],
) -> Vec<crate::harness::Event> {
    let last = expected.last().expect("a routing key to wait for");
    let seen = events_until(events, job_id, last).await;
    let keys = routing_keys(&seen);
    for key in expected {
        assert!(keys.contains(key), "{key} among {keys:?}");
    }
    seen
}

/// Asks the control API to delete `job_id`, asserting it is accepted.
fn delete(api: &crate::harness::ControlClient, job_id: Uuid) {
    let (status, document) = api.send(
        "DELETE",
        job_id,
        "",
        None,
        b"",
        crate::harness::Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
}

#[tokio::test]
async fn every_event_of_a_traced_job_carries_its_trace_cancel_and_delete_too() {
    let receiver = Receiver::start().await;
    let world = World::new().await;
    let (worker, api) = world
        .start_worker_with_api(telemetry(receiver.endpoint(), &[]))
        .await;
    let mut events = world.listen_to("job.#").await;
    let traceparent = format!("00-{TRACE_ID}-{PARENT_SPAN}-01");
    let traced = |event: &crate::harness::Event| {
        let carried = event.text("ce-traceparent");
        assert!(
            carried.starts_with(&format!("00-{TRACE_ID}-")) && carried.len() == 55,
            "{} carries {carried:?}",
            event.delivery.routing_key
        );
        event.verify(&world.keys).expect("the event still verifies");
    };

    // A job that completes: its execution's event as its own.
    let done = Uuid::now_v7();
    submit_payments(&world, done, None, &[("Traceparent", &traceparent)]).await;
    let seen = events_until(&mut events, done, "job.completed").await;
    assert_eq!(
        routing_keys(&seen),
        ["job.execution.succeeded", "job.completed"]
    );
    seen.iter().for_each(traced);

    // A job force-canceled through the API while its query runs: the request's event (recorded
    // by the API, from the job's stored trace), the execution's, and the run's end.
    let canceled = Uuid::now_v7();
    world
        .submit(
            &world.job_body(canceled, "src", "slow", &["id"]),
            None,
            &[("Traceparent", &traceparent)],
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(std::time::Instant::now() < deadline, "the query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, document) = api.send(
        "POST",
        canceled,
        "/cancel",
        None,
        br#"{"force":true}"#,
        crate::harness::Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    let seen = events_among(
        &mut events,
        canceled,
        &[
            "job.cancellation_in_progress",
            "job.execution.canceled",
            "job.canceled",
        ],
    )
    .await;
    seen.iter().for_each(traced);

    // Its deletion, long after the run: both events and the execution's removal.
    delete(&api, canceled);
    let seen = events_among(
        &mut events,
        canceled,
        &[
            "job.deletion_in_progress",
            "job.execution.deleted",
            "job.deleted",
        ],
    )
    .await;
    seen.iter().for_each(traced);
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn without_telemetry_no_event_of_a_job_has_a_traceparent() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen_to("job.#").await;
    let job_id = Uuid::now_v7();
    submit_payments(
        &world,
        job_id,
        None,
        &[("Traceparent", &format!("00-{TRACE_ID}-{PARENT_SPAN}-01"))],
    )
    .await;
    let mut seen = events_until(&mut events, job_id, "job.completed").await;
    delete(&api, job_id);
    seen.extend(events_until(&mut events, job_id, "job.deleted").await);
    assert_eq!(
        seen.len(),
        5,
        "execution, end, deletion's two, execution's removal"
    );
    for event in &seen {
        assert!(
            event.header("ce-traceparent").is_none(),
            "{}",
            event.delivery.routing_key
        );
    }
    drop(worker);
    world.cleanup().await;
}
