//! The Worker's HTTP listener, one for the health server and another for the control API: bounded
//! so that open sockets cannot starve the Worker of file descriptors, nor one client the others.
//!
//! Each listener holds at most [`MAX_CONNECTIONS`] connections, and at most
//! [`PER_ADDRESS_CONNECTIONS`] from one address (an IPv6 client: from one /64); more are closed on
//! accept and counted in `fetcher_health_connections_refused_total` by `server` and `reason` (`total`,
//! `per_address`). Request headers must arrive within [`HEADER_READ_TIMEOUT`], every request is
//! answered within [`REQUEST_TIMEOUT`], and no connection lives longer than
//! [`CONNECTION_LIFETIME`].
//!
//! The probes keep answering while the control API is flooded because the two never share a
//! listener or a budget: the health server (`/health`, `/readyz`, `/metrics`) has its own port and
//! its own limits, and the configuration refuses `API_PORT` equal to `HEALTH_PORT`. A flood of
//! the health port itself from one address takes a quarter of its budget, which leaves the
//! kubelet (whose probes all come from its node's address) the other three quarters; and the
//! kubelet's own probes cannot use up their address's share: it runs each probe of a container
//! (startup, liveness, readiness) one at a time, and each is answered within a few seconds.
//! Many addresses together can still fill a listener, which is why the deploy kit's network
//! policy admits only the nodes and the monitoring namespace to the health port.

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

mod peers;

use peers::Peers;

/// Connections served at once; probes and scrapes need a handful.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections served at once from one address: a quarter of [`MAX_CONNECTIONS`], so that one
/// client holds at most that much, with room for the kubelet's three probes (one connection each
/// at a time, plus the ones still closing) and a scrape.
pub const PER_ADDRESS_CONNECTIONS: usize = 16;
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
        let peers = Peers::new(PER_ADDRESS_CONNECTIONS);
        let connections = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors or a connection reset before accept: not fatal.
                    tracing::debug!(%error, server = self.name, "Could not accept a connection.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Over a limit, the connection is closed at once rather than left to wait. The
            // address's share is taken first, so that a flooding address's extra connections
            // never hold one of the server's places, even for a moment.
            let Some(peer_slot) = peers.enter(peer.ip()) else {
                crate::metrics::connection_refused(self.name, "per_address");
                drop(stream);
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                crate::metrics::connection_refused(self.name, "total");
                drop(stream);
                continue;
            };
            let service = TowerToHyperService::new(router.clone());
            let stop = stop.clone();
            connections.spawn(async move {
                let _slots = (slot, peer_slot);
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
