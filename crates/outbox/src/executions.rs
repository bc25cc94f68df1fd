//! A job's executions (lifecycle §1): one per datasource, queued when the job is claimed,
//! moved as its run reports them, closed with the job's end and removed with its deletion.
//! Every end is written with its `job.execution.<op>` event's outbox row, in the transaction
//! of the change (lifecycle §4): an execution that ended has exactly one recorded end event.

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::event::{CloudEventAttributes, ExecutionBody, Operation, OutboundEvent};
use contract::lifecycle::{ExecutionStatus, JobProcessDetails};
use contract::message::MappedFields;
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::mirror;
use crate::outbox::{insert_leased, PendingEvent};
use crate::store::Store;

const STEP: &str = "recording executions";

/// One execution's state, as a run reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionReport {
    pub datasource: String,
    pub status: ExecutionStatus,
    /// Rows read so far (final once it ended).
    pub row_count: u64,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// The redacted error it ended with.
    pub error: Option<String>,
    /// Attempts the run made at it so far (0: not started; more than 1: it was retried,
    /// `JOB_RETRY_ATTEMPTS`).
    pub attempts: u32,
    /// The redacted error of its last attempt that failed and was retried.
    pub last_error: Option<String>,
}

/// Who an execution's events are about, and who publishes them right after the commit (their
/// rows are leased to it).
#[derive(Debug, Clone, Copy)]
pub struct ExecutionEvents<'a> {
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
    /// `STREAMING_CLOUDEVENTS_SOURCE`.
    pub source: &'a str,
    pub publisher: &'a str,
    pub lease: Duration,
    /// The W3C `traceparent` of the job's trace (telemetry on), carried by the events as
    /// `ce-traceparent`; `None` leaves them as they are without traces.
    pub traceparent: Option<&'a str>,
}

/// How the executions a job's end leaves open are closed: the waiting ones `CANCELED`, the
/// running ones `running` (with `error`).
#[derive(Debug, Clone, Copy)]
pub struct Close<'a> {
    pub running: ExecutionStatus,
    pub error: Option<&'a str>,
}

impl Close<'_> {
    /// Stopped on request, or because another datasource failed first.
    pub const CANCELED: Close<'static> = Close {
        running: ExecutionStatus::Canceled,
        error: None,
    };
}

