//! System calls per small job (issue 36): `strace -f -c` attached to a running Worker over
//! `BENCH_SYSCALL_JOBS` small jobs (3 rows each, one after the other) after three unmeasured
//! ones. Counted, not timed: the calls a job makes repeat from run to run where their time on
//! a shared machine does not. The count is of every thread of the process over the window, so
//! it includes what the Worker does on its own clock meanwhile (the repair pass, the sweeper),
//! a little per job at the tests' 2 s cadence.
//!
//! `BENCH_BEFORE_BIN` names a second build, measured the same way in the same run, after the
//! first (`TEST_WORKER_BIN`, or this build's):
//!
//! `BENCH_BEFORE_BIN=<baseline> TEST_WORKER_BIN=<release build> cargo test -p worker --test
//! binary -- --ignored --nocapture bench::syscalls`

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use uuid::Uuid;

use super::knobs;
use crate::harness::{free_port, Listener, WorkerProcess, World};

const JOB_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test]
#[ignore = "benchmark: attaches strace to the Worker; run by hand (BENCHMARKS.md)"]
async fn syscalls_per_small_job() {
    let jobs = knobs::number("BENCH_SYSCALL_JOBS", 100);
    let mut binaries = vec![WorkerProcess::binary()];
    if let Ok(before) = std::env::var("BENCH_BEFORE_BIN") {
        binaries.push(before);
    }
    for binary in binaries {
        let world = World::new().await;
        let counts = count(&world, &binary, jobs).await;
        world.cleanup().await;
        let total: u64 = counts.iter().map(|(_, calls)| calls).sum();
        println!("\nsystem calls of {binary} over {jobs} small jobs (strace -f -c, all threads):");
        println!(
            "  {:.1} per job ({total} in all)",
            total as f64 / jobs as f64
        );
        for (name, calls) in counts.iter().take(12) {
            println!("  {name:<16} {:>8.1} per job", *calls as f64 / jobs as f64);
        }
    }
}

/// Runs `jobs` small jobs through the Worker at `binary` with strace attached; each system
/// call's count, the most frequent first.
async fn count(world: &World, binary: &str, jobs: usize) -> Vec<(String, u64)> {
    let port = free_port();
    let worker = WorkerProcess::spawn_binary(binary, world.env(port), port);
    worker.wait_ready(Duration::from_secs(120)).await;
    let mut events = world.listen().await;
    for _ in 0..3 {
        small_job(world, &mut events).await;
    }

    let out = std::env::temp_dir().join(format!("strace-{}.txt", Uuid::new_v4().simple()));
    let mut strace = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&out)
        .args(["-p", &worker.pid().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("strace");
    // "strace: Process <pid> attached with <n> threads": counting from here on.
    let stderr = strace.stderr.take().expect("strace's stderr");
    let mut lines = BufReader::new(stderr).lines();
    let attached = tokio::task::spawn_blocking(move || {
        let found = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.contains("attached"));
        (found, lines)
    });
    let (found, lines) = tokio::time::timeout(Duration::from_secs(30), attached)
        .await
        .expect("strace attaches within 30 s")
        .expect("strace's stderr");
    assert!(found, "strace never attached");
    // Drained meanwhile, so strace never blocks on a full pipe.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));

    for _ in 0..jobs {
        small_job(world, &mut events).await;
    }
    let status = Command::new("kill")
        .args(["-INT", &strace.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    // It detaches, writes its summary and ends by the signal it was sent.
    strace.wait().expect("strace's exit");
    drop(worker);
    let summary = std::fs::read_to_string(&out).expect("strace's summary");
    let _ = std::fs::remove_file(&out);
    let mut counts = parse(&summary);
    assert!(!counts.is_empty(), "strace counted nothing:\n{summary}");
    counts.sort_by_key(|(_, calls)| std::cmp::Reverse(*calls));
    counts
}

/// The rows of `strace -c`'s table (`% time, seconds, usecs/call, calls, [errors,] syscall`),
/// without its total.
fn parse(summary: &str) -> Vec<(String, u64)> {
    summary
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let calls = fields.get(3)?.parse().ok()?;
            let name = *fields.last()?;
            (name != "total").then(|| (name.to_owned(), calls))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn strace_summaries_are_read_with_and_without_errors() {
        let summary = "% time     seconds  usecs/call     calls    errors syscall\n\
            ------ ----------- ----------- --------- --------- ----------------\n \
            60.00    0.000600          10        60        12 recvfrom\n \
            40.00    0.000400          10        40           sendto\n\
            ------ ----------- ----------- --------- --------- ----------------\n\
            100.00    0.001000          10       100        12 total\n";
        assert_eq!(
            parse(summary),
            [("recvfrom".to_owned(), 60), ("sendto".to_owned(), 40)]
        );
    }
}
