//! A private pysqlbridge (the read-only TDS stand-in of docs/TEST-SERVERS.md §2) per test,
//! serving the test's own JSON tables on a free port, and the `DATASOURCE_*` variables of a
//! datasource on it.
//!
//! pysqlbridge comes from the virtual environment `scripts/services.sh sqlserver` installs
//! (`FETCHER_TEST_VENV`, default `/opt/fetcher-test-venv`). A missing one, or a server that does
//! not start listening, fails the test with a message saying so.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const USER: &str = "reader";
pub const PASSWORD: &str = "Reader_pw1";

/// A pysqlbridge serving `tables` from a directory of its own; killed and removed on drop.
pub struct SqlBridge {
    pub port: u16,
    dir: PathBuf,
    child: Child,
}

impl SqlBridge {
    /// Starts a server with each `(name, rows)` as a JSON table, and waits until it listens.
    pub fn start(tables: &[(&str, Value)]) -> SqlBridge {
        let dir = std::env::temp_dir().join(format!("fetcher-sqlb-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        let mut entries = Vec::new();
        for (name, rows) in tables {
            let file = format!("{name}.json");
            std::fs::write(dir.join(&file), rows.to_string()).expect("write a table");
            entries.push(json!({"name": name, "json": file}));
        }
        let config = json!({
            "logins": [{"user": USER, "password": PASSWORD}],
            "tables": entries,
        });
        std::fs::write(dir.join("config.json"), config.to_string()).expect("write the config");
        let venv = std::env::var("FETCHER_TEST_VENV")
            .unwrap_or_else(|_| "/opt/fetcher-test-venv".to_owned());
        let bin = PathBuf::from(venv).join("bin/pysqlbridge");
        let port = crate::free_port();
        let log = std::fs::File::create(dir.join("server.log")).expect("create the log");
        let child = Command::new(&bin)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--config",
            ])
            .arg(dir.join("config.json"))
            .arg("--log")
            .arg(dir.join("queries.log"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} (install it with `bash scripts/services.sh sqlserver`): {e}",
                    bin.display()
                )
            });
        let mut server = SqlBridge { port, dir, child };
        server.wait_listening();
        server
    }

    /// Waits until the port accepts connections; fails if the server exits or takes a minute.
    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("pysqlbridge exited ({status}): {}", self.server_log());
            }
            assert!(
                Instant::now() < deadline,
                "pysqlbridge did not listen within a minute: {}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Every statement the server received, as its `--log` wrote them.
    pub fn queries(&self) -> String {
        std::fs::read_to_string(self.dir.join("queries.log")).unwrap_or_default()
    }

    /// The `DATASOURCE_<group>_*` variables of a datasource named `name` on this server.
    pub fn vars(&self, group: &str, name: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let prefix = format!("DATASOURCE_{group}_");
        let mut vars: Vec<(String, String)> = [
            ("CONFIG_NAME", name.to_owned()),
            ("TYPE", "SQL_SERVER".to_owned()),
            ("HOST", "127.0.0.1".to_owned()),
            ("PORT", self.port.to_string()),
            ("DATABASE", "ledger".to_owned()),
            ("USER", USER.to_owned()),
            ("PASSWORD", PASSWORD.to_owned()),
        ]
        .into_iter()
        .map(|(suffix, value)| (format!("{prefix}{suffix}"), value))
        .collect();
        for (suffix, value) in extra {
            vars.push((format!("{prefix}{suffix}"), (*value).to_owned()));
        }
        vars
    }
}

/// The established TCP connections to `port` on 127.0.0.1 made from this machine (its clients'
/// side, from `/proc/net/tcp`).
pub fn client_connections(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let remote = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(2) == Some(&remote.as_str()) && fields.get(3) == Some(&"01")
        })
        .count()
}

impl Drop for SqlBridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
