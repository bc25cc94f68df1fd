//! Finding jobs (IoT's `ListJobs` and `ListJobExecutionsForJob`): `GET /v1/fetcher` pages
//! through the caller's tenant's jobs, newest first, by keyset cursor; `GET
//! /v1/fetcher/{id}/executions` answers one job's executions. Every query parameter is checked;
//! the signature covers the query string, so a captured request cannot ask for other filters.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use contract::lifecycle::{ExecutionStatus, JobStatus};
use outbox::JobQuery;
use serde_json::json;

use super::auth::authenticate;
use super::cursor;
use super::document::{Execution, JobDocument};
use super::handlers::{admit, finish, signed_path, sized, unavailable, Refused};
use super::ControlApi;

/// A page's size when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 50;
/// The largest page.
pub const MAX_LIMIT: u32 = 250;

/// `GET /v1/fetcher`.
pub(super) async fn list(
    State(api): State<Arc<ControlApi>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let body = sized(body)?;
        let caller = authenticate(&api, &headers, &method, signed_path(&uri), "", &body)?;
        let page = Page::parse(uri.query().unwrap_or(""))?;
        if !api.store.lists_jobs() {
            return Err(Refused::new(
                StatusCode::NOT_IMPLEMENTED,
                "not_offered",
                "finding jobs is not offered in the Manager mode (STATE_BACKEND mongodb)",
            ));
        }
        let query = JobQuery {
            tenant: caller.tenant,
            status: page.status.map(JobStatus::as_str),
            source: page.source.as_deref(),
            created_after: page.created_after,
            created_before: page.created_before,
            after: page.cursor,
            // One more than asked: whether a next page exists, without another query.
            limit: page.limit + 1,
        };
        let mut jobs = api.store.list_jobs(&query).await.map_err(unavailable)?;
        let more = jobs.len() > page.limit as usize;
        jobs.truncate(page.limit as usize);
        let next = more
            .then(|| {
                jobs.last()
                    .map(|job| cursor::encode(job.created_at, job.job_id))
            })
            .flatten();
        let ids: Vec<_> = jobs.iter().map(|job| job.job_id).collect();
        let mut executions = api.store.executions_of(&ids).await.map_err(unavailable)?;
        let default = api.core.default_timeout();
        let items: Vec<JobDocument> = jobs
            .into_iter()
            .map(|job| {
                let runs = executions.remove(&job.job_id).unwrap_or_default();
                JobDocument::new(job, runs, default)
            })
            .collect();
        Ok(Json(json!({"items": items, "nextCursor": next})).into_response())
    };
    finish("list", answer.await)
}

/// `GET /v1/fetcher/{id}/executions`.
pub(super) async fn executions(
    State(api): State<Arc<ControlApi>>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let (caller, job_id, _) = admit(&api, &id, &method, signed_path(&uri), &headers, body)?;
        let mut status = None;
        for (name, value) in parameters(uri.query().unwrap_or(""))? {
            match name.as_str() {
                "status" if status.is_none() => status = Some(execution_status(&value)?),
                "status" => return Err(repeated(&name)),
                _ => return Err(unknown_parameter(&name, "status")),
            }
        }
        let job = api.store.job(job_id).await.map_err(unavailable)?;
        if job
            .filter(|job| job.tenant_id.as_deref() == caller.tenant)
            .is_none()
        {
            return Err(Refused::unknown());
        }
        let executions: Vec<Execution> = api
            .store
            .executions(job_id)
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|e| status.is_none_or(|s: ExecutionStatus| e.status == s.as_str()))
            .map(Execution::from)
            .collect();
        let id = job_id.as_hyphenated().to_string();
        Ok(Json(json!({"jobId": id, "executions": executions})).into_response())
    };
    finish("executions", answer.await)
}

/// The filters and position of a page of `GET /v1/fetcher`.
#[derive(Debug, Default, PartialEq)]
struct Page {
    status: Option<JobStatus>,
    /// The job message's `metadata.source`.
    source: Option<String>,
    created_after: Option<DateTime<Utc>>,
    created_before: Option<DateTime<Utc>>,
    cursor: Option<(DateTime<Utc>, uuid::Uuid)>,
    limit: u32,
}

const LIST_PARAMETERS: &str = "status, source, createdAfter, createdBefore, limit, cursor";
/// The longest `source` (a system's name; a longer one names no job's).
const MAX_SOURCE_CHARS: usize = 256;

impl Page {
    fn parse(query: &str) -> Result<Page, Refused> {
        let mut page = Page::default();
        let mut limit = None;
        let mut seen = Vec::new();
        for (name, value) in parameters(query)? {
            if seen.contains(&name) {
                return Err(repeated(&name));
            }
            match name.as_str() {
                "status" => page.status = Some(job_status(&value)?),
                "source" => page.source = Some(source(&value)?),
                "createdAfter" => page.created_after = Some(timestamp(&name, &value)?),
                "createdBefore" => page.created_before = Some(timestamp(&name, &value)?),
                "limit" => limit = Some(page_limit(&value)?),
                "cursor" => {
                    page.cursor = Some(cursor::decode(&value).ok_or_else(|| {
                        invalid("the cursor is not one a page of this API returned")
                    })?)
                }
                _ => return Err(unknown_parameter(&name, LIST_PARAMETERS)),
            }
            seen.push(name);
        }
        page.limit = limit.unwrap_or(DEFAULT_LIMIT);
        Ok(page)
    }
}

