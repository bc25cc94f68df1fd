//! System calls per small job (issue 36): `strace -f` attached to a running Worker over
//! `BENCH_SYSCALL_JOBS` small jobs (3 rows each, one after the other) after three unmeasured
//! ones. Counted, not timed: the calls a job makes repeat from run to run where their time on
//! a shared machine does not. The count is of every thread of the process over the window, so
//! it includes what the Worker does on its own clock meanwhile (the repair pass, the sweeper),
//! a little per job at the tests' 2 s cadence. Each call is also put to its thread's name
//! (`/proc/<pid>/task/<tid>/comm`), so a table says which threads make them: the hops between
//! threads (a `futex` wake here, a wait there) are where a job's wake-ups come from.
//!
//! `BENCH_STRACE_ARGS` adds to strace's arguments (`-k` prints each call's stack) and
//! `BENCH_STRACE_KEEP` keeps the trace, to find who makes a call.
//!
//! `BENCH_BEFORE_BIN` names a second build, measured the same way in the same run, after the
//! first (`TEST_WORKER_BIN`, or this build's):
//!
//! `BENCH_BEFORE_BIN=<baseline> TEST_WORKER_BIN=<release build> cargo test -p worker --test
//! binary -- --ignored --nocapture bench::syscalls`

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use uuid::Uuid;

