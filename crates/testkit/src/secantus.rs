//! [`PrivateSecantus`]: a secantusdb (the MongoDB wire-compatible test server) of the test's own,
//! on its own port and data directory, in replica-set mode (set `secantus`, its default: it
//! needs no `replSetInitiate`), that the test may stop (SIGTERM or SIGKILL) and start again on
//! the same data. For the tests of what a restart of the state server does; every other test
//! shares the server of `scripts/services.sh` (`mongo`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The program `scripts/services.sh mongodb` installs (`FETCHER_TEST_VENV`, default
/// `/opt/fetcher-test-venv`).
fn program() -> PathBuf {
    let venv =
        std::env::var("FETCHER_TEST_VENV").unwrap_or_else(|_| "/opt/fetcher-test-venv".to_owned());
    PathBuf::from(venv).join("bin/secantusd-py")
}

/// A private secantusdb; stopped with SIGTERM and its data removed on `Drop`.
pub struct PrivateSecantus {
    pub port: u16,
    data: PathBuf,
    /// `--sync-on-commit`: see [`PrivateSecantus::start_durable`].
    durable: bool,
    child: Option<Child>,
}

impl PrivateSecantus {
    /// Starts it on a free port and a new data directory, and waits until it accepts
    /// connections. A missing program fails the test saying what to install.
    pub fn start() -> PrivateSecantus {
        PrivateSecantus::start_with(false)
    }

    /// [`start`](Self::start) with `--sync-on-commit`: every commit is on disk before it is
    /// acknowledged. Without it secantusdb acknowledges a multi-document transaction's
    /// `commitTransaction` before its log is on disk whatever its `writeConcern` says (it reads
    /// `j` on single writes only), so a SIGKILL may lose acknowledged commits — which a MongoDB
    /// replica set's default `w: majority` (journaled) never does. A test that SIGKILLs the
    /// server to see what the Worker does needs the server to keep what it acknowledged.
    pub fn start_durable() -> PrivateSecantus {
        PrivateSecantus::start_with(true)
    }

    fn start_with(durable: bool) -> PrivateSecantus {
        let data = std::env::temp_dir().join(format!(
            "fetcher-secantus-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&data).expect("the private secantusdb's data directory");
        let mut server = PrivateSecantus {
            port: crate::free_port(),
            data,
            durable,
            child: None,
        };
        server.resume();
        server
    }

    /// `mongodb://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("mongodb://127.0.0.1:{}/", self.port)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The server's process id while it runs (for its CPU time in `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts it again on the same port and data, and waits until it accepts connections.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "the private secantusdb already runs");
        let log = std::fs::File::create(self.data.with_extension("log"))
            .expect("the private secantusdb's log");
        let child = Command::new(program())
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--storage-path")
            .arg(&self.data)
            .args(self.durable.then_some("--sync-on-commit"))
            .current_dir(&self.data)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} (install it with `bash scripts/services.sh mongodb`): {e}",
                    program().display()
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the private secantusdb on port {} did not start: {}",
                self.port,
                std::fs::read_to_string(self.data.with_extension("log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends `signal` (`TERM` or `KILL`) and waits until the process is gone (at most 30 s
    /// after a SIGTERM, then SIGKILL).
    pub fn stop(&mut self, signal: &str) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PrivateSecantus {
    fn drop(&mut self) {
        self.stop("TERM");
        let _ = std::fs::remove_dir_all(&self.data);
        let _ = std::fs::remove_file(self.data.with_extension("log"));
    }
}
