//! Cancel latency (lifecycle §6): from a force-cancel request to the job's `canceled`, over
//! running jobs whose statement is seen on the source server. The Worker runs with its default
//! lease (30 s), so what is measured is the announcement (`NOTIFY`) path, not the heartbeat.
//!
//! Reported: p50, p90 and max over `CANCEL_BENCH_JOBS` (default 50) cancels of the time until
//! (a) the API's answer, (b) the state database says `canceled`, (c) the signed `job.canceled`
//! reaches a consumer's queue, (d) the statement is gone from `pg_stat_activity`.

use std::time::{Duration, Instant};

use uuid::Uuid;

use super::knobs;
use super::stats::{ms, percentile};
use crate::harness::{Signing, World};

fn line(name: &str, samples: Vec<Duration>) -> String {
    format!(
        "{name:<28} p50 {:>7.1} ms   p90 {:>7.1} ms   max {:>7.1} ms",
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.9)),
        ms(percentile(&samples, 1.0))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench`"]
async fn cancel_latency() {
    let jobs = knobs::number("CANCEL_BENCH_JOBS", 50);
    let world = World::new().await;
    let (worker, api) = world
        .start_worker_with_api(vec![("JOB_LEASE_SEC".into(), "30".into())])
        .await;
    let mut events = world.listen().await;
    let (mut answered, mut recorded, mut delivered, mut stopped) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..jobs {
        let job_id = Uuid::now_v7();
        world
            .submit(&world.job_body(job_id, "src", "slow", &["id"]), None, &[])
            .await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while world.slow_queries().await == 0 {
            assert!(Instant::now() < deadline, "the query never ran");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let asked = Instant::now();
        let (status, document) = api.send(
            "POST",
            job_id,
            "/cancel",
            None,
            br#"{"force":true}"#,
            Signing::Valid,
        );
        answered.push(asked.elapsed());
        assert_eq!(status, 202, "{document}");
        let (mut seen_recorded, mut seen_stopped) = (None, None);
        while seen_recorded.is_none() || seen_stopped.is_none() {
            if seen_recorded.is_none()
                && world.job_status(job_id).await.as_deref() == Some("canceled")
            {
                seen_recorded = Some(asked.elapsed());
            }
            if seen_stopped.is_none() && world.slow_queries().await == 0 {
                seen_stopped = Some(asked.elapsed());
            }
            assert!(asked.elapsed() < Duration::from_secs(30), "never canceled");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        recorded.push(seen_recorded.unwrap_or_default());
        stopped.push(seen_stopped.unwrap_or_default());
        loop {
            let event = events.event_for(job_id, Duration::from_secs(30)).await;
            if event.delivery.routing_key.as_str() == "job.canceled" {
                // Received after the polls above; the event may have come earlier.
                delivered.push(asked.elapsed());
                break;
            }
        }
    }
    println!("\ncancel latency over {jobs} force-cancels of running jobs (request sent at 0):");
    println!("{}", line("(a) API answered 202", answered));
    println!("{}", line("(b) state says canceled", recorded));
    println!("{}", line("(c) job.canceled consumed", delivered));
    println!("{}", line("(d) statement gone", stopped));
    let metrics = worker.get("/metrics").expect("metrics").1;
    let sum = crate::harness::metric_sum(&metrics, "fetcher_job_cancel_latency_seconds_sum", "");
    let count =
        crate::harness::metric_sum(&metrics, "fetcher_job_cancel_latency_seconds_count", "");
    println!(
        "fetcher_job_cancel_latency_seconds (acceptance to canceled, in the Worker): mean {:.1} ms over {count}",
        sum / count * 1000.0
    );
    drop(worker);
    world.cleanup().await;
}
