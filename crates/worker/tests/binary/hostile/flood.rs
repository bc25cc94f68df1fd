//! A flood of 100,000 hostile messages against one Worker: malformed, forged, stale, replayed,
//! huge, deeply nested, and validly signed bodies carrying SQL and quoting tricks in every name
//! and value. The Worker stays up and ready, drains its queue, settles every message the way the
//! contract says, records jobs only for signed messages with a job id, and never touches the
//! source data.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lapin::options::ConfirmSelectOptions;
use uuid::Uuid;

use super::corpus::{headers_with_marker, message, Expect, Rng, ONE_MIB};
use super::support::{source_fingerprint, PanicCleanup};
use crate::harness::{free_port, http_get, metric_sum, publish, DeadLetters, WorkerProcess, World};

const MESSAGES: usize = 100_000;
/// Messages per publisher-confirm batch: publishing never waits on a single message.
const CONFIRM_BATCH: usize = 2_000;

/// Polls `/readyz` until stopped; every answer that was not 200.
fn watch_readiness(
    port: u16,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u32, Vec<String>)> {
    std::thread::spawn(move || {
        let (mut polls, mut bad) = (0, Vec::new());
        while !stop.load(Ordering::SeqCst) {
            polls += 1;
            match http_get(port, "/readyz") {
                Some((200, _)) => {}
                other => bad.push(format!("{other:?}")),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        (polls, bad)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "100,000 messages (about a minute): run by `make chaos`"]
async fn a_flood_of_hostile_messages_is_refused_cheaply_and_changes_nothing() {
    let mut world = World::new().await;
    // HOSTILE_AMQP_URI points the flood (its Worker and its own connection) at another broker,
    // for a machine whose shared broker is being restarted by other tests.
    if let Ok(uri) = std::env::var("HOSTILE_AMQP_URI") {
        world.broker.connection =
            lapin::Connection::connect(&uri, lapin::ConnectionProperties::default())
                .await
                .expect("HOSTILE_AMQP_URI is not reachable");
        world.broker.channel = world
            .broker
            .connection
            .create_channel()
            .await
            .expect("channel");
    }
    let amqp = std::env::var("HOSTILE_AMQP_URI").unwrap_or_else(|_| testkit::amqp::amqp_uri());
    let _cleanup = PanicCleanup::new(&world, &amqp);
    let port = free_port();
    let mut env = world.env(port);
    env.insert("RABBITMQ_NUMBERS_OF_WORKERS".into(), "32".into());
    if let Ok(uri) = std::env::var("HOSTILE_AMQP_URI") {
        env.insert("RABBITMQ_URI".into(), uri);
    }
    let mut worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let mut dead = DeadLetters::tap(&world).await;
    // A consumer of the events, so the failed jobs' events are routed as in production.
    let _events = world.listen().await;
    let before = source_fingerprint(&world).await;

    let stop = Arc::new(AtomicBool::new(false));
    let readiness = watch_readiness(port, stop.clone());

    // Publish everything, confirmed in batches.
    let channel = world
        .broker
        .connection
        .create_channel()
        .await
        .expect("channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    let mut rng = Rng(0x5eed_f00d_2026);
    let (mut dead_ids, mut dropped) = (Vec::new(), 0usize);
    let (mut fails, mut runs, mut completes) = (HashSet::new(), HashSet::new(), HashSet::new());
    let mut bytes = 0usize;
    let started = Instant::now();
    let mut now = chrono::Utc::now().timestamp();
    for i in 0..MESSAGES {
        if i % CONFIRM_BATCH == 0 {
            now = chrono::Utc::now().timestamp();
        }
        let m = message(&world, &mut rng, i, now);
        bytes += m.body.len();
        let headers = headers_with_marker(&world, m.headers);
        publish(&channel, "", &world.queue, &m.body, &headers).await;
        match m.expect {
            Expect::DeadLetter(id) => dead_ids.push(id),
            Expect::Dropped => dropped += 1,
            Expect::Fails(id) => {
                fails.insert(id);
            }
            Expect::Runs(id) => {
                runs.insert(id);
            }
            Expect::Completes(id) => {
                completes.insert(id);
            }
        }
        if (i + 1) % CONFIRM_BATCH == 0 {
            let returned = channel.wait_for_confirms().await.expect("confirms");
            assert!(returned.is_empty(), "the broker returned messages");
            if (i + 1) % 20_000 == 0 {
                let depth = world.broker.depth(&world.queue).await;
                eprintln!(
                    "hostile flood: {} published after {:.1} s, {depth} waiting",
                    i + 1,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
    channel.wait_for_confirms().await.expect("confirms");
    let published_in = started.elapsed();

    // The queue drains, with no stall, while the Worker stays alive.
    let mut last = (u32::MAX, Instant::now());
    let mut settled_polls = 0;
    loop {
        assert!(
            worker.child.try_wait().expect("try_wait").is_none(),
            "the Worker died under the flood; output tail:\n{}",
            tail(&worker.output())
        );
        let depth = world.broker.depth(&world.queue).await;
        let metrics = http_get(port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let active = metric_sum(&metrics, "fetcher_consumers_active", "");
        if depth == 0 && active == 0.0 {
            settled_polls += 1;
            if settled_polls >= 3 {
                break;
            }
        } else {
            settled_polls = 0;
        }
        if depth < last.0 {
            last = (depth, Instant::now());
        }
        if last.1.elapsed() > Duration::from_secs(30) {
            let activity: Vec<String> = sqlx::query_scalar(
                "SELECT coalesce(datname, '') || ' ' || coalesce(state, '') || ' ' || \
                 coalesce(wait_event_type, '') || ':' || coalesce(wait_event, '') || ' ' || \
                 left(query, 120) FROM pg_stat_activity WHERE datname LIKE 'fetcher_test_%'",
            )
            .fetch_all(&world.state)
            .await
            .unwrap_or_default();
            let log = std::env::temp_dir().join(format!("hostile-flood-{}.log", world.id));
            let _ = std::fs::write(&log, worker.output());
            panic!(
                "the work queue stalled at {depth} messages ({active} handlers active)\n\
                 database sessions:\n{}\nmetrics:\n{}\nWorker output ({}) tail:\n{}",
                activity.join("\n"),
                metrics
                    .lines()
                    .filter(|l| !l.starts_with('#') && !l.contains("_bucket"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                log.display(),
                tail(&worker.output())
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(480),
            "the work queue did not drain in time ({depth} left)"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let drained_in = started.elapsed();
    eprintln!(
        "hostile flood: {MESSAGES} messages ({:.1} MiB) published in {:.1} s ({:.0}/s); queue \
         drained {:.1} s after the first publish ({:.0} messages/s end to end)",
        bytes as f64 / ONE_MIB as f64,
        published_in.as_secs_f64(),
        MESSAGES as f64 / published_in.as_secs_f64(),
        drained_in.as_secs_f64(),
        MESSAGES as f64 / drained_in.as_secs_f64(),
    );

    // Every refused signature was dead-lettered, and only those.
    let dead_letters = dead.collect(dead_ids.len(), Duration::from_secs(60)).await;
    assert_eq!(
        dead_letters.len(),
        dead_ids.len(),
        "dead-lettered messages of this run"
    );

    // The Worker counted every refusal by reason.
    let metrics = http_get(port, "/metrics").expect("metrics").1;
    let refused = metric_sum(
        &metrics,
        "fetcher_messages_rejected_total",
        "reason=\"signature_",
    );
    let unusable = metric_sum(&metrics, "fetcher_messages_rejected_total", "") - refused;
    assert_eq!(
        refused as usize,
        dead_ids.len(),
        "signature refusals counted"
    );
    assert_eq!(
        unusable as usize,
        dropped + fails.len(),
        "unusable bodies counted"
    );

    // Jobs exist exactly for the signed messages that carried a job id.
    let rows: Vec<(Uuid, String)> = sqlx::query_as("SELECT job_id, status FROM jobs")
        .fetch_all(&world.state)
        .await
        .expect("jobs");
    let statuses: HashMap<Uuid, String> = rows.into_iter().collect();
    for id in &dead_ids {
        assert!(
            !statuses.contains_key(id),
            "a message with a refused signature created job {id}"
        );
    }
    let mut expected: HashSet<Uuid> = fails.union(&runs).copied().collect();
    expected.extend(&completes);
    let recorded: HashSet<Uuid> = statuses.keys().copied().collect();
    assert_eq!(
        recorded.difference(&expected).count(),
        0,
        "jobs recorded that no signed message asked for"
    );
    assert_eq!(
        expected.difference(&recorded).count(),
        0,
        "signed messages with a job id left no job"
    );
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    for status in statuses.values() {
        *by_status.entry(status.as_str()).or_default() += 1;
    }
    for id in &fails {
        assert_eq!(statuses[id], "failed", "job {id}");
    }
    for id in &completes {
        assert_eq!(
            statuses[id], "completed",
            "hostile filter values are bound, job {id}"
        );
    }
    for id in &runs {
        assert!(
            matches!(statuses[id].as_str(), "completed" | "failed"),
            "job {id} is {}",
            statuses[id]
        );
    }
    eprintln!(
        "hostile flood: {} dead-lettered, {dropped} dropped, {} failed unusable, {} hostile-name \
         jobs, {} hostile-value jobs; job rows by status {by_status:?}",
        dead_ids.len(),
        fails.len(),
        runs.len(),
        completes.len()
    );

    // Every recorded event is published.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pending: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL")
                .fetch_one(&world.state)
                .await
                .expect("outbox");
        if pending == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{pending} events never published"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The source data is untouched, and objects only exist under well-formed keys.
    assert_eq!(
        source_fingerprint(&world).await,
        before,
        "the source changed"
    );
    for key in world.object_keys().await {
        assert!(
            !key.contains("..") && key.ends_with(".json") && key.matches('/').count() <= 2,
            "unexpected object key {key:?}"
        );
    }

    // Alive and ready throughout, and every refusal says why in the log.
    stop.store(true, Ordering::SeqCst);
    let (polls, not_ready) = readiness.join().expect("readiness watcher");
    assert!(
        not_ready.is_empty(),
        "/readyz was not 200 in {} of {polls} polls: {:?}",
        not_ready.len(),
        &not_ready[..not_ready.len().min(5)]
    );
    assert_eq!(http_get(port, "/readyz").map(|r| r.0), Some(200));
    let output = worker.output();
    for needle in [
        "Job message dead-lettered",
        "signature_mismatch",
        "signature_missing",
        "signature_stale",
        "signature_future",
        "signature_version",
        "signature_timestamp_invalid",
        "signature_header_type",
        "Job message dropped",
        "invalid_json",
        "not_an_object",
        "Job failed: its message body is unusable",
    ] {
        assert!(output.contains(needle), "no log line mentions {needle:?}");
    }
    assert!(worker.child.try_wait().expect("try_wait").is_none());
    drop(worker);
    world.cleanup().await;
}

fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
