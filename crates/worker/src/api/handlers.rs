//! The routes on one job. Each answers JSON; a refusal is `{"error": …, "code": …}` with the status
//! of lifecycle §3, and changes nothing.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use contract::lifecycle::{parse_options, ControlOptions, Refusal, Step, Then};
use outbox::ControlRequest;
use serde_json::json;
use uuid::Uuid;

use super::auth::{authenticate, Caller};
use super::document::JobDocument;
use super::{ControlApi, MAX_BODY_BYTES};
use crate::job::{after_commit, Committed};
use crate::metrics;

/// A refused request: its status, a text safe to show, a stable code.
#[derive(Debug)]
pub(super) struct Refused {
    status: StatusCode,
    message: String,
    code: &'static str,
}

impl Refused {
    pub(super) fn unauthorized(code: &'static str) -> Refused {
        Refused {
            status: StatusCode::UNAUTHORIZED,
            message: "the request's signature is missing, stale or wrong".into(),
            code,
        }
    }

    pub(super) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> Refused {
        Refused {
            status,
            message: message.into(),
            code,
        }
    }

    pub(super) fn unknown() -> Refused {
        Refused::new(StatusCode::NOT_FOUND, "not_found", "no such job")
    }
}

#[cfg(test)]
impl Refused {
    pub(super) fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        metrics::api_rejected(self.code);
        let body = json!({"error": self.message, "code": self.code});
        (self.status, Json(body)).into_response()
    }
}

/// `GET /v1/fetcher/{id}`.
pub(super) async fn describe(
    State(api): State<Arc<ControlApi>>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let (caller, job_id, _) = admit(&api, &id, &method, contract_path(&uri), &headers, body)?;
        document(&api, job_id, &caller, StatusCode::OK).await
    };
    finish("describe", answer.await)
}

/// `POST /v1/fetcher/{id}/cancel`.
pub(super) async fn cancel(
    State(api): State<Arc<ControlApi>>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = change(&api, &id, &method, &uri, &headers, body, Change::Cancel);
    finish("cancel", answer.await)
}

/// `DELETE /v1/fetcher/{id}`.
pub(super) async fn delete(
    State(api): State<Arc<ControlApi>>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = change(&api, &id, &method, &uri, &headers, body, Change::Delete);
    finish("delete", answer.await)
}

/// What every request of one job goes through first, in this order: its size, its signature
/// over `signed` (the target as [`contract_path`] or [`signed_path`] gives it), its job id.
pub(super) fn admit<'h>(
    api: &ControlApi,
    id: &str,
    method: &Method,
    signed: &str,
    headers: &'h HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Caller<'h>, Uuid, Bytes), Refused> {
    let body = sized(body)?;
    let caller = authenticate(api, headers, method, signed, id, &body)?;
    let job_id = parse_id(id)?;
    Ok((caller, job_id, body))
}

/// What the signature of a route lifecycle §3 defines (`GET /v1/fetcher/{id}`, cancel, delete)
/// covers of its target: the path without its query string, as the contract says (every option
/// that changes what such a request does is in its signed body).
pub(super) fn contract_path(uri: &Uri) -> &str {
    uri.path()
}

/// What the signature of a route with query parameters (the job list, one job's executions)
/// covers of its target: the path with its query string, so a captured request cannot be sent
/// again with other filters.
pub(super) fn signed_path(uri: &Uri) -> &str {
    uri.path_and_query().map_or(uri.path(), |p| p.as_str())
}

/// The two requests that change a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Cancel,
    Delete,
}

/// A cancel or delete: admitted, its body read (only a cancel may carry `reasonCode`), applied.
async fn change(
    api: &ControlApi,
    id: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    change: Change,
) -> Result<Response, Refused> {
    let (caller, job_id, body) = admit(api, id, method, contract_path(uri), headers, body)?;
    let options = parse_options(&body, change == Change::Cancel)
        .map_err(|m| Refused::new(StatusCode::BAD_REQUEST, "invalid_body", m))?;
    let force = options.force;
    let step = match change {
        Change::Cancel => Step::Cancel { force },
        Change::Delete => Step::Delete { force },
    };
    control(api, job_id, &caller, headers, step, &options).await
}

