//! `promtool check metrics` (Prometheus's own linter: help text, base units, `_total` on
//! counters only, snake case) over a live Worker's `/metrics`, after jobs of several kinds and
//! control API requests so the labelled families are there too, and the process's own families.
//! Its only complaints may be about upstream's `readyz_check_*` families, whose names the Worker
//! keeps for compatibility.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use contract::envelope;
use uuid::Uuid;

use super::prometheus::ensure_installed;
use crate::harness::{self, Signing, World};

/// Upstream's names, which promtool finds fault with (`readyz_check_duration_ms`: milliseconds,
/// an abbreviated unit; `readyz_check_status`: a counter without `_total`) and the Worker keeps.
const UPSTREAM_PREFIX: &str = "readyz_check_";

/// promtool's complaints about `exposition`, each as (metric name, problem).
pub fn lint(exposition: &str) -> Vec<(String, String)> {
    ensure_installed();
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting promtool");
    promtool
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(exposition.as_bytes())
        .expect("writing to promtool");
    let output = promtool.wait_with_output().expect("promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let complaints: Vec<(String, String)> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (name, problem) = line.split_once(' ').unwrap_or((line, ""));
            (name.to_owned(), problem.to_owned())
        })
        .collect();
    // 0: clean; 3: lint problems only. Anything else (1: unparsable) is a failure of its own.
    match output.status.code() {
        Some(0) => assert!(complaints.is_empty(), "promtool passed yet said: {text}"),
        Some(3) => assert!(!complaints.is_empty(), "promtool failed silently"),
        other => panic!("promtool could not check /metrics ({other:?}): {text}"),
    }
    complaints
}

/// The complaints not about upstream's names.
pub fn ours(complaints: &[(String, String)]) -> Vec<String> {
    complaints
        .iter()
        .filter(|(name, _)| !name.starts_with(UPSTREAM_PREFIX))
        .map(|(name, problem)| format!("{name} {problem}"))
        .collect()
}

/// Waits until `/metrics` counts at least one `name`.
async fn wait_counted(port: u16, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, exported) = harness::http_get(port, "/metrics").expect("/metrics");
        if harness::metric_sum(&exported, name, "") > 0.0 {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn promtool_finds_fault_only_with_upstreams_readyz_names() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let port = worker.port;
    let mut events = world.listen().await;

    // A completed job, a failed one (its datasource is down), one refused (forged signature).
    let completed = Uuid::now_v7();
    world
        .submit(
            &world.job_body(completed, "src", "payments", &["id", "amount"]),
            None,
            &[],
        )
        .await;
    let failed = Uuid::now_v7();
    world
        .submit(
            &world.job_body(failed, "down", "payments", &["id"]),
            None,
            &[],
        )
        .await;
    world
        .publish_raw(
            &world.job_body(Uuid::now_v7(), "src", "payments", &["id"]),
            &[
                (envelope::SIGNATURE_HEADER, "0".repeat(64)),
                (
                    envelope::TIMESTAMP_HEADER,
                    chrono::Utc::now().timestamp().to_string(),
                ),
                (envelope::VERSION_HEADER, "v1".into()),
            ],
        )
        .await;
    for job_id in [completed, failed] {
        events.event_for(job_id, Duration::from_secs(30)).await;
    }
    wait_counted(port, "fetcher_messages_rejected_total").await;

    // A delete, and a request the control API refuses.
    let (status, answer) = api.send("DELETE", completed, "", None, b"", Signing::Valid);
    assert_eq!(status, 202, "{answer}");
    world
        .wait_status(completed, "deleted", Duration::from_secs(30))
        .await;
    let (status, _) = api.send("DELETE", failed, "", None, b"", Signing::Unsigned);
    assert_eq!(status, 401);
    wait_counted(port, "fetcher_api_requests_rejected_total").await;

    let (status, exported) = worker.get("/metrics").expect("/metrics");
    assert_eq!(status, 200);
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            exported.contains(&format!("\n{name} ")),
            "{name} not on /metrics"
        );
    }
    let complaints = lint(&exported);
    println!("promtool check metrics:");
    for (name, problem) in &complaints {
        println!("  {name} {problem}");
    }
    // The linter ran and read the families: upstream's names are the ones it must flag.
    assert!(
        complaints
            .iter()
            .any(|(name, _)| name.starts_with(UPSTREAM_PREFIX)),
        "promtool flagged none of upstream's readyz_check_* names: {complaints:?}\n{exported}"
    );
    let ours = ours(&complaints);
    assert!(
        ours.is_empty(),
        "promtool's complaints about our metrics: {ours:#?}"
    );
    drop(worker);
    world.cleanup().await;
}
