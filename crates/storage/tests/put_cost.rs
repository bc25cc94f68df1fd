//! A benchmark, not a test (`--ignored`): the CPU of one small PutObject, the store's direct
//! request against the SDK's `put_object` as the store sent it before (payload unsigned, CRC32),
//! in one process, rounds alternating. CPU from `/proc/self/stat` (10 ms ticks: run enough puts).
//!
//! `cargo test --release -p storage --test put_cost -- --ignored --nocapture`
//! (`BENCH_PUTS`, default 1000 a round; four rounds).

mod support;

use std::time::Instant;

use bytes::Bytes;
use support::s3::with_bucket;

/// CPU time of this process so far, user and system, in milliseconds.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    let after_name = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let ticks = |index: usize| fields[index].parse::<f64>().expect("a tick count");
    // utime and stime, fields 14 and 15 of the line (11 and 12 after the state).
    (ticks(11) + ticks(12)) * 1000.0 / 100.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run with --ignored --nocapture"]
async fn small_put_cpu_direct_against_the_sdk() {
    let puts: usize = std::env::var("BENCH_PUTS")
        .ok()
        .and_then(|puts| puts.parse().ok())
        .unwrap_or(1000);
    with_bucket(
        |_| {},
        move |bucket| async move {
            // A small job's stored text: about the size of three rows sealed and encoded.
            let body = Bytes::from(vec![b'A'; 1400]);
            for round in 0..4 {
                let cpu = cpu_ms();
                let start = Instant::now();
                for i in 0..puts {
                    bucket
                        .store
                        .put_sealed(&format!("direct/{round}/{i}"), &body[..1050])
                        .await
                        .expect("direct put");
                }
                report("store (direct)", puts, cpu, start);

                let cpu = cpu_ms();
                let start = Instant::now();
                for i in 0..puts {
                    bucket
                        .client
                        .put_object()
                        .bucket(&bucket.name)
                        .key(format!("sdk/{round}/{i}"))
                        .content_type("application/octet-stream")
                        .body(body.clone().into())
                        .customize()
                        .disable_payload_signing()
                        .send()
                        .await
                        .expect("SDK put");
                }
                report("SDK put_object", puts, cpu, start);
            }
        },
    )
    .await;
}

fn report(name: &str, puts: usize, cpu_before: f64, start: Instant) {
    let per_put = |total_ms: f64| total_ms * 1000.0 / puts as f64;
    println!(
        "{name}: {:.0} us CPU per put, {:.0} us wall",
        per_put(cpu_ms() - cpu_before),
        per_put(start.elapsed().as_secs_f64() * 1000.0)
    );
}