pub(super) fn finish(route: &'static str, answer: Result<Response, Refused>) -> Response {
    let response = answer.unwrap_or_else(IntoResponse::into_response);
    metrics::api_request(route, response.status().as_u16());
    response
}

/// The body, unless it is over [`MAX_BODY_BYTES`] (checked before the signature is computed).
pub(super) fn sized(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Refused> {
    match body {
        Ok(body) if body.len() <= MAX_BODY_BYTES => Ok(body),
        Ok(_) => Err(too_large()),
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large()),
        Err(_) => Err(Refused::new(
            StatusCode::BAD_REQUEST,
            "unreadable_body",
            "the request body could not be read",
        )),
    }
}

fn too_large() -> Refused {
    Refused::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
    )
}

fn parse_id(id: &str) -> Result<Uuid, Refused> {
    Uuid::parse_str(id)
        .ok()
        .filter(|id| !id.is_nil())
        .ok_or_else(|| {
            Refused::new(
                StatusCode::BAD_REQUEST,
                "invalid_job_id",
                "the job id is not a UUID",
            )
        })
}

/// The job document with `status`; 404 when the job is unknown to the caller's tenant.
async fn document(
    api: &ControlApi,
    job_id: Uuid,
    caller: &Caller<'_>,
    status: StatusCode,
) -> Result<Response, Refused> {
    let job = api.store.job(job_id).await.map_err(unavailable)?;
    let Some(job) = job.filter(|job| job.tenant_id.as_deref() == caller.tenant) else {
        return Err(Refused::unknown());
    };
    let executions = api.store.executions(job_id).await.map_err(unavailable)?;
    let document = JobDocument::new(job, executions, api.core.default_timeout());
    Ok((status, Json(document)).into_response())
}

/// Applies a cancel or delete, publishes its events, deletes the object when asked, and
/// answers `202` with the job document.
async fn control(
    api: &ControlApi,
    job_id: Uuid,
    caller: &Caller<'_>,
    headers: &HeaderMap,
    step: Step,
    options: &ControlOptions,
) -> Result<Response, Refused> {
    let settings = api.core.settings();
    let publisher = format!("{}/api/{}", settings.worker_id, Uuid::new_v4().simple());
    let request_id = headers
        .get(contract::wire::REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok());
    let request = ControlRequest {
        job_id,
        tenant: caller.tenant,
        step,
        comment: options.comment.as_deref(),
        reason_code: options.reason_code.as_deref(),
        source: &settings.source,
        request_id,
        publisher: &publisher,
        lease: settings.lease,
    };
    let counted = |outcome| match step {
        Step::Cancel { .. } => metrics::cancel(outcome),
        _ => metrics::delete(outcome),
    };
    let controlled = api.store.control(&request).await.map_err(unavailable)?;
    let committed = match Committed::of(controlled) {
        Ok(committed) => committed,
        Err(Refusal::Unknown) => {
            counted("refused");
            return Err(Refused::unknown());
        }
        Err(Refusal::InvalidTransition { from }) => {
            counted("refused");
            return Err(Refused::new(
                StatusCode::CONFLICT,
                "invalid_state_transition",
                format!("the job is {from}"),
            ));
        }
    };
    counted("requested");
    tracing::info!(%job_id, status = %committed.transition.to.status, "Control request accepted.");
    // This replica's run of the job (if it runs it) learns of its cancel at once; another
    // replica's learns from the PostgreSQL store's NOTIFY, or, in the Manager mode, which has
    // none, from its next lease renewal.
    if matches!(committed.transition.then, Then::StopStatements { .. }) {
        api.core.wake(job_id);
    }
    after_commit(&api.core, job_id, caller.tenant, &publisher, committed).await;
    document(api, job_id, caller, StatusCode::ACCEPTED).await
}

pub(super) fn unavailable(error: outbox::OutboxError) -> Refused {
    tracing::warn!(%error, "A control request could not reach the state database.");
    Refused::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "state_database_unavailable",
        "the state database cannot be reached; try again",
    )
}
