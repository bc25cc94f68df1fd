//! [`Watcher`]: the real `fetcherctl watch` run in the background, its output collected.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running `fetcherctl watch`, killed if the test ends before it does.
pub struct Watcher {
    child: Child,
    stderr: Receiver<String>,
    stdout: Option<JoinHandle<String>>,
}

/// How a watch ended, and everything it printed.
pub struct Finished {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Watcher {
    /// `fetcherctl watch <args>` with `env` added to [`super::fetcherctl`]'s.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Watcher {
        let mut command = super::fetcherctl();
        command.envs(env.iter().copied());
        Watcher::spawn(command, args)
    }

    /// `command` (the binary with its environment) run as `watch <args>`.
    pub fn spawn(mut command: Command, args: &[&str]) -> Watcher {
        command
            .arg("watch")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn fetcherctl watch");
        let stderr = child.stderr.take().expect("stderr");
        let (lines, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stdout = child.stdout.take().expect("stdout");
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        Watcher {
            child,
            stderr: receiver,
            stdout: Some(stdout),
        }
    }

    /// Waits for the line that says the queue is bound: events published after it are seen.
    /// Returns that line.
    pub fn wait_until_bound(&mut self) -> String {
        self.wait_for_line("Watching exchange")
    }

    /// Waits for the first stderr line that starts with `start`; returns it.
    pub fn wait_for_line(&mut self, start: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.starts_with(start) => return line,
                Ok(_) => {}
                Err(_) => {
                    let _ = self.child.kill();
                    let early = self.child.try_wait();
                    panic!("watch never printed `{start}…` (exit: {early:?})");
                }
            }
        }
    }

    /// Waits (up to 30 s) for the process to exit on its own.
    pub fn finish(mut self) -> Finished {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                panic!("watch did not exit within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = self
            .stdout
            .take()
            .expect("stdout reader")
            .join()
            .expect("stdout thread");
        let stderr: Vec<String> = self.stderr.iter().collect();
        Finished {
            success: status.success(),
            stdout,
            stderr: stderr.join("\n"),
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
