//! Cancel and delete requests (lifecycle §3), and the end of a deletion: each reads the job
//! under a row lock, asks the state machine ([`contract::lifecycle::step`]) what happens, and
//! writes the new state with the outbox rows of its events in one transaction.

use std::time::Duration;

use chrono::Utc;
use contract::event::{CancelBody, CloudEventAttributes, DeletionBody, OutboundEvent};
use contract::lifecycle::{
    self, Event, JobProcessDetails, JobState, JobStatus, Refusal, Step, Then, Transition,
};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use crate::cancel_listener::CANCEL_CHANNEL;
use crate::error::{OutboxError, Result};
use crate::executions::{self, Close, ExecutionEvents, ExecutionReport};
use crate::mirror;
use crate::outbox::{insert_leased, PendingEvent};
use crate::store::{interval, Store};

const STEP: &str = "recording a control request";

/// A cancel or delete request, as the control API checked it.
#[derive(Debug, Clone, Copy)]
pub struct ControlRequest<'a> {
    pub job_id: Uuid,
    /// `X-Tenant-ID`: a job of another tenant is unknown to the request.
    pub tenant: Option<&'a str>,
    /// [`Step::Cancel`] or [`Step::Delete`].
    pub step: Step,
    pub comment: Option<&'a str>,
    pub reason_code: Option<&'a str>,
    /// `STREAMING_CLOUDEVENTS_SOURCE`, for the events.
    pub source: &'a str,
    /// `X-Request-Id` of the request, carried by its events.
    pub request_id: Option<&'a str>,
    /// Who publishes the events right after the commit (their rows are leased to it).
    pub publisher: &'a str,
    pub lease: Duration,
}

/// What a control request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Controlled {
    /// Committed: the transition, and its events' outbox rows (leased to the publisher).
    /// `canceled`: when it ended the job `canceled`, the cancel it ended.
    Done {
        transition: Transition,
        events: Vec<PendingEvent>,
        canceled: Option<CancelEnded>,
    },
    /// Nothing written.
    Refused(Refusal),
}

/// The cancel a transition ended the job with: what a person reads of why it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelEnded {
    /// From the cancel's first acceptance to the end (`None` if the clocks disagree).
    pub after: Option<Duration>,
    /// A forced cancel (running statements were stopped).
    pub force: bool,
    /// The caller's `reasonCode` and `comment`, as accepted.
    pub reason_code: Option<String>,
    pub comment: Option<String>,
}

/// The job as a control request reads it.
struct Locked {
    state: JobState,
    tenant: Option<String>,
    metadata: Map<String, Value>,
    comment: Option<String>,
    reason_code: Option<String>,
    request_id: Option<String>,
    /// Its lease (if any) lapsed: its owner is gone.
    lapsed: bool,
    /// Who holds (or last held) its claim.
    owner: Option<String>,
    /// The trace of its run (telemetry on), which every event of the job carries.
    traceparent: Option<String>,
}

/// A delivery of a job whose cancel came first ([`crate::Claim::CancelRequested`]): it ends the
/// cancel instead of running the job, and the events carry its message's metadata.
#[derive(Debug, Clone, Copy)]
pub struct EndCancel<'a> {
    pub job_id: Uuid,
    pub tenant: Option<&'a str>,
    /// The message's metadata (kept when the job row has none yet).
    pub metadata: &'a Map<String, Value>,
    pub request_id: Option<&'a str>,
    pub source: &'a str,
    pub publisher: &'a str,
    pub lease: Duration,
    /// The run's claim owner, when the run itself ends its cancel (its statements ended or
    /// were stopped); `None` for a delivery that does not run the job, or the sweeper.
    pub owner: Option<&'a str>,
    /// The run's last reports of its executions (with `owner`), written before the others
    /// still open end `CANCELED`.
    pub executions: &'a [ExecutionReport],
    /// The delivery's trace (telemetry on): kept with the job, carried by the events.
    pub traceparent: Option<&'a str>,
}

impl Store {
    /// Ends the cancel of a job that must not run: a `pending` job canceled before its message
    /// came (`canceled` with `job.cancellation_in_progress` and `job.canceled`), or one whose
    /// owner died while canceling it (`canceled`). Refused when the job is in neither state any
    /// more (a concurrent delivery ended it first). With `owner`, the run that holds a job in
    /// `cancellation_in_progress` ends its own cancel.
    pub async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled> {
        let tx = self
            .pool()
            .begin()
            .await
            .map_err(|e| OutboxError::sqlx(STEP, e))?;
        end_cancel_in(tx, self.mirror(), request).await
    }

