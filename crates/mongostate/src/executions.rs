//! A job's executions (one per datasource, lifecycle §1) under `fetcher_worker.executions`, as
//! the PostgreSQL store keeps them in `job_executions`: queued by the claim, written from the
//! run's reports (an execution that ended is not changed again), closed by the job's end; and
//! the `job.execution.*` event of each one that ends.

use chrono::{DateTime, Utc};
use contract::event::{CloudEventAttributes, ExecutionBody, Operation, OutboundEvent};
use contract::lifecycle::ExecutionStatus;
use mongodb::bson::{doc, Bson, Document};
use outbox::{Close, ExecutionEvents, ExecutionReport};
use uuid::Uuid;

use crate::jobs::bson_time;
use crate::Error;

/// The executions as stored: `fetcher_worker.executions`, an array of documents.
pub(crate) fn stored(worker: &Document) -> Vec<Document> {
    match worker.get(crate::manager_store::field::EXECUTIONS) {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(|item| item.as_document().cloned())
            .collect(),
        _ => Vec::new(),
    }
}

/// One queued execution per datasource of the job's `mapped_fields` (a claim's).
pub(crate) fn queued(mapped_fields: &Document) -> Vec<Document> {
    mapped_fields
        .keys()
        .map(|datasource| {
            execution(&ExecutionReport {
                datasource: datasource.clone(),
                status: ExecutionStatus::Queued,
                row_count: 0,
                started_at: None,
                ended_at: None,
                error: None,
                attempts: 0,
                last_error: None,
            })
        })
        .collect()
}

/// Writes `reports` over the executions still open (an unknown datasource gets its own); the
/// executions that ended by them, in datasource order.
pub(crate) fn apply(executions: &mut Vec<Document>, reports: &[ExecutionReport]) -> Vec<Document> {
    let mut ended = Vec::new();
    for report in reports {
        let written = execution(report);
        match executions
            .iter_mut()
            .find(|e| e.get_str("datasource").ok() == Some(report.datasource.as_str()))
        {
            Some(existing) if is_ended(existing) => continue,
            Some(existing) => *existing = written.clone(),
            None => executions.push(written.clone()),
        }
        if report.status.is_terminal() {
            ended.push(written);
        }
    }
    ended.sort_by(|a, b| {
        a.get_str("datasource")
            .ok()
            .cmp(&b.get_str("datasource").ok())
    });
    ended
}

/// Ends every execution still open as `close` says (the queued ones `CANCELED`, the running
/// ones `close.running`); those it ended, in datasource order.
pub(crate) fn close(
    executions: &mut [Document],
    close: Close<'_>,
    now: DateTime<Utc>,
) -> Vec<Document> {
    let mut ended = Vec::new();
    for existing in executions.iter_mut().filter(|e| !is_ended(e)) {
        let running = existing.get_str("status").ok() == Some(ExecutionStatus::InProgress.as_str());
        let (status, error) = if running {
            (close.running, close.error)
        } else {
            (ExecutionStatus::Canceled, None)
        };
        existing.insert("status", status.as_str());
        existing.insert("error", error.map_or(Bson::Null, Bson::from));
        existing.insert("ended_at", bson_time(now));
        existing.insert("ended", true);
        ended.push(existing.clone());
    }
    ended.sort_by(|a, b| {
        a.get_str("datasource")
            .ok()
            .cmp(&b.get_str("datasource").ok())
    });
    ended
}

/// The `job.execution.<operation>` event of an execution that ended, as the PostgreSQL store
/// builds it.
pub(crate) fn ended_event(
    job_id: Uuid,
    execution: &Document,
    events: &ExecutionEvents<'_>,
) -> Result<Option<OutboundEvent>, Error> {
    event_of(job_id, execution, None, events)
}

/// The `job.execution.<operation>` event of an execution: `operation`, or (`None`) its end's.
pub(crate) fn event_of(
    job_id: Uuid,
    execution: &Document,
    operation: Option<Operation>,
    events: &ExecutionEvents<'_>,
) -> Result<Option<OutboundEvent>, Error> {
    let invalid = |reason: String| Error::InvalidWrite {
        what: "an execution's event",
        reason,
    };
    let status: ExecutionStatus = execution
        .get_str("status")
        .unwrap_or_default()
        .parse()
        .map_err(|e: contract::lifecycle::UnknownStatus| invalid(e.to_string()))?;
    let Some(operation) = operation.or_else(|| Operation::of_execution(status)) else {
        return Ok(None);
    };
    let datasource = execution.get_str("datasource").unwrap_or_default();
    // As the PostgreSQL store words them: the error, and the attempts once it was retried.
    let text = |key: &str| execution.get_str(key).ok().map(str::to_owned);
    let attempts = execution
        .get_i64("attempts")
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0);
    // The job's runs are not known here: an execution's event in the Manager mode says no
    // `deliveries` (its job's document, read through the API, does).
    let details = outbox::status_details(text("error"), attempts, text("last_error"), 0);
    let date = |key: &str| match execution.get(key) {
        Some(Bson::DateTime(at)) => DateTime::from_timestamp_millis(at.timestamp_millis()),
        _ => None,
    };
    let body = ExecutionBody {
        job_id,
        datasource,
        status,
        row_count: execution.get_i64("row_count").unwrap_or(0).unsigned_abs(),
        status_details: &details,
        started_at: date("started_at"),
        ended_at: date("ended_at"),
    }
    .to_bytes()
    .map_err(|e| invalid(e.to_string()))?;
    let mut attributes = CloudEventAttributes::execution(
        operation,
        job_id,
        datasource,
        events.source,
        events.tenant,
        Utc::now(),
    );
    attributes.traceparent = events.traceparent.map(str::to_owned);
    Ok(Some(OutboundEvent {
        attributes,
        request_id: events.request_id.map(str::to_owned),
        body,
    }))
}

fn is_ended(execution: &Document) -> bool {
    execution.get_bool("ended").unwrap_or(false)
}

fn execution(report: &ExecutionReport) -> Document {
    let at = |t: Option<DateTime<Utc>>| t.map_or(Bson::Null, |t| Bson::DateTime(bson_time(t)));
    doc! {
        "datasource": &report.datasource,
        "status": report.status.as_str(),
        "row_count": i64::try_from(report.row_count).unwrap_or(i64::MAX),
        "started_at": at(report.started_at),
        "ended_at": at(report.ended_at),
        "ended": report.status.is_terminal(),
        "error": report.error.as_deref().map_or(Bson::Null, Bson::from),
        "attempts": i64::from(report.attempts),
        "last_error": report.last_error.as_deref().map_or(Bson::Null, Bson::from),
    }
}
