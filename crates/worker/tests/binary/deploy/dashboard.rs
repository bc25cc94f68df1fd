//! One Worker, scraped every second by a private Prometheus, runs jobs of every kind (completed,
//! failed, timed out, canceled, deleted, refused, an API request refused); then:
//!
//! - the outbox alert goes pending then firing while the Worker cannot reach RabbitMQ (a test
//!   copy of `deploy/prometheus/rules.yml` with every `for:` shortened to 2 s and the outbox
//!   threshold at two of this Worker's repair intervals, 2 x 2 s, instead of 2 x 30 s);
//! - every query of `deploy/grafana/fetcher-worker.json` parses and returns series (each printed
//!   with its series count), the queue panels' from the shared broker's `rabbitmq_prometheus`;
//! - every metric of `docs/metrics.md`'s table is on `/metrics` with its type and name, and
//!   `promtool check metrics` finds fault with none but upstream's `readyz_check_*`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use contract::envelope;
use serde_json::Value;
use uuid::Uuid;

use super::prometheus::{root, Prometheus};
use crate::harness::{self, ControlClient, FaultProxy, Signing, WorkerProcess, World};

/// The harness Worker's `OUTBOX_REPAIR_INTERVAL_SEC` (world.rs), twice: the test rules' threshold.
const TWO_REPAIR_INTERVALS: &str = "4";

/// The shared broker's `rabbitmq_prometheus` endpoint (`scripts/services.sh` enables it), whose
/// per-queue series the dashboard's queue panels read.
const RABBITMQ_PROMETHEUS: &str = "127.0.0.1:15692";

/// rules.yml with `for:` at 2 s and the outbox threshold at two of the test Worker's intervals.
fn test_rules() -> String {
    let rules = std::fs::read_to_string(root().join("deploy/prometheus/rules.yml")).expect("rules");
    let outbox = "sink=\"amqp\"}) > 60";
    assert!(
        rules.contains(outbox),
        "the outbox rule's threshold moved: update the test copy"
    );
    let mut shortened = 0;
    let text: Vec<String> = rules
        .replace(
            outbox,
            &format!("sink=\"amqp\"}}) > {TWO_REPAIR_INTERVALS}"),
        )
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("for: ") {
                shortened += 1;
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}for: 2s")
            } else {
                line.to_owned()
            }
        })
        .collect();
    assert!(shortened >= 9, "{shortened} for: lines");
    text.join("\n")
}

/// Every query of the dashboard with its panel's title, Grafana's `$__rate_interval` as 30 s,
/// the `namespace` and `instance` variables at "All" (`.*`), and the queue variables naming this
/// test's work queue and the dead-letter queue.
fn dashboard_queries(work_queue: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("deploy/grafana/fetcher-worker.json"))
        .expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            queries.push((
                panel["title"].as_str().expect("title").to_owned(),
                expr.replace("$__rate_interval", "30s")
                    .replace("$namespace", ".*")
                    .replace("$instance", ".*")
                    .replace("$work_queue", work_queue)
                    .replace("$dead_letter_queue", "fetcher.dlq"),
            ));
        }
    }
    assert!(queries.len() >= 25, "{} queries", queries.len());
    queries
}

/// The metrics table of `docs/metrics.md`: name and type.
fn documented_metrics() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let start = text
        .find("| metric | type |")
        .expect("docs/metrics.md's metrics table");
    text[start..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0].trim_matches('`').to_owned(), cells[1].to_owned())
        })
        .collect()
}

async fn wait_ended(world: &World, job_id: Uuid, status: &str) {
    world
        .wait_status(job_id, status, Duration::from_secs(30))
        .await;
}