    /// Jobs left `deletion_in_progress` for more than `grace` (their object could not be
    /// deleted then), oldest first, with their tenant: the repair pass deletes them again.
    pub async fn deletions_in_progress(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>> {
        sqlx::query_as(
            "SELECT job_id, tenant_id FROM jobs
             WHERE status = 'deletion_in_progress' AND updated_at <= now() - $1
             ORDER BY updated_at LIMIT $2",
        )
        .bind(interval(grace))
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("listing deletions in progress", e))
    }

    /// Applies a cancel or delete request (lifecycle §3). A cancel of a running job is
    /// announced on [`CANCEL_CHANNEL`] at its commit.
    pub async fn control(&self, request: &ControlRequest<'_>) -> Result<Controlled> {
        if !matches!(request.step, Step::Cancel { .. } | Step::Delete { .. }) {
            return Err(OutboxError::invalid(STEP, "not a cancel or delete request"));
        }
        let db = |e| OutboxError::sqlx(STEP, e);
        let mut tx = self.pool().begin().await.map_err(db)?;
        let mut locked = lock(&mut tx, request.job_id).await?;
        let mut created = false;
        if locked.is_none() && matches!(request.step, Step::Cancel { .. }) {
            // A cancel of a job never seen waits for its message in a `pending` row, created
            // here unless a concurrent request or delivery created it first (then it is read).
            created = sqlx::query(
                "INSERT INTO jobs (job_id, tenant_id, request_id, status)
                 VALUES ($1, $2, $3, 'pending') ON CONFLICT (job_id) DO NOTHING
                 RETURNING job_id",
            )
            .bind(request.job_id)
            .bind(request.tenant)
            .bind(request.request_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?
            .is_some();
            locked = lock(&mut tx, request.job_id).await?;
        }
        let Some(job) = locked else {
            return Ok(Controlled::Refused(Refusal::Unknown));
        };
        if job.tenant.as_deref() != request.tenant {
            return refuse(tx, Refusal::Unknown).await;
        }
        // The row this request just created stands for a job never seen.
        let from = (!created).then_some(job.state);
        let transition = match lifecycle::step(from, request.step) {
            Ok(transition) => transition,
            Err(refusal) => return refuse(tx, refusal).await,
        };
        let texts = Commit {
            mirror: self.mirror(),
            request_id: request.request_id.or(job.request_id.as_deref()),
            source: request.source,
            comment: request.comment.or(job.comment.as_deref()),
            reason_code: request.reason_code.or(job.reason_code.as_deref()),
            result_deleted: false,
            publisher: request.publisher,
            lease: request.lease,
            executions: &[],
            traceparent: job.traceparent.as_deref(),
        };
        commit(tx, request.job_id, &job, transition, texts).await
    }

    /// Ends a deletion once the job's object is gone (`result_deleted`: its key was deleted;
    /// the event's `resultDeleted` is true when the job also had a stored result): `deleted`
    /// with its event; the executions go with the result, each with its `job.execution.deleted`.
    pub async fn object_deleted(
        &self,
        job_id: Uuid,
        result_deleted: bool,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled> {
        let db = |e| OutboxError::sqlx(STEP, e);
        let mut tx = self.pool().begin().await.map_err(db)?;
        let Some(job) = lock(&mut tx, job_id).await? else {
            return Ok(Controlled::Refused(Refusal::Unknown));
        };
        let transition = match lifecycle::step(Some(job.state), Step::ObjectDeleted) {
            Ok(transition) => transition,
            Err(refusal) => return refuse(tx, refusal).await,
        };
        // The result goes, and the executions with it; the row stays as the tombstone.
        // `resultDeleted` says an object existed: the job had stored a result (a canceled or
        // failed job's key is deleted too, in case, but held none).
        let result_deleted: bool = sqlx::query_scalar(
            "UPDATE jobs SET result_deleted = $2 AND result_path IS NOT NULL,
                             result_path = NULL, result_hmac = NULL
             WHERE job_id = $1 RETURNING result_deleted",
        )
        .bind(job_id)
        .bind(result_deleted)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let texts = Commit {
            mirror: self.mirror(),
            request_id: job.request_id.as_deref(),
            source,
            comment: job.comment.as_deref(),
            reason_code: job.reason_code.as_deref(),
            result_deleted,
            publisher,
            lease,
            executions: &[],
            traceparent: job.traceparent.as_deref(),
        };
        commit(tx, job_id, &job, transition, texts).await
    }
}

/// Ends the cancel in `tx` (a terminal record's, which holds the job's row lock, or a
/// transaction of its own): commits it when the machine ends the cancel, rolls it back when
/// it refuses. See [`Store::end_cancel`].
pub(crate) async fn end_cancel_in(
    mut tx: Transaction<'static, Postgres>,
    mirror: Option<&str>,
    request: &EndCancel<'_>,
) -> Result<Controlled> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let Some(mut job) = lock(&mut tx, request.job_id).await? else {
        return Ok(Controlled::Refused(Refusal::Unknown));
    };
    if job.tenant.as_deref() != request.tenant {
        return refuse(tx, Refusal::Unknown).await;
    }
    let state = job.state;
    let waiting = state.status == JobStatus::Pending && state.cancel_requested;
    let canceling = state.status == JobStatus::CancellationInProgress;
    let orphaned = canceling && job.lapsed;
    let own = canceling && request.owner.is_some() && job.owner.as_deref() == request.owner;
    if !(waiting || orphaned || own) {
        let from = state.status;
        return refuse(tx, Refusal::InvalidTransition { from }).await;
    }
    let step = if own { Step::Stopped } else { Step::Claim };
    let transition = match lifecycle::step(Some(state), step) {
        Ok(transition) => transition,
        Err(refusal) => return refuse(tx, refusal).await,
    };
    if job.metadata.is_empty() {
        job.metadata = request.metadata.clone();
    }
    sqlx::query(
        "UPDATE jobs SET metadata = $2, request_id = COALESCE(request_id, $3),
                         traceparent = COALESCE($4, traceparent)
         WHERE job_id = $1",
    )
    .bind(request.job_id)
    .bind(Json(&job.metadata))
    .bind(request.request_id)
    .bind(request.traceparent)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    let request_id = job.request_id.as_deref().or(request.request_id);
    let texts = Commit {
        mirror,
        request_id,
        source: request.source,
        comment: job.comment.as_deref(),
        reason_code: job.reason_code.as_deref(),
        result_deleted: false,
        publisher: request.publisher,
        lease: request.lease,
        executions: request.executions,
        traceparent: request.traceparent.or(job.traceparent.as_deref()),
    };
    commit(tx, request.job_id, &job, transition, texts).await
}

/// Rolls the transaction back: a refused step writes nothing.
async fn refuse(tx: Transaction<'static, Postgres>, refusal: Refusal) -> Result<Controlled> {
    tx.rollback()
        .await
        .map_err(|e| OutboxError::sqlx(STEP, e))?;
    Ok(Controlled::Refused(refusal))
}

/// What a step's commit writes beside the job's own row: its texts, what its events carry,
/// and who publishes them.
struct Commit<'a> {
    request_id: Option<&'a str>,
    source: &'a str,
    comment: Option<&'a str>,
    reason_code: Option<&'a str>,
    /// For `job.deleted`: an object existed and was removed.
    result_deleted: bool,
    publisher: &'a str,
    lease: Duration,
    /// A run's last reports of its executions, for a transition that ends the job.
    executions: &'a [ExecutionReport],
    /// The MQTT mirror's topic prefix, when it is on.
    mirror: Option<&'a str>,
    /// The job's trace (telemetry on), for every event's `ce-traceparent`.
    traceparent: Option<&'a str>,
}

