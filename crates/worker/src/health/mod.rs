//! The health server on `HEALTH_BIND`:`HEALTH_PORT`: `/health` (liveness), `/readyz` (one check
//! per dependency, 503 from the moment the drain starts) and `/metrics` (Prometheus text).
//!
//! - `readiness.rs`: the checks behind `/readyz`, cached for a moment.
//!
//! It is served by [`crate::http_server::HttpServer`], as the control API is.

mod readiness;

pub use readiness::{Check, CheckResult, Readiness};

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

#[derive(Clone)]
struct AppState {
    readiness: Arc<Readiness>,
    metrics: PrometheusHandle,
}

/// The health server's routes.
pub fn router(readiness: Arc<Readiness>, metrics: PrometheusHandle) -> Router {
    Router::new()
        // Alive, as upstream words it; also while the Worker waits for its dependencies at start
        // (a liveness probe must not restart a Worker that is only waiting).
        .route(
            "/health",
            get(|| async { Json(json!({"status": "healthy"})) }),
        )
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
        crate::metrics::render(&state.metrics),
    )
}
