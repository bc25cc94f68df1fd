//! Instruction counts of the Worker (issue 36): the binary under callgrind (`valgrind
//! --tool=callgrind`), whose counts repeat from run to run where time on a shared machine does
//! not, so a change's effect shows without noise. After three unmeasured jobs the counters are
//! zeroed (`callgrind_control -z`), then `BENCH_CALLGRIND_SMALL` small jobs (3 rows each, one
//! after the other) are run and dumped (`callgrind_control -d`), then one job over
//! `BENCH_CALLGRIND_ROWS` rows of the wide table (default 250,000: about 64 MiB of result
//! JSON). `BENCH_CALLGRIND_KEEP` (set to anything) keeps the dumps for `callgrind_annotate`
//! and prints where. Reported: instructions (`Ir`, every thread of the process) per small job and per
//! MiB of the big job's result. Run the release binary: `TEST_WORKER_BIN=target/release/
//! fetcher-worker cargo test -p worker --test binary -- --ignored --nocapture bench::instructions`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use testkit::wide_table::{self, COLUMNS};
use uuid::Uuid;

use super::knobs;
use super::stats::MIB;
use crate::harness::{free_port, Listener, WorkerProcess, World};

/// How long a job may take under callgrind (about 50 times slower than natively).
const JOB_WITHIN: Duration = Duration::from_secs(1800);

#[tokio::test]
#[ignore = "benchmark: runs the Worker under valgrind; run by hand (BENCHMARKS.md)"]
async fn instructions_per_job() {
    let small_jobs = knobs::number("BENCH_CALLGRIND_SMALL", 10);
    let rows = knobs::number("BENCH_CALLGRIND_ROWS", 250_000) as u64;
    let world = World::new().await;
    let mut source = PgConnection::connect(world.source_url())
        .await
        .expect("source");
    sqlx::raw_sql(&wide_table::create_sql("big", rows))
        .execute(&mut source)
        .await
        .expect("the big table");

    let dir = std::env::temp_dir().join(format!("callgrind-{}", Uuid::new_v4().simple()));
    std::fs::create_dir(&dir).expect("a directory for the dumps");
    let out = dir.join("callgrind.out");
    let mut valgrind = Command::new("valgrind");
    valgrind.args([
        "--tool=callgrind",
        "--vgdb=yes",
        &format!("--callgrind-out-file={}", out.display()),
        &WorkerProcess::binary(),
    ]);
    let port = free_port();
    let worker = WorkerProcess::start(valgrind, world.env(port), port);
    worker.wait_ready(Duration::from_secs(600)).await;
    let pid = worker.pid();
    let mut events = world.listen().await;

    for _ in 0..3 {
        small_job(&world, &mut events).await;
    }
    control(pid, "-z");
    for _ in 0..small_jobs {
        small_job(&world, &mut events).await;
    }
    let small = dumped(pid, &out);

    control(pid, "-z");
    let job_id = Uuid::now_v7();
    world
        .submit(&world.job_body(job_id, "src", "big", &COLUMNS), None, &[])
        .await;
    let event = events.event_for(job_id, JOB_WITHIN).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
    let result_bytes = event.body()["result"]["sizeBytes"]
        .as_u64()
        .expect("sizeBytes");
    let big = dumped(pid, &out);
    drop(worker);
    world.cleanup().await;
    // Kept on request, for `callgrind_annotate` (the big job's dump is the newest).
    let kept = std::env::var_os("BENCH_CALLGRIND_KEEP").is_some();
    if !kept {
        let _ = std::fs::remove_dir_all(&dir);
    }

    println!(
        "\ninstructions (callgrind Ir, all threads) of {}:",
        WorkerProcess::binary()
    );
    println!(
        "  small job (3 rows): {:.2} M per job ({small_jobs} jobs one after another, {:.1} M in all)",
        small as f64 / small_jobs as f64 / 1e6,
        small as f64 / 1e6
    );
    println!(
        "  big job: {rows} rows, {:.1} MiB of result JSON: {:.1} M per MiB ({:.0} M in all)",
        result_bytes as f64 / MIB,
        big as f64 / (result_bytes as f64 / MIB) / 1e6,
        big as f64 / 1e6
    );
    if kept {
        println!("  dumps kept in {}", dir.display());
    }
}

/// One small job, waited for.
async fn small_job(world: &World, events: &mut Listener) {
    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["id"]),
            None,
            &[],
        )
        .await;
    let event = events.event_for(job_id, JOB_WITHIN).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
}

/// `callgrind_control <flag> <pid>`.
fn control(pid: u32, flag: &str) {
    let status = Command::new("callgrind_control")
        .args([flag, &pid.to_string()])
        .status()
        .expect("callgrind_control (valgrind's)");
    assert!(status.success(), "callgrind_control {flag}: {status}");
}

/// Dumps the counters since the last zeroing and reads their total (`summary:` of the newest
/// dump, `<out>.<n>`).
fn dumped(pid: u32, out: &Path) -> u64 {
    let before = newest_dump(out);
    control(pid, "-d");
    let file = newest_dump(out).filter(|file| Some(file) != before.as_ref());
    let file = file.expect("a new callgrind dump");
    let text = std::fs::read_to_string(&file).expect("the dump");
    text.lines()
        .find_map(|line| line.strip_prefix("summary:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a summary line")
}

/// The dump with the highest sequence number.
fn newest_dump(out: &Path) -> Option<PathBuf> {
    let dir = out.parent()?;
    let base = out.file_name()?.to_str()?.to_owned();
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let n: u32 = name.strip_prefix(&format!("{base}."))?.parse().ok()?;
            Some((n, path))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, path)| path)
}