/// Writes the transition's state, announces a cancel a running job must learn, records the
/// events' outbox rows, and commits: all of it, or nothing.
async fn commit(
    mut tx: Transaction<'static, Postgres>,
    job_id: Uuid,
    job: &Locked,
    transition: Transition,
    texts: Commit<'_>,
) -> Result<Controlled> {
    let db = |e| OutboxError::sqlx(STEP, e);
    write(
        &mut tx,
        job_id,
        job,
        &transition,
        texts.comment,
        texts.reason_code,
    )
    .await?;
    if matches!(transition.then, Then::StopStatements { .. }) {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CANCEL_CHANNEL)
            .bind(job_id.to_string())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    // The executions end (or go, with the job's deletion) before the job's own events: their
    // rows come first, and `job.canceled` counts them ended.
    let execution_events = ExecutionEvents {
        tenant: job.tenant.as_deref(),
        request_id: texts.request_id,
        source: texts.source,
        publisher: texts.publisher,
        lease: texts.lease,
        traceparent: texts.traceparent,
    };
    let mut events = Vec::new();
    if transition.events.contains(&Event::Canceled) {
        events
            .extend(executions::apply(&mut tx, job_id, texts.executions, &execution_events).await?);
        events
            .extend(executions::close(&mut tx, job_id, Close::CANCELED, &execution_events).await?);
    }
    if transition.events.contains(&Event::Deleted) {
        events.extend(executions::remove(&mut tx, job_id, &execution_events).await?);
    }
    let context = EventContext {
        job_id,
        tenant: job.tenant.as_deref(),
        request_id: texts.request_id,
        metadata: &job.metadata,
        source: texts.source,
        comment: texts.comment,
        reason_code: texts.reason_code,
        force: transition.to.force,
        result_deleted: texts.result_deleted,
        traceparent: texts.traceparent,
    };
    events.extend(
        record_events(
            &mut tx,
            &context,
            &transition.events,
            texts.publisher,
            texts.lease,
        )
        .await?,
    );
    let canceled = cancel_ended(&mut tx, job_id, &transition).await?;
    mirror::record(&mut tx, texts.mirror, job_id, &events).await?;
    tx.commit().await.map_err(db)?;
    Ok(Controlled::Done {
        transition,
        events,
        canceled,
    })
}

