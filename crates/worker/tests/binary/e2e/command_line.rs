//! The command line with a whole environment and a job waiting: `--version`, `-V`, `--help` and
//! `-h` print and exit 0, an unknown argument exits 2 with one line, and none of them consumes
//! the job (before, `--version` started a Worker); `run` does, and its start log line,
//! `/readyz` and `/metrics` name the build `--version` printed.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use uuid::Uuid;
use worker::build_info;

use crate::harness::{free_port, WorkerProcess, World};

/// What one run of the binary printed and exited with.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the Worker binary with `args` and exactly `env` to its end; one still running after
/// 30 s (a Worker started by mistake) is killed and fails the test.
async fn run_with(args: &[&str], env: &BTreeMap<String, String>) -> Ran {
    let child = Command::new(WorkerProcess::binary())
        .args(args)
        .env_clear()
        .envs(env)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fetcher-worker");
    let pid = child.id().to_string();
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    match tokio::time::timeout(Duration::from_secs(30), waiting).await {
        Ok(output) => {
            let output = output.expect("join").expect("output");
            Ran {
                code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        }
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!("fetcher-worker {args:?} was still running after 30 s");
        }
    }
}

/// Polls the work queue's depth until it is `expected`, and fails after `within`.
async fn wait_depth(world: &World, expected: u32, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let depth = world.broker.depth(&world.queue).await;
        if depth == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the work queue holds {depth}, not {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn only_no_argument_or_run_starts_the_worker_and_it_names_its_build() {
    let world = World::new().await;
    // The work queue as the Worker declares it, so a Worker started by mistake would consume.
    worker::amqp::topology::declare(&world.broker.connection, &world.exchange, &world.queue)
        .await
        .expect("the Worker's topology");
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit_job(job_id, "src", "payments", &["id"]).await;
    wait_depth(&world, 1, Duration::from_secs(10)).await;

    let port = free_port();
    let env = world.env(port);
    let version = format!("{}\n", build_info::version_line());
    for flag in ["--version", "-V"] {
        let ran = run_with(&[flag], &env).await;
        assert_eq!(ran.code, Some(0), "{flag}: {}", ran.stderr);
        assert_eq!(
            (ran.stdout.as_str(), ran.stderr.as_str()),
            (version.as_str(), "")
        );
    }
    for flag in ["--help", "-h"] {
        let ran = run_with(&[flag], &env).await;
        assert_eq!(ran.code, Some(0), "{flag}: {}", ran.stderr);
        assert!(ran.stdout.starts_with(&version), "{flag}: {}", ran.stdout);
        for command in [
            "fetcher-worker [run]",
            "config check",
            "--version",
            "--help",
        ] {
            assert!(
                ran.stdout.contains(command),
                "{flag} lacks {command}: {}",
                ran.stdout
            );
        }
        assert_eq!(ran.stderr, "");
    }
    for (args, message) in [
        (&["--verbose"][..], "unknown argument \"--verbose\""),
        (&["start"], "unknown argument \"start\""),
        (&["run", "now"], "run takes no argument"),
        (&["config", "validate"], "unknown config command"),
    ] {
        let ran = run_with(args, &env).await;
        assert_eq!(ran.code, Some(2), "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stdout, "", "{args:?}");
        assert_eq!(ran.stderr.lines().count(), 1, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.starts_with("fetcher-worker: ") && ran.stderr.contains(message),
            "{args:?}: {}",
            ran.stderr
        );
    }
    // Nothing consumed the job, nor recorded it.
    assert_eq!(world.broker.depth(&world.queue).await, 1);
    assert_eq!(world.job_status(job_id).await, None);

    // `run` is the Worker: it takes the job, and names its build.
    let mut command = Command::new(WorkerProcess::binary());
    command.arg("run");
    let running = WorkerProcess::start(command, env, port);
    running.wait_ready(Duration::from_secs(60)).await;
    let event = events.event_for(job_id, Duration::from_secs(40)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");

    let (status, body) = running.get("/readyz").expect("/readyz");
    assert_eq!(status, 200, "{body}");
    let readyz: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(readyz["version"], build_info::VERSION, "{body}");
    assert_eq!(readyz["revision"], build_info::REVISION, "{body}");
    assert_eq!(readyz["build_date"], build_info::BUILD_DATE, "{body}");

    let (_, metrics) = running.get("/metrics").expect("/metrics");
    let sample = format!(
        "fetcher_worker_build_info{{version=\"{}\",revision=\"{}\",build_date=\"{}\"}} 1",
        build_info::VERSION,
        build_info::REVISION,
        build_info::BUILD_DATE
    );
    assert!(
        metrics.lines().any(|line| line == sample),
        "{sample} not in:\n{metrics}"
    );
    assert!(metrics.contains("# HELP fetcher_worker_build_info "));

    let started = running
        .output()
        .lines()
        .find(|line| line.contains("Fetcher Worker started."))
        .map(str::to_owned)
        .expect("the start line");
    for field in [
        format!("\"version\":\"{}\"", build_info::VERSION),
        format!("\"revision\":\"{}\"", build_info::REVISION),
        format!("\"build_date\":\"{}\"", build_info::BUILD_DATE),
    ] {
        assert!(started.contains(&field), "{field} not in {started}");
    }
    drop(running);
    world.cleanup().await;
}

#[test]
fn the_build_is_named_in_a_known_form() {
    let revision = build_info::REVISION;
    assert!(
        revision == "unknown"
            || (revision.len() >= 7 && revision.chars().all(|c| c.is_ascii_hexdigit())),
        "{revision}"
    );
    let date = build_info::BUILD_DATE.as_bytes();
    assert_eq!(date.len(), 10, "{}", build_info::BUILD_DATE);
    assert!(date.iter().enumerate().all(|(at, byte)| match at {
        4 | 7 => *byte == b'-',
        _ => byte.is_ascii_digit(),
    }));
}
