//! The drain is bounded by its settings even when name resolution hangs: a job on a datasource
//! whose name the DNS server never answers fails at the connect timeout, but the lookup it
//! started goes on in a blocking thread for as long as the resolver's timeouts say. The Worker
//! must still exit within `READYZ_DRAIN_DELAY_SEC` + `SHUTDOWN_GRACE_SEC` + the close budget.
//!
//! The Worker runs in a mount namespace of its own whose `/etc/resolv.conf` names a local
//! server that reads queries and never answers: that needs root (`unshare -m`, port 53). Where
//! either is refused the test fails, naming what it needs.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;
use worker::config::ShutdownSettings;
use worker::shutdown::drain_limit;

use crate::harness::{free_port, WorkerProcess, World};

const SHUTDOWN: ShutdownSettings = ShutdownSettings {
    readyz_drain_delay: Duration::from_secs(2),
    grace: Duration::from_secs(5),
};
/// Beyond the drain's bound: SIGTERM's delivery, and the exit once the drain ended.
const EXIT_ALLOWANCE: Duration = Duration::from_secs(5);
/// One lookup against the silent server: 30 s a try, two tries. Far beyond the drain's bound.
const RESOLV_OPTIONS: &str = "options timeout:30 attempts:2";

/// A DNS server that never answers, until dropped.
struct SilentDns {
    address: String,
    stop: Arc<AtomicBool>,
}

impl SilentDns {
    fn start() -> Option<SilentDns> {
        let id = Uuid::new_v4().as_bytes()[..2].to_vec();
        let address = format!("127.53.{}.{}", id[0], id[1].max(1));
        let socket = UdpSocket::bind((address.as_str(), 53)).ok()?;
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .ok()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while !stopped.load(Ordering::SeqCst) {
                let _ = socket.recv_from(&mut buffer);
            }
        });
        Some(SilentDns { address, stop })
    }
}

impl Drop for SilentDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts the Worker with `resolv_conf` bind-mounted over `/etc/resolv.conf`, as the harness
/// starts it otherwise.
fn spawn_with_resolver(world: &World, port: u16, resolv_conf: &str, host: &str) -> WorkerProcess {
    let mut env = world.env(port);
    for (k, v) in [
        ("SHUTDOWN_GRACE_SEC", SHUTDOWN.grace.as_secs().to_string()),
        (
            "READYZ_DRAIN_DELAY_SEC",
            SHUTDOWN.readyz_drain_delay.as_secs().to_string(),
        ),
        ("DATASOURCE_SILENT_TYPE", "POSTGRESQL".to_owned()),
        ("DATASOURCE_SILENT_HOST", host.to_owned()),
        ("DATASOURCE_SILENT_DATABASE", "nowhere".to_owned()),
        ("DATASOURCE_SILENT_USER", "nobody".to_owned()),
        ("DATASOURCE_SILENT_SSLMODE", "disable".to_owned()),
    ] {
        env.insert(k.to_owned(), v);
    }
    let mut command = Command::new("unshare");
    command.args([
        "-m",
        "sh",
        "-c",
        r#"mount --bind "$0" /etc/resolv.conf && exec "$1""#,
        resolv_conf,
        &WorkerProcess::binary(),
    ]);
    WorkerProcess::start(command, env, port)
}

fn private_mounts_allowed() -> bool {
    Command::new("unshare")
        .args(["-m", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn a_hanging_name_lookup_does_not_hold_the_drain() {
    // A test that cannot set up fails loudly rather than passing without proving anything.
    let dns = SilentDns::start().expect(
        "a DNS server on 127.53.x.y:53 (needs root, as `make test` on the project's machine has)",
    );
    assert!(
        private_mounts_allowed(),
        "`unshare -m` is refused: this test needs root to give the Worker its own resolv.conf"
    );
    let world = World::new().await;
    let resolv_conf = std::env::temp_dir().join(format!("fetcher-resolv-{}.conf", world.id));
    std::fs::write(
        &resolv_conf,
        format!("nameserver {}\n{RESOLV_OPTIONS}\n", dns.address),
    )
    .expect("write resolv.conf");
    let port = free_port();
    let host = format!("silent{}", world.id);
    let mut worker = spawn_with_resolver(&world, port, &resolv_conf.to_string_lossy(), &host);
    worker.wait_ready(Duration::from_secs(60)).await;
    let mut events = world.listen().await;

    // The job fails at the engine's connect timeout; its lookup goes on.
    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "silent", "payments", &["id"]),
            None,
            &[],
        )
        .await;
    let event = events.event_for(job_id, Duration::from_secs(60)).await;
    assert_eq!(event.delivery.routing_key.as_str(), "job.failed");

    worker.signal("TERM");
    let signalled = Instant::now();
    let bound = drain_limit(&SHUTDOWN) + EXIT_ALLOWANCE;
    assert_eq!(worker.wait_exit(bound).await, Some(0));
    eprintln!("drain: exited {:?} after SIGTERM", signalled.elapsed());
    assert!(
        worker.output().contains("Fetcher Worker stopped."),
        "the drain did not end by itself:\n{}",
        worker.output()
    );
    let _ = std::fs::remove_file(&resolv_conf);
    world.cleanup().await;
}