/// Reads the job under a row lock; `None` when it has no row.
async fn lock(tx: &mut Transaction<'static, Postgres>, job_id: Uuid) -> Result<Option<Locked>> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let row = sqlx::query(
        "SELECT status, cancel_requested, force_canceled, delete_requested, metadata, comment,
                reason_code, request_id, tenant_id, owner, traceparent,
                COALESCE(lease_expires_at <= now(), false) AS lapsed
         FROM jobs WHERE job_id = $1 FOR UPDATE",
    )
    .bind(job_id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db)?;
    row.map(|row| locked(&row)).transpose()
}

fn locked(row: &PgRow) -> Result<Locked> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let status: String = row.try_get("status").map_err(db)?;
    let status = status
        .parse::<JobStatus>()
        .map_err(|e| OutboxError::Corrupt {
            step: STEP,
            detail: e.to_string(),
        })?;
    let metadata: Json<Map<String, Value>> = row.try_get("metadata").map_err(db)?;
    Ok(Locked {
        state: JobState {
            status,
            cancel_requested: row.try_get("cancel_requested").map_err(db)?,
            force: row.try_get("force_canceled").map_err(db)?,
            delete_requested: row.try_get("delete_requested").map_err(db)?,
        },
        tenant: row.try_get("tenant_id").map_err(db)?,
        lapsed: row.try_get("lapsed").map_err(db)?,
        owner: row.try_get("owner").map_err(db)?,
        traceparent: row.try_get("traceparent").map_err(db)?,
        metadata: metadata.0,
        comment: row.try_get("comment").map_err(db)?,
        reason_code: row.try_get("reason_code").map_err(db)?,
        request_id: row.try_get("request_id").map_err(db)?,
    })
}

/// Writes the transition's state.
async fn write(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    job: &Locked,
    transition: &Transition,
    comment: Option<&str>,
    reason_code: Option<&str>,
) -> Result<()> {
    let to = transition.to;
    // What a deletion remembers: the terminal status it started from (a forced delete of a job
    // that had not ended goes through `canceled`).
    let before_deletion = match to.status {
        JobStatus::DeletionInProgress | JobStatus::Deleted => {
            if transition.events.contains(&Event::Canceled) {
                Some(JobStatus::Canceled.as_str())
            } else if job.state.status.is_terminal() {
                Some(job.state.status.as_str())
            } else {
                None
            }
        }
        _ => None,
    };
    let ended = matches!(
        to.status,
        JobStatus::Canceled | JobStatus::DeletionInProgress | JobStatus::Deleted
    );
    sqlx::query(
        "UPDATE jobs SET
             status = $2, cancel_requested = $3, force_canceled = $4, delete_requested = $5,
             comment = $6, reason_code = $7,
             status_before_deletion = COALESCE(status_before_deletion, $8),
             finished_at = CASE WHEN $9 THEN COALESCE(finished_at, now()) ELSE finished_at END,
             deleted_at = CASE WHEN $2 = 'deleted' THEN now() ELSE deleted_at END,
             cancel_requested_at = CASE
                 WHEN $3 OR $2 IN ('cancellation_in_progress', 'canceled')
                 THEN COALESCE(cancel_requested_at, now()) ELSE cancel_requested_at END,
             lease_expires_at = CASE WHEN $9 THEN NULL ELSE lease_expires_at END,
             -- A discarded object is left until deleted; a deleted job's is gone.
             object_left = CASE WHEN $10 THEN true WHEN $2 = 'deleted' THEN false
                                ELSE object_left END,
             updated_at = now()
         WHERE job_id = $1",
    )
    .bind(job_id)
    .bind(to.status.as_str())
    .bind(to.cancel_requested)
    .bind(to.force)
    .bind(to.delete_requested)
    .bind(comment)
    .bind(reason_code)
    .bind(before_deletion)
    .bind(ended)
    .bind(transition.then == Then::DiscardObject)
    .execute(&mut **tx)
    .await
    .map_err(|e| OutboxError::sqlx(STEP, e))?;
    Ok(())
}

