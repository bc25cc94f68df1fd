//! A running `fetcher-worker` (`TEST_WORKER_BIN`, or this build's), its output captured
//! (`TEST_LOG` echoes it), and the free ports its health server takes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::http_get;

/// A port nothing listens on now, for a Worker's health server.
pub fn free_port() -> u16 {
    testkit::free_port()
}

/// A running `fetcher-worker`, its output captured.
pub struct WorkerProcess {
    pub child: Child,
    pub port: u16,
    pub output: Arc<Mutex<String>>,
}

impl WorkerProcess {
    pub fn spawn(env: BTreeMap<String, String>, port: u16) -> WorkerProcess {
        WorkerProcess::spawn_binary(&WorkerProcess::binary(), env, port)
    }

    /// Runs the Worker binary at `path` (another build, to compare with).
    pub fn spawn_binary(path: &str, env: BTreeMap<String, String>, port: u16) -> WorkerProcess {
        WorkerProcess::start(Command::new(path), env, port)
    }

    /// The process id, for what `/proc` says of it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The Worker binary the tests run: `TEST_WORKER_BIN` runs another build (the release
    /// binary, to measure it).
    pub fn binary() -> String {
        std::env::var("TEST_WORKER_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_fetcher-worker").to_owned())
    }

    /// Starts `command` (the Worker, or a wrapper that execs it) with exactly `env` and `PATH`,
    /// capturing its output. A benchmark run by hand may add settings of its own:
    /// `BENCH_WORKER_ENV="TOKIO_WORKER_THREADS=1 ..."` (a test run never sets it).
    pub fn start(mut command: Command, env: BTreeMap<String, String>, port: u16) -> WorkerProcess {
        let added = std::env::var("BENCH_WORKER_ENV").unwrap_or_default();
        let added = added
            .split_whitespace()
            .filter_map(|pair| pair.split_once('='));
        let mut child = command
            .env_clear()
            .envs(env)
            .envs(added)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fetcher-worker");
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            // Read as bytes to the end: a line that is not UTF-8 must not stop the reading
            // (the pipe would fill and block the Worker's next log line).
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut bytes = Vec::new();
                while matches!(reader.read_until(b'\n', &mut bytes), Ok(n) if n > 0) {
                    let line = String::from_utf8_lossy(&bytes);
                    let line = line.trim_end_matches(['\n', '\r']);
                    if std::env::var_os("TEST_LOG").is_some() {
                        eprintln!("[worker] {line}");
                    }
                    let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
                    out.push_str(line);
                    out.push('\n');
                    drop(out);
                    bytes.clear();
                }
            });
        }
        WorkerProcess {
            child,
            port,
            output,
        }
    }

    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// GET `path` on the health port: status code and body.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.port, path)
    }

    pub async fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if let Some((200, _)) = self.get("/readyz") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Worker never became ready; output:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits until `times` lines of the output match `matches`; `what` names them in the failure.
    pub async fn wait_for_lines(
        &self,
        what: &str,
        times: usize,
        within: Duration,
        matches: impl Fn(&str) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let output = self.output();
            let found = output.lines().filter(|line| matches(line)).count();
            if found >= times {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{found} of {times} lines of {what} logged within {within:?}; output:\n{output}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether the process has exited by now.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit; its exit code.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the Worker did not exit; output:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
