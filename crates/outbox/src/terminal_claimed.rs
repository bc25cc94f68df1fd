//! A claimed job's terminal record on its normal path in one statement: the job's end, its
//! executions' last reports and the outbox rows of all their events, written together only
//! while the caller still holds the job in the state the lifecycle machine was asked about.
//!
//! Every other case (a cancel requested or in progress, a claim lost, the MQTT mirror on, open
//! executions to close, an event already recorded, a job whose message ran before: its
//! executions' events say how many runs it took, which only the row knows) writes nothing here
//! and is left to the locked-row transaction of `terminal.rs`, which answers it as before.

use chrono::{DateTime, Utc};
use contract::event::{
    CloudEventAttributes, ExecutionBody, Operation, OutboundEvent, TerminalStatus,
};
use contract::lifecycle::{self, Event, JobState, JobStatus, Step};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::Row;

use crate::error::{OutboxError, Result};
use crate::executions::{self, status_details, ExecutionReport};
use crate::outbox::{leased_event, PendingEvent};
use crate::store::{interval, Store};
use crate::terminal::{ended_fields, Recorded, TerminalRecord};

const STEP: &str = "recording a claimed job's terminal state";

/// The state the statement guards on: the caller's run, processing, nothing asked of it.
const GUARDED: JobState = JobState {
    status: JobStatus::Processing,
    cancel_requested: false,
    force: false,
    delete_requested: false,
};

/// The end of a job as one statement. The job's row is updated first (it takes the row's lock,
/// as the locked-row path does, so a concurrent report or cancel waits for it); the executions
/// are written only once it was, and the outbox rows only for what was written, executions'
/// events first (by datasource name), then the job's.
const ONE_STATEMENT: &str = "
WITH job AS (
    UPDATE jobs SET status = $7, result_path = $8, result_hmac = $9, result_size_bytes = $10,
                    result_row_count = $11, error_message = $12, lease_expires_at = NULL,
                    object_left = $13, finished_at = now(), updated_at = now()
    WHERE job_id = $1 AND owner = $2 AND status = $3 AND cancel_requested = $4
      AND force_canceled = $5 AND delete_requested = $6 AND attempts <= 1
    RETURNING job_id),
written AS (
    INSERT INTO job_executions AS e
        (job_id, datasource, status, row_count, started_at, ended_at, error, attempts,
         last_error)
    SELECT job.job_id, t.*
    FROM job, unnest($14::text[], $15::text[], $16::int8[], $17::timestamptz[],
                     $18::timestamptz[], $19::text[], $20::int4[], $21::text[])
         AS t(datasource, status, row_count, started_at, ended_at, error, attempts, last_error)
    ON CONFLICT (job_id, datasource) DO UPDATE SET
        status = EXCLUDED.status, row_count = EXCLUDED.row_count,
        started_at = COALESCE(EXCLUDED.started_at, e.started_at),
        ended_at = EXCLUDED.ended_at, error = EXCLUDED.error,
        attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error,
        updated_at = now()
    WHERE e.status IN ('QUEUED', 'IN_PROGRESS')
    RETURNING datasource),
events AS (
    SELECT ev.ord, ev.ce_id, ev.body, ev.attributes
    FROM unnest($22::text[], $23::text[], $24::bytea[], $25::jsonb[])
         WITH ORDINALITY AS ev(datasource, ce_id, body, attributes, ord)
    JOIN written USING (datasource)
    UNION ALL
    SELECT 9223372036854775807, $26, $27, $28 FROM job)
INSERT INTO outbox (ce_id, job_id, body, attributes, request_id, attempts, leased_by,
                    lease_until)
SELECT ce_id, $1, body, attributes, $29, 1, $30, now() + $31 FROM events ORDER BY ord
RETURNING id, created_at, ce_id";