/// The cancel a transition ended the job with, when it ended the job `canceled`.
async fn cancel_ended(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
    transition: &Transition,
) -> Result<Option<CancelEnded>> {
    if !transition.events.contains(&Event::Canceled) {
        return Ok(None);
    }
    let row = sqlx::query(
        "SELECT EXTRACT(EPOCH FROM clock_timestamp() - cancel_requested_at)::float8 AS after,
                reason_code, comment
         FROM jobs WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(|e| OutboxError::sqlx(STEP, e))?;
    let db = |e| OutboxError::sqlx(STEP, e);
    let seconds: Option<f64> = row.try_get("after").map_err(db)?;
    Ok(Some(CancelEnded {
        after: seconds.and_then(|s| Duration::try_from_secs_f64(s.max(0.0)).ok()),
        force: transition.to.force,
        reason_code: row.try_get("reason_code").map_err(db)?,
        comment: row.try_get("comment").map_err(db)?,
    }))
}

/// Who the events are about, and what their bodies carry.
struct EventContext<'a> {
    job_id: Uuid,
    tenant: Option<&'a str>,
    request_id: Option<&'a str>,
    metadata: &'a Map<String, Value>,
    source: &'a str,
    comment: Option<&'a str>,
    reason_code: Option<&'a str>,
    force: bool,
    result_deleted: bool,
    traceparent: Option<&'a str>,
}

/// Inserts the outbox row of each event, in order, leased to `publisher`. An event already
/// recorded (its ce-id exists) is not recorded again.
async fn record_events(
    tx: &mut Transaction<'static, Postgres>,
    context: &EventContext<'_>,
    events: &[Event],
    publisher: &str,
    lease: Duration,
) -> Result<Vec<PendingEvent>> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let mut recorded = Vec::with_capacity(events.len());
    for event in events {
        let at = Utc::now();
        let body = match event {
            Event::CancellationInProgress | Event::Canceled => {
                let canceled = if *event == Event::Canceled {
                    Some((at, process_details(tx, context.job_id).await?))
                } else {
                    None
                };
                CancelBody {
                    job_id: context.job_id,
                    metadata: context.metadata,
                    force: context.force,
                    comment: context.comment,
                    reason_code: context.reason_code,
                    canceled,
                }
                .to_bytes()
            }
            Event::DeletionInProgress | Event::Deleted => DeletionBody {
                job_id: context.job_id,
                metadata: context.metadata,
                comment: context.comment,
                deleted: (*event == Event::Deleted).then_some((at, context.result_deleted)),
            }
            .to_bytes(),
            Event::Completed | Event::Failed => {
                return Err(OutboxError::invalid(
                    STEP,
                    "a terminal run outcome is recorded by record_terminal",
                ))
            }
        }
        .map_err(|e| OutboxError::invalid(STEP, e.to_string()))?;
        let mut attributes =
            CloudEventAttributes::new(*event, context.job_id, context.source, context.tenant, at);
        attributes.traceparent = context.traceparent.map(str::to_owned);
        let outbound = OutboundEvent {
            attributes,
            request_id: context.request_id.map(str::to_owned),
            body,
        };
        if let Some(event) = insert_leased(tx, context.job_id, outbound, publisher, lease)
            .await
            .map_err(db)?
        {
            recorded.push(event);
        }
    }
    Ok(recorded)
}

/// The job's executions counted by status.
async fn process_details(
    tx: &mut Transaction<'static, Postgres>,
    job_id: Uuid,
) -> Result<JobProcessDetails> {
    let statuses: Vec<String> =
        sqlx::query_scalar("SELECT status FROM job_executions WHERE job_id = $1")
            .bind(job_id)
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| OutboxError::sqlx(STEP, e))?;
    executions::counted(STEP, &statuses)
}
