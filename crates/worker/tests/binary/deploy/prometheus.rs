//! A private Prometheus (Debian's package, installed by `scripts/tools.sh` when absent): its own
//! port and temporary storage, a 1 s scrape and evaluation interval, a test copy of the rules,
//! and instant queries over its HTTP API.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::http_get;

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Installs Debian's `prometheus` package (the server and `promtool`) when absent, through
/// `scripts/tools.sh` (idempotent); panics when it cannot.
pub fn ensure_installed() {
    let installed = Command::new("bash")
        .arg(root().join("scripts/tools.sh"))
        .arg("prometheus")
        .output()
        .expect("running scripts/tools.sh");
    assert!(
        installed.status.success(),
        "Prometheus could not be installed: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
}

/// A running Prometheus; stopped and its storage removed on drop.
pub struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`host:port` of a Worker's health server) as job
    /// `fetcher-worker` and `rabbitmq` (`host:port` of RabbitMQ's Prometheus plugin) as job
    /// `rabbitmq` (its per-queue metrics, as the deploy kit scrapes them), evaluating `rules` (a
    /// rule file's text), and waits until it is ready.
    pub async fn start(target: &str, rabbitmq: &str, rules: &str) -> Prometheus {
        ensure_installed();
        let dir = std::env::temp_dir().join(format!("fetcher-prometheus-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("data")).expect("Prometheus's directory");
        std::fs::write(dir.join("rules.yml"), rules).expect("rules");
        let config = [
            "global:".to_owned(),
            "  scrape_interval: 1s".into(),
            "  scrape_timeout: 1s".into(),
            "  evaluation_interval: 1s".into(),
            "rule_files:".into(),
            format!("  - {}", dir.join("rules.yml").display()),
            "scrape_configs:".into(),
            "  - job_name: fetcher-worker".into(),
            "    static_configs:".into(),
            format!("      - targets: ['{target}']"),
            "  - job_name: rabbitmq".into(),
            "    metrics_path: /metrics/detailed".into(),
            "    params:".into(),
            "      family: [queue_coarse_metrics]".into(),
            "    static_configs:".into(),
            format!("      - targets: ['{rabbitmq}']"),
        ]
        .join("\n");
        std::fs::write(dir.join("prometheus.yml"), config).expect("config");
        let port = crate::harness::free_port();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("log"))
            .spawn()
            .expect("starting prometheus");
        let prometheus = Prometheus { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(port, "/-/ready").map(|(status, _)| status) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "Prometheus did not get ready: {}",
                prometheus.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        prometheus
    }

    /// Its log, for a failure's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query: the result's series, or the error Prometheus answered.
    pub fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let (status, body) = http_get(self.port, &format!("/api/v1/query?query={}", encode(expr)))
            .ok_or("Prometheus did not answer")?;
        let answer: Value =
            serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: {e}: {body}"))?;
        if answer["status"] != "success" {
            return Err(format!("HTTP {status}: {answer}"));
        }
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Waits until `expr` returns at least one series; the series.
    pub async fn wait_for(&self, expr: &str, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            match self.query(expr) {
                Ok(series) if !series.is_empty() => return series,
                Ok(_) => {}
                Err(error) => panic!("{expr}: {error}"),
            }
            assert!(
                Instant::now() < deadline,
                "{expr} returned nothing within {within:?}; Prometheus said:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