impl Store {
    /// Records a claimed job's end in one statement when its run ends on the normal path: the
    /// job still `processing` under `record.owner`'s claim with no cancel or delete asked, the
    /// MQTT mirror off, and no open execution to close (every report ended, or nothing to
    /// close). The status written is the one [`lifecycle::step`] answers for that state.
    ///
    /// `Some`: recorded, as [`Store::record_terminal_locked`] would have recorded it. `None`:
    /// nothing was written (the job is not in that state, the record is not on the normal path,
    /// or an event with one of these ce-ids exists); the locked-row transaction answers it.
    pub async fn record_terminal_claimed(
        &self,
        record: &TerminalRecord<'_>,
    ) -> Result<Option<Recorded>> {
        let Some(owner) = record.owner else {
            return Ok(None);
        };
        if self.mirror().is_some()
            || (record.close.is_some() && !executions::all_ended(record.executions))
        {
            return Ok(None);
        }
        let Some(status) = machine_answer(record.outcome.status()) else {
            return Ok(None);
        };
        let Some(reports) = Reports::of(record) else {
            return Ok(None);
        };
        let (path, hmac, size, rows, error, object_left) = ended_fields(record)?;
        let event = record.event;
        let mut conn = self.lend(STEP).await?;
        let returned = sqlx::query(ONE_STATEMENT)
            .bind(record.job_id)
            .bind(owner)
            .bind(GUARDED.status.as_str())
            .bind(GUARDED.cancel_requested)
            .bind(GUARDED.force)
            .bind(GUARDED.delete_requested)
            .bind(status.as_str())
            .bind(path)
            .bind(hmac)
            .bind(size)
            .bind(rows)
            .bind(error)
            .bind(object_left)
            .bind(&reports.names)
            .bind(&reports.statuses)
            .bind(&reports.rows)
            .bind(&reports.started)
            .bind(&reports.ended)
            .bind(&reports.errors)
            .bind(&reports.attempts)
            .bind(&reports.last_errors)
            .bind(
                reports
                    .events
                    .iter()
                    .map(|e| e.0.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                reports
                    .events
                    .iter()
                    .map(|e| e.1.ce_id())
                    .collect::<Vec<_>>(),
            )
            .bind(
                reports
                    .events
                    .iter()
                    .map(|e| e.1.body.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(
                reports
                    .events
                    .iter()
                    .map(|e| Json(&e.1.attributes))
                    .collect::<Vec<_>>(),
            )
            .bind(event.ce_id())
            .bind(event.body.as_slice())
            .bind(Json(&event.attributes))
            .bind(event.request_id.as_deref())
            .bind(record.publisher)
            .bind(interval(record.lease))
            .fetch_all(&mut *conn)
            .await;
        conn.finish(returned.is_ok());
        let returned = match returned {
            Ok(returned) => returned,
            // An event's ce-id exists already: nothing was written (the statement is atomic);
            // the locked-row path finds out which and answers it.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => return Ok(None),
            Err(e) => return Err(OutboxError::sqlx(STEP, e)),
        };
        if returned.is_empty() {
            return Ok(None);
        }
        inserted(returned, record, reports.events).map(Some)
    }
}

/// The status the machine ends a job in [`GUARDED`] with for this outcome; `None` when it
/// answers anything else (a cancel winning, a refusal): then the normal path does not apply.
fn machine_answer(outcome: TerminalStatus) -> Option<JobStatus> {
    let step = match outcome {
        TerminalStatus::Completed => Step::Completed,
        TerminalStatus::Failed => Step::Failed,
    };
    let transition = lifecycle::step(Some(GUARDED), step).ok()?;
    (!transition.events.contains(&Event::Canceled)
        && transition.to.status.as_str() == outcome.as_str())
    .then_some(transition.to.status)
}

/// The run's reports as the statement's arrays, with the event of each that ends.
struct Reports {
    names: Vec<String>,
    statuses: Vec<&'static str>,
    rows: Vec<i64>,
    started: Vec<Option<DateTime<Utc>>>,
    ended: Vec<Option<DateTime<Utc>>>,
    errors: Vec<Option<String>>,
    attempts: Vec<i32>,
    last_errors: Vec<Option<String>>,
    /// By datasource name, as the locked-row path records them.
    events: Vec<(String, OutboundEvent)>,
}

impl Reports {
    /// `None` when an event's body would depend on what is stored (a report that ends without
    /// its start): the locked-row path builds it from the row.
    fn of(record: &TerminalRecord<'_>) -> Option<Reports> {
        let mut reports = Reports {
            names: Vec::new(),
            statuses: Vec::new(),
            rows: Vec::new(),
            started: Vec::new(),
            ended: Vec::new(),
            errors: Vec::new(),
            attempts: Vec::new(),
            last_errors: Vec::new(),
            events: Vec::new(),
        };
        for report in record.executions {
            // Times as PostgreSQL keeps them (microseconds), so an event's body says what the
            // row says.
            let started = report.started_at.map(stored_time);
            let ended = report.ended_at.map(stored_time);
            let rows = i64::try_from(report.row_count).unwrap_or(i64::MAX);
            let attempts = i32::try_from(report.attempts).unwrap_or(i32::MAX);
            if let Some(operation) = Operation::of_execution(report.status) {
                // An end without its start keeps the stored one: not known here.
                started?;
                let event = execution_event(record, report, operation, started, ended, rows)?;
                reports.events.push((report.datasource.clone(), event));
            }
            reports.names.push(report.datasource.clone());
            reports.statuses.push(report.status.as_str());
            reports.rows.push(rows);
            reports.started.push(started);
            reports.ended.push(ended);
            reports.errors.push(report.error.clone());
            reports.attempts.push(attempts);
            reports.last_errors.push(report.last_error.clone());
        }
        reports.events.sort_by(|a, b| a.0.cmp(&b.0));
        Some(reports)
    }
}

/// The execution's end event, as `executions.rs` builds it from the row this report writes.
fn execution_event(
    record: &TerminalRecord<'_>,
    report: &ExecutionReport,
    operation: Operation,
    started: Option<DateTime<Utc>>,
    ended: Option<DateTime<Utc>>,
    rows: i64,
) -> Option<OutboundEvent> {
    let attempts = i32::try_from(report.attempts).unwrap_or(i32::MAX);
    // The statement writes only a job's first run (`attempts <= 1`): one delivery.
    let details = status_details(
        report.error.clone(),
        u32::try_from(attempts).unwrap_or(0),
        report.last_error.clone(),
        1,
    );
    let body = ExecutionBody {
        job_id: record.job_id,
        datasource: &report.datasource,
        status: report.status,
        row_count: rows.unsigned_abs(),
        status_details: &details,
        started_at: started,
        ended_at: ended,
    }
    .to_bytes()
    // A body that cannot be built: the locked-row path reports it.
    .ok()?;
    let mut attributes = CloudEventAttributes::execution(
        operation,
        record.job_id,
        &report.datasource,
        &record.event.attributes.source,
        record.tenant,
        Utc::now(),
    );
    // The trace of the job's own event (telemetry on).
    attributes.traceparent = record.event.attributes.traceparent.clone();
    Some(OutboundEvent {
        attributes,
        request_id: record.event.request_id.clone(),
        body,
    })
}

/// `time` truncated to whole microseconds, as a `timestamptz` stores it.
fn stored_time(time: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(time.timestamp_micros()).unwrap_or(time)
}

/// The answer of a statement that wrote: the job's outbox row and its executions' (those whose
/// execution was written), leased to the publisher.
fn inserted(
    returned: Vec<PgRow>,
    record: &TerminalRecord<'_>,
    events: Vec<(String, OutboundEvent)>,
) -> Result<Recorded> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let mut by_ce_id = std::collections::HashMap::with_capacity(returned.len());
    for row in &returned {
        let ce_id: String = row.try_get("ce_id").map_err(db)?;
        by_ce_id.insert(ce_id, row);
    }
    let mut executions: Vec<PendingEvent> = Vec::new();
    for (_, event) in events {
        if let Some(row) = by_ce_id.get(event.ce_id()) {
            executions.push(leased_event(row, record.job_id, event).map_err(db)?);
        }
    }
    let Some(row) = by_ce_id.get(record.event.ce_id()) else {
        return Err(OutboxError::Corrupt {
            step: STEP,
            detail: "the job's outbox row was not returned with its end".to_owned(),
        });
    };
    let outbox_id = leased_event(row, record.job_id, record.event.clone())
        .map_err(db)?
        .id;
    Ok(Recorded::Inserted {
        outbox_id,
        executions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status the statement writes is the machine's answer for the state it guards on, and
    /// is the outcome's: the machine's table, not the SQL, decides it.
    #[test]
    fn the_status_written_is_the_machines_answer_for_the_guarded_state() {
        for (outcome, step) in [
            (TerminalStatus::Completed, Step::Completed),
            (TerminalStatus::Failed, Step::Failed),
        ] {
            let transition = lifecycle::step(Some(GUARDED), step).expect("a processing job ends");
            assert_eq!(machine_answer(outcome), Some(transition.to.status));
            assert_eq!(transition.to.status.as_str(), outcome.as_str());
            assert!(!transition.events.contains(&Event::Canceled));
        }
    }

    #[test]
    fn times_are_kept_to_the_microsecond() {
        let time = DateTime::from_timestamp(1_700_000_000, 123_456_789).expect("a time");
        assert_eq!(stored_time(time).timestamp_subsec_nanos(), 123_456_000);
    }
}
