//! The Worker's HTTP listener, for the health server and the control API alike: bounded so that
//! open sockets cannot starve the Worker of file descriptors. At most [`MAX_CONNECTIONS`] at once (more are closed on accept), request headers
//! within [`HEADER_READ_TIMEOUT`], every request answered within [`REQUEST_TIMEOUT`], and no
//! connection older than [`CONNECTION_LIFETIME`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Connections served at once; probes and scrapes need a handful.
pub const MAX_CONNECTIONS: usize = 64;
/// A client that has not sent its request headers by then is disconnected.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A request not answered by then gets 503 (the readiness checks take at most 3 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A kept-alive connection is closed after this long, whatever it does.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// How long open connections get to finish when the server stops.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// A bound server of `router`; `addr` is known before it serves (port 0 picks a free one).
pub struct HttpServer {
    listener: TcpListener,
    router: Router,
    /// `health` or `api`, the `server` label of its refused connections.
    name: &'static str,
}

impl HttpServer {
    pub async fn bind(
        name: &'static str,
        ip: IpAddr,
        port: u16,
        router: Router,
    ) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind(SocketAddr::new(ip, port)).await?;
        Ok(HttpServer {
            listener,
            router,
            name,
        })
    }

    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is cancelled (the very end of the drain, so `/readyz` keeps
    /// answering 503 while jobs finish).
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        let router = self.router.layer(axum::middleware::from_fn(answer_in_time));
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let connections = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors or a connection reset before accept: not fatal.
                    tracing::debug!(%error, server = self.name, "Could not accept a connection.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Over the limit, the connection is closed at once rather than left to wait.
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                crate::metrics::connection_refused(self.name);
                drop(stream);
                continue;
            };
            let service = TowerToHyperService::new(router.clone());
            let stop = stop.clone();
            connections.spawn(async move {
                let _slot = slot;
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT);
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                let mut connection = std::pin::pin!(connection);
                tokio::select! {
                    _ = connection.as_mut() => {}
                    _ = tokio::time::sleep(CONNECTION_LIFETIME) => {}
                    _ = stop.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
                    }
                }
            });
        }
        connections.close();
        let _ = tokio::time::timeout(CLOSE_GRACE, connections.wait()).await;
        Ok(())
    }
}

/// Answers 503 for a request its handler could not answer within [`REQUEST_TIMEOUT`].
async fn answer_in_time(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}