impl Store {
    /// Writes a run's reports while `owner` holds the job (processing or being canceled); an
    /// execution that ended is not changed again. Returns the events of the ends written,
    /// leased to `events.publisher`. Nothing is written when `owner` lost the job.
    pub async fn record_executions(
        &self,
        job_id: Uuid,
        owner: &str,
        reports: &[ExecutionReport],
        events: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>> {
        let db = |e| OutboxError::sqlx(STEP, e);
        let mut tx = self.pool().begin().await.map_err(db)?;
        // Shared: the job's own transitions (its end, a cancel) wait for this one, and the
        // other way round, so a report never lands after the end that closed its execution.
        let held: Option<bool> = sqlx::query_scalar(
            "SELECT owner = $2 AND status IN ('processing', 'cancellation_in_progress')
             FROM jobs WHERE job_id = $1 FOR SHARE",
        )
        .bind(job_id)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        if held != Some(true) {
            tx.rollback().await.map_err(db)?;
            return Ok(Vec::new());
        }
        let recorded = apply(&mut tx, job_id, reports, events).await?;
        mirror::record(&mut tx, self.mirror(), job_id, &recorded).await?;
        tx.commit().await.map_err(db)?;
        Ok(recorded)
    }
}

/// `statuses` (the `status` column of a job's executions) counted; a value that is not a status
/// is a corrupt row.
pub(crate) fn counted(step: &'static str, statuses: &[String]) -> Result<JobProcessDetails> {
    let parsed = statuses
        .iter()
        .map(|s| s.parse::<ExecutionStatus>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| OutboxError::Corrupt {
            step,
            detail: e.to_string(),
        })?;
    Ok(JobProcessDetails::of(parsed))
}

/// The datasources of `mapped` and how many tables each is asked for, as the claim queues them.
pub(crate) fn datasources(mapped: &MappedFields) -> (Vec<&str>, Vec<i32>) {
    let names = mapped.keys().map(String::as_str).collect();
    let tables = mapped
        .values()
        .map(|tables| i32::try_from(tables.len()).unwrap_or(i32::MAX))
        .collect();
    (names, tables)
}

/// Queues an execution per datasource of `mapped` that has none (a job whose cancel came
/// first: its executions end `CANCELED` with it). A claim queues them in its own statement.
pub(crate) async fn queue(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    mapped: &MappedFields,
) -> Result<()> {
    let (names, tables) = datasources(mapped);
    sqlx::query(
        "INSERT INTO job_executions (job_id, datasource, tables)
         SELECT $1, name, tables FROM unnest($2::text[], $3::int4[]) AS t(name, tables)
         ON CONFLICT (job_id, datasource) DO NOTHING",
    )
    .bind(job_id)
    .bind(&names)
    .bind(&tables)
    .execute(&mut **tx)
    .await
    .map_err(|e| OutboxError::sqlx(STEP, e))?;
    Ok(())
}

/// Writes the reports of executions still open (an unknown datasource gets its row), in one
/// statement, and records the event of each that ended.
pub(crate) async fn apply(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    reports: &[ExecutionReport],
    events: &ExecutionEvents<'_>,
) -> Result<Vec<PendingEvent>> {
    if reports.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<&str> = reports.iter().map(|r| r.datasource.as_str()).collect();
    let statuses: Vec<&str> = reports.iter().map(|r| r.status.as_str()).collect();
    let rows: Vec<i64> = reports
        .iter()
        .map(|r| i64::try_from(r.row_count).unwrap_or(i64::MAX))
        .collect();
    let started: Vec<Option<DateTime<Utc>>> = reports.iter().map(|r| r.started_at).collect();
    let ended: Vec<Option<DateTime<Utc>>> = reports.iter().map(|r| r.ended_at).collect();
    let errors: Vec<Option<&str>> = reports.iter().map(|r| r.error.as_deref()).collect();
    let attempts: Vec<i32> = reports
        .iter()
        .map(|r| i32::try_from(r.attempts).unwrap_or(i32::MAX))
        .collect();
    let last_errors: Vec<Option<&str>> = reports.iter().map(|r| r.last_error.as_deref()).collect();
    let sql = format!(
        "INSERT INTO job_executions AS e
             (job_id, datasource, status, row_count, started_at, ended_at, error, attempts,
              last_error)
         SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int8[], $5::timestamptz[],
                                  $6::timestamptz[], $7::text[], $8::int4[], $9::text[])
         ON CONFLICT (job_id, datasource) DO UPDATE SET
             status = EXCLUDED.status, row_count = EXCLUDED.row_count,
             started_at = COALESCE(EXCLUDED.started_at, e.started_at),
             ended_at = EXCLUDED.ended_at, error = EXCLUDED.error,
             attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error,
             updated_at = now()
         WHERE e.status IN ('QUEUED', 'IN_PROGRESS')
         RETURNING {RETURNED}"
    );
    let written = sqlx::query(&sql)
        .bind(job_id)
        .bind(&names)
        .bind(&statuses)
        .bind(&rows)
        .bind(&started)
        .bind(&ended)
        .bind(&errors)
        .bind(&attempts)
        .bind(&last_errors)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| OutboxError::sqlx(STEP, e))?;
    let mut recorded = Vec::new();
    for row in sorted(written)? {
        recorded.extend(ended_event(tx, job_id, &row, None, events).await?);
    }
    Ok(recorded)
}

/// An execution's `statusDetails` (lifecycle §3): `error`, the redacted error it ended with;
/// once it was tried more than once (`JOB_RETRY_ATTEMPTS`), `attempts` and `lastError`, the
/// redacted error of its last attempt that failed and was retried; and once the job's message
/// was delivered again and ran (a requeue, a Worker that died mid-job), `deliveries`, the runs
/// of the job so far (its claims, this one included). A datasource read at its first attempt
/// of a first delivery shows none of these, so the details of such a run are as before.
pub fn status_details(
    error: Option<String>,
    attempts: u32,
    last_error: Option<String>,
    deliveries: u32,
) -> Map<String, Value> {
    let mut details = Map::new();
    if let Some(error) = error {
        details.insert("error".to_owned(), Value::String(error));
    }
    if attempts > 1 {
        details.insert("attempts".to_owned(), Value::from(attempts));
        if let Some(last_error) = last_error {
            details.insert("lastError".to_owned(), Value::String(last_error));
        }
    }
    if deliveries > 1 {
        details.insert("deliveries".to_owned(), Value::from(deliveries));
    }
    details
}

/// The `RETURNING` columns an execution's event is built from ([`ended_event`]): the row's,
/// and its job's runs so far (`deliveries`).
const RETURNED: &str = "datasource, status, row_count, started_at, ended_at, error, attempts,
                   last_error,
                   (SELECT j.attempts FROM jobs j WHERE j.job_id = $1) AS deliveries";