use super::knobs;
use crate::harness::{free_port, WorkerProcess, World};

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
        let trace = count(&world, &binary, jobs).await;
        world.cleanup().await;
        let per_job = |calls: u64| calls as f64 / jobs as f64;
        let total: u64 = trace.calls.iter().map(|(_, calls)| calls).sum();
        println!("\nsystem calls of {binary} over {jobs} small jobs (strace -f, all threads):");
        println!("  {:.1} per job ({total} in all)", per_job(total));
        for (name, calls) in trace.calls.iter().take(12) {
            println!("  {name:<16} {:>8.1} per job", per_job(*calls));
        }
        println!("  by thread (calls per job; the futex calls as waits / wakes):");
        for thread in &trace.threads {
            println!(
                "  {:<24} {:>6.1}   futex {:>5.1} / {:<5.1} {}",
                thread.name,
                per_job(thread.calls),
                per_job(thread.futex_waits),
                per_job(thread.futex_wakes),
                thread
                    .top
                    .iter()
                    .map(|(call, n)| format!("{call} {:.1}", per_job(*n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}

/// What strace saw over the window: each system call's count, the most frequent first, and
/// each thread name's share.
struct Trace {
    calls: Vec<(String, u64)>,
    threads: Vec<Threads>,
}

/// The calls of the threads of one name (the runtime's workers share theirs).
#[derive(Debug, PartialEq)]
struct Threads {
    name: String,
    calls: u64,
    futex_waits: u64,
    futex_wakes: u64,
    /// Its four most frequent calls.
    top: Vec<(String, u64)>,
}

/// Runs `jobs` small jobs through the Worker at `binary` with strace attached.
async fn count(world: &World, binary: &str, jobs: usize) -> Trace {
    let port = free_port();
    let worker = WorkerProcess::spawn_binary(binary, world.env(port), port);
    worker.wait_ready(Duration::from_secs(120)).await;
    let mut events = world.listen().await;
    for _ in 0..3 {
        world.completed_small_job(&mut events).await;
    }

    let out = std::env::temp_dir().join(format!("strace-{}.txt", Uuid::new_v4().simple()));
    let mut strace = Command::new("strace");
    strace.args(["-f", "-o"]).arg(&out);
    // `BENCH_STRACE_ARGS` adds to strace's arguments (`-k` for each call's stack, `-e
    // trace=futex,write` for some calls only); `BENCH_STRACE_KEEP` keeps the trace.
    if let Ok(args) = std::env::var("BENCH_STRACE_ARGS") {
        strace.args(args.split_whitespace());
    }
    let mut strace = strace
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
        world.completed_small_job(&mut events).await;
    }
    let names = thread_names(worker.pid());
    let status = Command::new("kill")
        .args(["-INT", &strace.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    // It detaches and ends by the signal it was sent.
    strace.wait().expect("strace's exit");
    drop(worker);
    let text = std::fs::read_to_string(&out).expect("strace's output");
    if std::env::var_os("BENCH_STRACE_KEEP").is_some() {
        println!("trace kept in {}", out.display());
    } else {
        let _ = std::fs::remove_file(&out);
    }
    let trace = tally(&text, &names);
    assert!(!trace.calls.is_empty(), "strace saw no call");
    trace
}

/// Each thread's name by its id, read while the Worker runs.
fn thread_names(pid: u32) -> HashMap<u32, String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the Worker's threads");
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            Some((tid, name.trim().to_owned()))
        })
        .collect()
}

/// One thread name's counts while the trace is read.
#[derive(Default)]
struct Tally<'a> {
    calls: u64,
    futex_waits: u64,
    futex_wakes: u64,
    each: HashMap<&'a str, u64>,
}

/// Counts the calls of `strace -f`'s lines (`<tid> <call>(...`, a call that another thread's
/// line cut in two counted at its start, not again at `<... call resumed>`), each put to its
/// thread's name; a thread gone before the names were read is "(exited)".
fn tally(text: &str, names: &HashMap<u32, String>) -> Trace {
    let mut calls: HashMap<&str, u64> = HashMap::new();
    let mut threads: BTreeMap<&str, Tally> = BTreeMap::new();
    for line in text.lines() {
        let Some((tid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(tid) = tid.parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        let Some((call, args)) = rest.split_once('(') else {
            continue;
        };
        if call.is_empty() || !call.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        *calls.entry(call).or_default() += 1;
        let name = names.get(&tid).map_or("(exited)", String::as_str);
        let thread = threads.entry(name).or_default();
        thread.calls += 1;
        if call == "futex" {
            if args.contains("FUTEX_WAKE") {
                thread.futex_wakes += 1;
            } else if args.contains("FUTEX_WAIT") {
                thread.futex_waits += 1;
            }
        }
        *thread.each.entry(call).or_default() += 1;
    }
    let mut calls: Vec<(String, u64)> = calls.into_iter().map(|(c, n)| (c.to_owned(), n)).collect();
    calls.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut threads: Vec<Threads> = threads
        .into_iter()
        .map(|(name, tally)| {
            let mut top: Vec<(String, u64)> = tally
                .each
                .into_iter()
                .map(|(c, n)| (c.to_owned(), n))
                .collect();
            top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            top.truncate(4);
            Threads {
                name: name.to_owned(),
                calls: tally.calls,
                futex_waits: tally.futex_waits,
                futex_wakes: tally.futex_wakes,
                top,
            }
        })
        .collect();
    threads.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
    Trace { calls, threads }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{tally, Threads};

    #[test]
    fn calls_are_counted_once_and_put_to_their_threads() {
        let text = "101 futex(0x7f, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL <unfinished ...>\n\
            102 sendto(9, \"x\", 1, MSG_NOSIGNAL, NULL, 0) = 1\n\
            102 futex(0x7f, FUTEX_WAKE_PRIVATE, 1) = 1\n\
            101 <... futex resumed>) = 0\n\
            103 recvfrom(9, \"x\", 8, 0, NULL, NULL) = 1\n\
            102 --- SIGURG {si_signo=SIGURG} ---\n\
            104 +++ exited with 0 +++\n";
        let names = HashMap::from([
            (101, "lapin-io-loop".to_owned()),
            (102, "tokio-runtime-w".to_owned()),
        ]);
        let trace = tally(text, &names);
        assert_eq!(
            trace.calls,
            [
                ("futex".to_owned(), 2),
                ("recvfrom".to_owned(), 1),
                ("sendto".to_owned(), 1)
            ]
        );
        assert_eq!(
            trace.threads,
            [
                Threads {
                    name: "tokio-runtime-w".to_owned(),
                    calls: 2,
                    futex_waits: 0,
                    futex_wakes: 1,
                    top: vec![("futex".to_owned(), 1), ("sendto".to_owned(), 1)],
                },
                Threads {
                    name: "(exited)".to_owned(),
                    calls: 1,
                    futex_waits: 0,
                    futex_wakes: 0,
                    top: vec![("recvfrom".to_owned(), 1)],
                },
                Threads {
                    name: "lapin-io-loop".to_owned(),
                    calls: 1,
                    futex_waits: 1,
                    futex_wakes: 0,
                    top: vec![("futex".to_owned(), 1)],
                },
            ]
        );
    }
}
