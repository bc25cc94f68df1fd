//! Findings: the health server listened on every interface with no header-read timeout and no
//! connection limit: 200 connections sending partial headers stayed open past 45 s, each holding
//! a file descriptor the Worker needs for its databases and broker. Then, with the limit, about
//! 150 such connections from one address held all 64 places: signed control API requests got 0
//! answers of 15, and `/health` 0 of 15, which in Kubernetes fails the liveness probe and
//! restarts the pod with its jobs.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::harness::{connect_from, free_port, http_get_from, metric_sum, WorkerProcess, World};

/// The flooding client.
const FLOODER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
/// Another client: the kubelet's node, or an operator's `fetcherctl`.
const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// Slow connections the flooding client keeps trying to hold.
const FLOOD: usize = 300;
/// The Worker's `PER_ADDRESS_CONNECTIONS`.
const PER_ADDRESS: usize = 16;
/// Probes (and API requests) sent during a flood, each of which must be answered.
const PROBES: usize = 15;
/// Between two rounds of probes: the rounds span more than the header-read timeout (5 s), so
/// the flood's held connections are cut and taken again while they run.
const PROBE_INTERVAL: Duration = Duration::from_millis(400);

/// Whether the server has closed `stream` (a read gives end of file or an error).
async fn closed_by_server(stream: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0u8; 64];
    loop {
        match tokio::time::timeout(within, stream.read(&mut byte)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A response (an error page) may come before the close; keep reading.
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn slow_clients_are_cut_off_and_cannot_hold_more_than_the_limit() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let started = Instant::now();
    let mut held = Vec::new();
    for _ in 0..200 {
        let mut stream = TcpStream::connect(("127.0.0.1", worker.port))
            .await
            .expect("connect");
        // Headers that never end.
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            .await
            .expect("write");
        held.push(stream);
    }
    // Each is closed by the server: the ones over the limit at once, the others once the
    // header-read timeout (5 s) passes. Before, none was closed at all.
    for (i, stream) in held.iter_mut().enumerate() {
        assert!(
            closed_by_server(stream, Duration::from_secs(40)).await,
            "connection {i} still open {:?} after it was opened",
            started.elapsed()
        );
    }
    // Meanwhile and afterwards, probes are answered.
    assert_eq!(worker.get("/health").map(|(code, _)| code), Some(200));
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert!(
        crate::harness::metric_sum(&metrics, "fetcher_health_connections_refused_total", "") >= 1.0,
        "no connection was refused over the limit:\n{metrics}"
    );
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn health_bind_limits_the_interface() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    env.insert("HEALTH_BIND".into(), "127.0.0.1".into());
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    // 127.0.0.2 is this machine too, but not the address the server is bound to.
    assert!(TcpStream::connect(("127.0.0.2", port)).await.is_err());
    drop(worker);

    let port = free_port();
    let worker = WorkerProcess::spawn(world.env(port), port);
    worker.wait_ready(Duration::from_secs(60)).await;
    assert!(
        TcpStream::connect(("127.0.0.2", port)).await.is_ok(),
        "the default (0.0.0.0) answers on every address"
    );
    drop(worker);
    world.cleanup().await;
}

/// A client at one address keeping [`FLOOD`] connections open whose request headers never end,
/// so that it holds every place it can get all along. A connection the server cut at the
/// header-read timeout is opened again at once; one refused on accept a second later, each
/// connection's retries a few milliseconds apart from the next one's, so that a place the
/// server frees is taken again within milliseconds. Dropping it closes them all.
struct Flood {
    _connections: JoinSet<()>,
}

impl Flood {
    fn start(source: IpAddr, port: u16) -> Flood {
        let mut connections = JoinSet::new();
        for i in 0..FLOOD {
            let phase = Duration::from_secs(1) * i as u32 / FLOOD as u32;
            connections.spawn(async move {
                tokio::time::sleep(phase).await;
                loop {
                    let opened = Instant::now();
                    if let Ok(mut stream) = connect_from(source, port).await {
                        let partial = b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
                        if stream.write_all(partial).await.is_ok() {
                            let mut sink = Vec::new();
                            // Until the server closes it (end of file or a reset).
                            let _ = stream.read_to_end(&mut sink).await;
                        }
                    }
                    if opened.elapsed() < Duration::from_secs(1) {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            });
        }
        Flood {
            _connections: connections,
        }
    }
}

/// The Worker's `fetcher_health_connections_refused_total` for `server` and `reason`, read from
/// [`OTHER`] (the flooding address may have no place left to ask from).
async fn refused(port: u16, server: &str, reason: &str) -> f64 {
    let (_, metrics) = http_get_from(OTHER, port, "/metrics")
        .await
        .expect("metrics answered");
    let server = format!("server=\"{server}\"");
    let reason = format!("reason=\"{reason}\"");
    metrics
        .lines()
        .filter(|line| line.contains(&server) && line.contains(&reason))
        .map(|line| metric_sum(line, "fetcher_health_connections_refused_total", ""))
        .sum()
}

/// Waits until more than `above` connections to `server` were refused at the flooding address's
/// limit: the address holds its [`PER_ADDRESS`] places and keeps asking for more.
async fn wait_refused_over(health_port: u16, server: &str, above: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = refused(health_port, server, "per_address").await;
        if now > above {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{server}: {now} connections refused at the address limit after 60 s, expected over {above}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_flood_of_the_control_api_from_one_address_blocks_neither_probes_nor_other_clients() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let flood = Flood::start(FLOODER, api.port);
    // The flood is under way: as many connections turned away as its first wave holds beyond the
    // address's share. Before, its first 64 held every place of the control API, and the
    // requests below all failed (connection reset).
    let before = wait_refused_over(worker.port, "api", (FLOOD - PER_ADDRESS - 1) as f64).await;

    let mut unanswered = Vec::new();
    for i in 0..PROBES {
        tokio::time::sleep(PROBE_INTERVAL).await;
        // The probes come from the flooding address itself: the API's flood is not the health
        // server's business, whoever sends it.
        for path in ["/health", "/readyz"] {
            let answer = http_get_from(FLOODER, worker.port, path).await;
            if answer.as_ref().map(|(code, _)| *code) != Some(200) {
                unanswered.push(format!("{path} #{i}: {answer:?}"));
            }
        }
        // A job nobody knows: answered 404 once the signature was checked.
        match api.send_from(OTHER, "GET", Uuid::new_v4(), "").await {
            Ok((404, _)) => {}
            other => unanswered.push(format!("API GET #{i}: {other:?}")),
        }
    }
    assert!(
        unanswered.is_empty(),
        "not answered during the flood:\n{}",
        unanswered.join("\n")
    );
    // The flood lasted through the probes: its address was still turned away after them.
    wait_refused_over(worker.port, "api", before).await;
    assert_eq!(
        refused(worker.port, "api", "total").await,
        0.0,
        "one address filled the control API's whole budget"
    );
    drop(flood);
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn a_flood_of_the_health_port_from_one_address_leaves_another_addresss_probes_answered() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let flood = Flood::start(FLOODER, worker.port);
    let before = wait_refused_over(worker.port, "health", (FLOOD - PER_ADDRESS - 1) as f64).await;

    let mut unanswered = Vec::new();
    for i in 0..PROBES {
        tokio::time::sleep(PROBE_INTERVAL).await;
        // As the kubelet probes from its node's address: a container's startup, liveness and
        // readiness probes (at most one of each at a time), here all at once, and a scrape.
        let (health, ready, live, metrics) = tokio::join!(
            http_get_from(OTHER, worker.port, "/health"),
            http_get_from(OTHER, worker.port, "/readyz"),
            http_get_from(OTHER, worker.port, "/health"),
            http_get_from(OTHER, worker.port, "/metrics"),
        );
        for (path, answer) in [
            ("/health", health),
            ("/readyz", ready),
            ("/health", live),
            ("/metrics", metrics),
        ] {
            if answer.as_ref().map(|(code, _)| *code) != Some(200) {
                unanswered.push(format!("{path} #{i}: {answer:?}"));
            }
        }
    }
    assert!(
        unanswered.is_empty(),
        "not answered during the flood:\n{}",
        unanswered.join("\n")
    );
    wait_refused_over(worker.port, "health", before).await;
    assert_eq!(refused(worker.port, "health", "total").await, 0.0);
    drop(flood);
    drop(worker);
    world.cleanup().await;
}
