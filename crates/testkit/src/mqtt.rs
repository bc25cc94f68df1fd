//! The MQTT side of the tests: the local Mosquitto (`TEST_MQTT_URL`), a subscriber that is the
//! distribution's `mosquitto_sub` (a client no one here wrote), and a private Mosquitto a test
//! may stop and start without touching anyone else's.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shared broker's URL: `TEST_MQTT_URL`, or the local Mosquitto.
pub fn mqtt_url() -> String {
    std::env::var("TEST_MQTT_URL").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".to_owned())
}

/// A unique topic prefix for one test: `fetcher-test/<uuid>`.
pub fn unique_prefix() -> String {
    format!("fetcher-test/{}", uuid::Uuid::new_v4().simple())
}

/// `host` and `port` of an `mqtt://host:port` URL.
fn host_port(url: &str) -> (String, u16) {
    let rest = url.trim_start_matches("mqtt://").trim_end_matches('/');
    match rest.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().expect("MQTT port")),
        None => (rest.to_owned(), 1883),
    }
}

/// One message `mosquitto_sub -v` printed: its topic and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub topic: String,
    pub payload: String,
}

/// `mosquitto_sub -v -q 1 -t <filter>` on a broker, its lines collected as they come; killed on
/// drop.
pub struct Subscriber {
    child: Child,
    lines: Arc<Mutex<Vec<Received>>>,
}

impl Subscriber {
    /// Subscribes to `filter` on `url` and returns once the subscription is in place: it
    /// publishes a probe under the filter's prefix until `mosquitto_sub` prints it (a
    /// subscription has no other outward sign). Panics, saying what to start, when
    /// `mosquitto_sub` is missing or the broker does not answer.
    pub fn start(url: &str, filter: &str) -> Subscriber {
        Subscriber::spawn(url, filter, &[])
    }

    /// [`start`](Self::start) with a persistent session (`-c`, a fixed client id): a broker that
    /// keeps sessions across its restarts ([`PrivateBroker`]) queues what comes while this
    /// subscriber reconnects.
    pub fn persistent(url: &str, filter: &str) -> Subscriber {
        let id = format!("fetcher-test-sub-{}", uuid::Uuid::new_v4().simple());
        Subscriber::spawn(url, filter, &["-c", "-i", &id])
    }

    fn spawn(url: &str, filter: &str, extra: &[&str]) -> Subscriber {
        let (host, port) = host_port(url);
        // `stdbuf`: to a pipe, mosquitto_sub's stdout is block-buffered; a line per message.
        let mut child = Command::new("stdbuf")
            .args([
                "-oL",
                "mosquitto_sub",
                "-h",
                &host,
                "-p",
                &port.to_string(),
                "-q",
                "1",
                "-v",
                "-t",
                filter,
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto_sub (install mosquitto-clients: scripts/services.sh mosquitto)");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let (topic, payload) = line.split_once(' ').unwrap_or((&line, ""));
                sink.lock().unwrap().push(Received {
                    topic: topic.to_owned(),
                    payload: payload.to_owned(),
                });
            }
        });
        let subscriber = Subscriber { child, lines };
        let probe = format!(
            "{}/probe/{}",
            filter.trim_end_matches("/#").trim_end_matches('#'),
            uuid::Uuid::new_v4().simple()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let published = Command::new("mosquitto_pub")
                .args([
                    "-h",
                    &host,
                    "-p",
                    &port.to_string(),
                    "-q",
                    "1",
                    "-t",
                    &probe,
                    "-m",
                    "probe",
                ])
                .status()
                .expect("mosquitto_pub (install mosquitto-clients)");
            assert!(
                published.success() || Instant::now() < deadline,
                "no MQTT broker at {url} (start it: scripts/services.sh mosquitto)"
            );
            let wait = Instant::now() + Duration::from_millis(500);
            while Instant::now() < wait {
                if subscriber
                    .lines
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|r| r.topic == probe)
                {
                    return subscriber;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(
                Instant::now() < deadline,
                "mosquitto_sub on {url} never received its probe"
            );
        }
    }

    /// Every message so far, probes left out.
    pub fn received(&self) -> Vec<Received> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|r| !r.topic.contains("/probe/"))
            .cloned()
            .collect()
    }

    /// Waits up to `timeout` until `done` holds of what was received; returns it either way.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if done(&received) || Instant::now() >= deadline {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Mosquitto of one test's own, on a free port, that it may stop and start; killed on drop.
/// It keeps persistent sessions (and their queued messages) across a stop and a start.
pub struct PrivateBroker {
    port: u16,
    config: PathBuf,
    data: PathBuf,
    child: Option<Child>,
}

impl PrivateBroker {
    /// Starts it and waits until it listens.
    pub fn start() -> PrivateBroker {
        let port = crate::free_port();
        let config = std::env::temp_dir().join(format!("fetcher-test-mosquitto-{port}.conf"));
        let data = std::env::temp_dir().join(format!("fetcher-test-mosquitto-{port}"));
        std::fs::create_dir_all(&data).expect("mosquitto data directory");
        std::fs::write(
            &config,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
                 persistence_location {}/\n",
                data.display()
            ),
        )
        .expect("mosquitto config");
        let mut broker = PrivateBroker {
            port,
            config,
            data,
            child: None,
        };
        broker.resume();
        broker
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Stops the broker as an operator would (SIGTERM: it saves its sessions and closes its
    /// clients' connections) and waits until it exited.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it listens.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto (install it: scripts/services.sh mosquitto)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "private mosquitto did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.config);
        let _ = std::fs::remove_dir_all(&self.data);
    }
}