/// The query's `name=value` pairs, percent-decoded (`+` is taken as itself, so a timestamp's
/// offset may be written plainly).
fn parameters(query: &str) -> Result<Vec<(String, String)>, Refused> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| invalid(format!("query parameter {pair:?} has no value")))?;
            let name = percent_decoded(name)?;
            let value = percent_decoded(value)?;
            if value.is_empty() {
                return Err(invalid(format!("query parameter {name:?} is empty")));
            }
            Ok((name, value))
        })
        .collect()
}

fn percent_decoded(text: &str) -> Result<String, Refused> {
    let bad = || invalid("the query string has a malformed percent escape");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid("the query string is not UTF-8"))
}

/// A `source` of at most [`MAX_SOURCE_CHARS`] characters, none of them a control character.
fn source(value: &str) -> Result<String, Refused> {
    if value.chars().count() > MAX_SOURCE_CHARS || value.chars().any(char::is_control) {
        return Err(invalid(format!(
            "source must be at most {MAX_SOURCE_CHARS} characters, without control characters"
        )));
    }
    Ok(value.to_owned())
}

fn job_status(value: &str) -> Result<JobStatus, Refused> {
    value.parse().map_err(|_| {
        let known: Vec<_> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
        invalid(format!(
            "unknown status {value:?}; one of {}",
            known.join(", ")
        ))
    })
}

fn execution_status(value: &str) -> Result<ExecutionStatus, Refused> {
    value.parse().map_err(|_| {
        let known: Vec<_> = ExecutionStatus::ALL.iter().map(|s| s.as_str()).collect();
        invalid(format!(
            "unknown execution status {value:?}; one of {}",
            known.join(", ")
        ))
    })
}

fn timestamp(name: &str, value: &str) -> Result<DateTime<Utc>, Refused> {
    DateTime::parse_from_rfc3339(value)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| {
            invalid(format!(
                "{name} {value:?} is not an RFC 3339 timestamp (e.g. 2026-01-31T12:00:00Z)"
            ))
        })
}

fn page_limit(value: &str) -> Result<u32, Refused> {
    value
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| {
            invalid(format!(
                "limit {value:?} is not a whole number from 1 to {MAX_LIMIT}"
            ))
        })
}

fn repeated(name: &str) -> Refused {
    invalid(format!("query parameter {name:?} is given more than once"))
}

fn unknown_parameter(name: &str, known: &str) -> Refused {
    invalid(format!(
        "unknown query parameter {name:?}; this route takes {known}"
    ))
}

fn invalid(message: impl Into<String>) -> Refused {
    Refused::new(StatusCode::BAD_REQUEST, "invalid_query", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(query: &str) -> String {
        match Page::parse(query) {
            Ok(page) => panic!("{query} was taken: {page:?}"),
            Err(refused) => refused.message().to_owned(),
        }
    }

    #[test]
    fn a_page_takes_every_filter_once() {
        let id = uuid::Uuid::now_v7();
        let at = DateTime::from_timestamp_micros(1_000_000).unwrap();
        let next = cursor::encode(at, id);
        let page = Page::parse(&format!(
            "status=failed&source=plugin%20crm&createdAfter=2026-01-01T00:00:00%2B01:00&createdBefore=2026-02-01T00:00:00Z&limit=250&cursor={next}"
        ))
        .unwrap();
        assert_eq!(page.status, Some(JobStatus::Failed));
        assert_eq!(page.source.as_deref(), Some("plugin crm"));
        assert_eq!(
            page.created_after.unwrap().to_rfc3339(),
            "2025-12-31T23:00:00+00:00"
        );
        assert_eq!(page.limit, 250);
        assert_eq!(page.cursor, Some((at, id)));
        assert_eq!(Page::parse("").unwrap().limit, DEFAULT_LIMIT);
        // A plain `+` is the offset's, not a space.
        let plus = Page::parse("createdAfter=2026-01-01T00:00:00+01:00").unwrap();
        assert!(plus.created_after.is_some());
    }

    #[test]
    fn every_bad_parameter_is_refused_with_its_reason() {
        assert!(refused("status=exploded").contains("\"exploded\""));
        assert!(refused("status=FAILED").contains("unknown status"));
        assert!(refused("limit=0").contains("limit"));
        assert!(refused("limit=251").contains("1 to 250"));
        assert!(refused("limit=-1").contains("limit"));
        assert!(refused("limit=ten").contains("limit"));
        assert!(refused("createdAfter=yesterday").contains("createdAfter"));
        assert!(refused("createdBefore=2026-13-01T00:00:00Z").contains("createdBefore"));
        assert!(refused("cursor=abc").contains("cursor"));
        assert!(refused(&format!("source={}", "s".repeat(257))).contains("at most 256"));
        assert!(refused("source=a%0Ab").contains("control characters"));
        assert!(refused("datasource=ledger").contains("unknown query parameter \"datasource\""));
        assert!(refused("offset=10").contains("unknown query parameter"));
        assert!(refused("status=failed&status=completed").contains("more than once"));
        assert!(refused("status").contains("no value"));
        assert!(refused("status=").contains("empty"));
        assert!(refused("status=%zz").contains("percent"));
        assert!(refused("status=%ff").contains("UTF-8"));
    }
}