/// Whether `reports` leave nothing to close: every datasource reported, each ended.
pub(crate) fn all_ended(reports: &[ExecutionReport]) -> bool {
    !reports.is_empty() && reports.iter().all(|r| r.status.is_terminal())
}

/// Ends every execution still open as `close` says, with their events.
pub(crate) async fn close(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    close: Close<'_>,
    events: &ExecutionEvents<'_>,
) -> Result<Vec<PendingEvent>> {
    let sql = format!(
        "UPDATE job_executions SET
             status = CASE WHEN status = 'IN_PROGRESS' THEN $2 ELSE 'CANCELED' END,
             error = CASE WHEN status = 'IN_PROGRESS' THEN $3 ELSE NULL END,
             ended_at = now(), updated_at = now()
         WHERE job_id = $1 AND status IN ('QUEUED', 'IN_PROGRESS')
         RETURNING {RETURNED}"
    );
    let rows = sqlx::query(&sql)
        .bind(job_id)
        .bind(close.running.as_str())
        .bind(close.error)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| OutboxError::sqlx(STEP, e))?;
    let mut recorded = Vec::new();
    for row in sorted(rows)? {
        recorded.extend(ended_event(tx, job_id, &row, None, events).await?);
    }
    Ok(recorded)
}

/// Removes the job's executions (its deletion), each with its `job.execution.deleted` event.
pub(crate) async fn remove(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    events: &ExecutionEvents<'_>,
) -> Result<Vec<PendingEvent>> {
    let sql = format!("DELETE FROM job_executions WHERE job_id = $1 RETURNING {RETURNED}");
    let rows = sqlx::query(&sql)
        .bind(job_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| OutboxError::sqlx(STEP, e))?;
    let mut recorded = Vec::new();
    for row in sorted(rows)? {
        recorded.extend(ended_event(tx, job_id, &row, Some(Operation::Deleted), events).await?);
    }
    Ok(recorded)
}

/// `RETURNING` rows come in no particular order: events are recorded by datasource name.
fn sorted(mut rows: Vec<PgRow>) -> Result<Vec<PgRow>> {
    let mut keyed = Vec::with_capacity(rows.len());
    for row in rows.drain(..) {
        let name: String = row
            .try_get("datasource")
            .map_err(|e| OutboxError::sqlx(STEP, e))?;
        keyed.push((name, row));
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(keyed.into_iter().map(|(_, row)| row).collect())
}

/// Records the event of the execution `row` when it ended (or `operation`, for its deletion).
async fn ended_event(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    row: &PgRow,
    operation: Option<Operation>,
    events: &ExecutionEvents<'_>,
) -> Result<Option<PendingEvent>> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let status: String = row.try_get("status").map_err(db)?;
    let status = status
        .parse::<ExecutionStatus>()
        .map_err(|e| OutboxError::Corrupt {
            step: STEP,
            detail: e.to_string(),
        })?;
    let Some(operation) = operation.or_else(|| Operation::of_execution(status)) else {
        return Ok(None);
    };
    let datasource: String = row.try_get("datasource").map_err(db)?;
    let row_count: i64 = row.try_get("row_count").map_err(db)?;
    let error: Option<String> = row.try_get("error").map_err(db)?;
    let attempts: i32 = row.try_get("attempts").map_err(db)?;
    let last_error: Option<String> = row.try_get("last_error").map_err(db)?;
    let deliveries: Option<i32> = row.try_get("deliveries").map_err(db)?;
    let details = status_details(
        error,
        u32::try_from(attempts).unwrap_or(0),
        last_error,
        deliveries.map_or(0, i32::unsigned_abs),
    );
    let body = ExecutionBody {
        job_id,
        datasource: &datasource,
        status,
        row_count: row_count.unsigned_abs(),
        status_details: &details,
        started_at: row.try_get("started_at").map_err(db)?,
        ended_at: row.try_get("ended_at").map_err(db)?,
    }
    .to_bytes()
    .map_err(|e| OutboxError::invalid(STEP, e.to_string()))?;
    let mut attributes = CloudEventAttributes::execution(
        operation,
        job_id,
        &datasource,
        events.source,
        events.tenant,
        Utc::now(),
    );
    attributes.traceparent = events.traceparent.map(str::to_owned);
    let event = OutboundEvent {
        attributes,
        request_id: events.request_id.map(str::to_owned),
        body,
    };
    insert_leased(tx, job_id, event, events.publisher, events.lease)
        .await
        .map_err(db)
}
