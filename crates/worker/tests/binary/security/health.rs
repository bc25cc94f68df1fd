//! Finding: the health server listened on every interface with no header-read timeout and no
//! connection limit: 200 connections sending partial headers stayed open past 45 s, each holding
//! a file descriptor the Worker needs for its databases and broker.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{free_port, WorkerProcess, World};

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
        crate::harness::metric_sum(&metrics, "health_connections_refused_total", "") >= 1.0,
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
