//! GETs on a Worker's health port (also from another local address than `127.0.0.1`), and the
//! samples of its Prometheus metrics.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GET on a Worker's health port: status and body (`None` when nothing answered).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Some((status, body))
}

/// A connection to the Worker's `port` on `127.0.0.1` from the local address `source`: on Linux
/// every address of 127.0.0.0/8 is this machine's, so the Worker sees another client.
pub async fn connect_from(source: IpAddr, port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
}

/// [`http_get`] from the local address `source`, without blocking the test's runtime.
pub async fn http_get_from(source: IpAddr, port: u16, path: &str) -> Option<(u16, String)> {
    let exchange = async {
        let mut stream = connect_from(source, port).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()?
        .ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Some((status, body))
}

impl super::WorkerProcess {
    /// [`metric_sum`] of the Worker's `/metrics` as of now.
    pub fn metric(&self, name: &str, label: &str) -> f64 {
        let metrics = self.get("/metrics").expect("metrics").1;
        metric_sum(&metrics, name, label)
    }
}

/// The sum of a Prometheus counter's samples whose labels contain `label` (`""`: all).
pub fn metric_sum(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