#[tokio::test]
async fn the_dashboard_queries_the_alerts_and_the_documented_metrics_hold_on_a_real_worker() {
    let started = Instant::now();
    let world = World::new().await;
    let amqp = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], 5672))).await;
    let port = harness::free_port();
    let mut env = world.env(port);
    env.insert("RABBITMQ_HOST".into(), "127.0.0.1".into());
    env.insert("RABBITMQ_PORT_AMQP".into(), amqp.port().to_string());
    // A cap no job here reaches: the slot metrics are exported as for any capped datasource.
    env.insert("DATASOURCE_SRC_MAX_CONCURRENT".into(), "100".into());
    let api = ControlClient {
        port: env["API_PORT"].parse().expect("API_PORT"),
        keys: world.keys.clone(),
    };
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let prometheus = Prometheus::start(
        &format!("127.0.0.1:{port}"),
        RABBITMQ_PROMETHEUS,
        &test_rules(),
    )
    .await;
    prometheus
        .wait_for("up{job=\"fetcher-worker\"} == 1", Duration::from_secs(20))
        .await;
    let mut events = world.listen().await;

    // Completed jobs, a failed one (its datasource is down), one refused (forged signature).
    let completed: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
    for job_id in &completed {
        let body = world.job_body(*job_id, "src", "payments", &["id", "amount", "memo"]);
        world.submit(&body, None, &[]).await;
    }
    let failed = Uuid::now_v7();
    world
        .submit(
            &world.job_body(failed, "down", "payments", &["id"]),
            None,
            &[],
        )
        .await;
    let now = chrono::Utc::now().timestamp().to_string();
    world
        .publish_raw(
            &world.job_body(Uuid::now_v7(), "src", "payments", &["id"]),
            &[
                (envelope::SIGNATURE_HEADER, "0".repeat(64)),
                (envelope::TIMESTAMP_HEADER, now),
                (envelope::VERSION_HEADER, "v1".into()),
            ],
        )
        .await;
    // A job over its own time.
    let timed_out = Uuid::now_v7();
    let slow = |job_id: Uuid, timeout: Option<u32>| {
        let mut body = serde_json::json!({
            "jobId": job_id,
            "mappedFields": {"src": {"slow": ["id"]}},
            "metadata": {"source": "deploy"},
        });
        if let Some(seconds) = timeout {
            body["timeoutSeconds"] = seconds.into();
        }
        body.to_string().into_bytes()
    };
    world.submit(&slow(timed_out, Some(1)), None, &[]).await;
    for job_id in completed.iter().chain([&failed, &timed_out]) {
        events.event_for(*job_id, Duration::from_secs(30)).await;
    }
    wait_ended(&world, failed, "failed").await;
    wait_ended(&world, timed_out, "failed").await;

    // A force-cancel of a running job, a delete, and a request the API refuses.
    let canceled = Uuid::now_v7();
    world.submit(&slow(canceled, None), None, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while world.slow_queries().await == 0 {
        assert!(Instant::now() < deadline, "the slow query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, answer) = api.send(
        "POST",
        canceled,
        "/cancel",
        None,
        br#"{"force":true}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{answer}");
    wait_ended(&world, canceled, "canceled").await;
    let (status, answer) = api.send("DELETE", completed[0], "", None, b"", Signing::Valid);
    assert_eq!(status, 202, "{answer}");
    wait_ended(&world, completed[0], "deleted").await;
    let (status, _) = api.send("DELETE", completed[1], "", None, b"", Signing::Unsigned);
    assert_eq!(status, 401);

    // RabbitMQ becomes unreachable to the Worker; a delete records events it cannot publish.
    amqp.set_refuse(true);
    amqp.reset_all();
    let (status, answer) = api.send("DELETE", completed[1], "", None, b"", Signing::Valid);
    assert_eq!(status, 202, "{answer}");
    let cut = Instant::now();
    let alert = "ALERTS{alertname=\"FetcherOutboxStalled\", alertstate=\"%\"}";
    prometheus
        .wait_for(&alert.replace('%', "pending"), Duration::from_secs(30))
        .await;
    let pending = cut.elapsed();
    let firing = prometheus
        .wait_for(&alert.replace('%', "firing"), Duration::from_secs(30))
        .await;
    println!(
        "FetcherOutboxStalled: pending {:.1} s and firing {:.1} s after RabbitMQ became unreachable: {}",
        pending.as_secs_f64(),
        cut.elapsed().as_secs_f64(),
        firing[0]["metric"]
    );

    // Back: the repairer publishes what waited, and the alert resolves.
    amqp.heal();
    prometheus
        .wait_for(
            "sum(fetcher_events_republished_total{job=\"fetcher-worker\"}) > 0",
            Duration::from_secs(40),
        )
        .await;
    // The counter's series begins with the republish, and `rate` needs two samples of it: the
    // panels are queried only once the scrapes have them.
    prometheus
        .wait_for(
            "count(rate(fetcher_events_republished_total{job=\"fetcher-worker\"}[30s])) > 0",
            Duration::from_secs(40),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !prometheus
        .query(&alert.replace('%', "firing"))
        .expect("ALERTS")
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the outbox alert did not resolve"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_ended(&world, completed[1], "deleted").await;

    // Every panel's query.
    let mut empty = Vec::new();
    println!("dashboard queries (instant, $__rate_interval = 30s):");
    for (title, expr) in dashboard_queries(&world.queue) {
        let series = prometheus
            .query(&expr)
            .unwrap_or_else(|error| panic!("{title}: {expr}: {error}"));
        println!("{:>3} series  {title}: {expr}", series.len());
        if series.is_empty() {
            empty.push(format!("{title}: {expr}"));
        }
    }
    assert!(empty.is_empty(), "queries without series: {empty:#?}");

    // The documented metrics, as /metrics exports them.
    let (status, exported) = harness::http_get(port, "/metrics").expect("/metrics");
    assert_eq!(status, 200);
    let mut missing = Vec::new();
    for (name, kind) in documented_metrics() {
        let declared = format!("# TYPE {name} {kind}");
        let sampled = exported.lines().any(|line| {
            !line.starts_with('#')
                && line.starts_with(&name)
                && line[name.len()..].starts_with(['{', ' ', '_'])
        });
        if !exported.lines().any(|line| line == declared) || !sampled {
            missing.push(declared);
        }
    }
    assert!(
        missing.is_empty(),
        "not on /metrics as docs/metrics.md says: {missing:#?}"
    );
    // Every family this run exported, linted: nothing but upstream's readyz_check_* names.
    let complaints = super::promtool::ours(&super::promtool::lint(&exported));
    assert!(
        complaints.is_empty(),
        "promtool's complaints about our metrics: {complaints:#?}"
    );
    println!("the test took {:.1} s", started.elapsed().as_secs_f64());
    drop(worker);
    world.cleanup().await;
}
