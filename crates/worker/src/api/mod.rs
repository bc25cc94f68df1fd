//! The control API on `HEALTH_BIND`:`API_PORT` (lifecycle §3): `GET /v1/fetcher/{id}` (the job
//! document), `POST /v1/fetcher/{id}/cancel`, `DELETE /v1/fetcher/{id}`, and finding jobs:
//! `GET /v1/fetcher` (a page of the tenant's jobs) and `GET /v1/fetcher/{id}/executions`. Every
//! request is signed like a job message with the internal key, over its path and query string;
//! nothing is read before the signature holds.
//!
//! - `auth.rs`: size and signature, before anything else.
//! - `document.rs`: the job document.
//! - `handlers.rs`: the routes on one job (bodies read by `contract::lifecycle::parse_options`); what a request changes is [`ControlStore::control`]'s.
//! - `listing.rs`: finding jobs, its query parameters checked; `cursor.rs`: its page cursor.
//! - `store.rs`: [`ControlStore`], the API's port on either state backend (PostgreSQL, or the
//!   Manager's MongoDB, where finding jobs is not offered).

mod auth;
mod cursor;
mod document;
mod handlers;
mod listing;
mod store;

pub use store::ControlStore;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;

use crate::job::JobCore;

/// Request bodies above this are refused (`413`).
pub const MAX_BODY_BYTES: usize = 16 << 10;

/// What the control API answers from and changes.
pub struct ControlApi {
    pub store: Arc<dyn ControlStore>,
    /// The job core: its settings (keys, signature policy, source, lease) are the API's; it
    /// publishes the events of a request and deletes a job's object.
    pub core: Arc<JobCore>,
}

/// The API's routes.
pub fn router(api: Arc<ControlApi>) -> Router {
    Router::new()
        .route("/v1/fetcher", get(listing::list))
        .route("/v1/fetcher/{id}/executions", get(listing::executions))
        .route(
            "/v1/fetcher/{id}",
            get(handlers::describe).delete(handlers::delete),
        )
        .route(
            "/v1/fetcher/{id}/cancel",
            axum::routing::post(handlers::cancel),
        )
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES + 1))
        .with_state(api)
}
