//! The health server on `HEALTH_PORT`: `/health` (liveness), `/readyz` (one check per
//! dependency, 503 from the moment the drain starts) and `/metrics` (Prometheus text).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long one dependency check may take before it counts as down.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// The outcome of one check: `Err` carries a redacted reason.
pub type CheckResult = Result<(), String>;

/// One dependency's readiness check.
pub trait Check: Send + Sync {
    fn name(&self) -> &'static str;
    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>>;
}

/// What `/readyz` reports on.
pub struct Readiness {
    draining: AtomicBool,
    checks: Vec<Box<dyn Check>>,
}

impl Readiness {
    pub fn new(checks: Vec<Box<dyn Check>>) -> Arc<Readiness> {
        Arc::new(Readiness {
            draining: AtomicBool::new(false),
            checks,
        })
    }

    /// From now on `/readyz` answers 503: the Worker is leaving.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Runs every check at once; the report and whether all passed.
    pub async fn report(&self) -> (bool, Value) {
        let runs = self.checks.iter().map(|c| async move {
            let started = Instant::now();
            let outcome = match tokio::time::timeout(CHECK_TIMEOUT, c.check()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("no answer within {CHECK_TIMEOUT:?}")),
            };
            (c.name(), outcome, started.elapsed())
        });
        let mut all_up = true;
        let mut checks = Map::new();
        for (name, outcome, latency) in futures_util::future::join_all(runs).await {
            let latency_ms = latency.as_secs_f64() * 1000.0;
            let entry = match outcome {
                Ok(()) => json!({"status": "up", "latency_ms": latency_ms}),
                Err(error) => {
                    all_up = false;
                    json!({"status": "down", "latency_ms": latency_ms, "error": error})
                }
            };
            checks.insert(name.to_owned(), entry);
        }
        let draining = self.is_draining();
        let status = match (draining, all_up) {
            (true, _) => "draining",
            (false, true) => "ready",
            (false, false) => "not ready",
        };
        (
            all_up && !draining,
            json!({"status": status, "checks": checks}),
        )
    }
}

#[derive(Clone)]
struct AppState {
    readiness: Arc<Readiness>,
    metrics: PrometheusHandle,
}

/// The health server's routes.
pub fn router(readiness: Arc<Readiness>, metrics: PrometheusHandle) -> Router {
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(AppState { readiness, metrics })
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (ready, body) = state.readiness.report().await;
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

async fn render_metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

/// A bound health server; `addr` is known before it serves (port 0 picks a free one).
pub struct HealthServer {
    listener: TcpListener,
    router: Router,
}

impl HealthServer {
    pub async fn bind(port: u16, router: Router) -> std::io::Result<HealthServer> {
        let listener = TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))).await?;
        Ok(HealthServer { listener, router })
    }

    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is cancelled (the very end of the drain, so `/readyz` keeps
    /// answering 503 while jobs finish).
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    }
}
