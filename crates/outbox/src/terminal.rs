//! Recording how a job ended: its terminal state and the outbox row of its event, together.

use std::time::Duration;

use contract::event::{OutboundEvent, StoredResult, TerminalStatus};
use contract::lifecycle::{
    self, Event, JobState, JobStatus, Refusal, Step, Transition, UnknownStatus,
};
use contract::Redacted;
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use crate::control::{end_cancel_in, CancelEnded, Controlled, EndCancel};
use crate::error::{OutboxError, Result};
use crate::executions::{self, Close, ExecutionEvents, ExecutionReport};
use crate::mirror;
use crate::outbox::{leased_event, PendingEvent, RowId};
use crate::store::{interval, Store};

const STEP: &str = "recording a terminal state";

/// How a job ended, as stored with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalOutcome {
    /// The result object is stored (contract §7: store first, then record, then publish).
    Completed {
        result: StoredResult,
    },
    Failed {
        error: Redacted,
    },
}

impl TerminalOutcome {
    pub fn status(&self) -> TerminalStatus {
        match self {
            TerminalOutcome::Completed { .. } => TerminalStatus::Completed,
            TerminalOutcome::Failed { .. } => TerminalStatus::Failed,
        }
    }
}

/// A job's end, to be written with its event in one transaction.
#[derive(Debug, Clone)]
pub struct TerminalRecord<'a> {
    pub job_id: Uuid,
    /// `Some`: the owner of the claim that ran the job; the record is written only while that
    /// owner still holds it. `None`: the caller holds no claim (a message whose body could not
    /// be parsed, a job whose worker was lost); the record is written only when the job is new
    /// (its row is then created), pending, or processing under an expired lease. Either way a
    /// cancel that wins is ended instead ([`Recorded::Canceled`]).
    pub owner: Option<&'a str>,
    /// The job's tenant. With `owner: None` the row is created with it, and a row of another
    /// tenant is refused ([`Recorded::OtherTenant`]); a claim already checked it otherwise.
    pub tenant: Option<&'a str>,
    pub outcome: TerminalOutcome,
    /// The event of this outcome, frozen in the outbox as it is.
    pub event: &'a OutboundEvent,
    /// Who publishes the event right after the commit: the outbox row is leased to it for
    /// `lease`, so the repairer does not publish it at the same time.
    pub publisher: &'a str,
    pub lease: Duration,
    /// An object may be stored under the job's key that this end does not keep (a failed job
    /// after a run stored it): marked left with the end, for the sweeper to delete should the
    /// caller's delete not happen ([`Store::objects_left`]).
    pub leaves_object: bool,
    /// The job message's metadata, for the events of a cancel that wins (when the job's row
    /// has none yet).
    pub metadata: &'a Map<String, Value>,
    /// The run's last reports of its executions, written first (an execution that ended is not
    /// changed again); those still open then end as `close` says. `None`: the job never ran
    /// (failed unrun), so it has none.
    pub executions: &'a [ExecutionReport],
    pub close: Option<Close<'a>>,
}

/// What [`Store::record_terminal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// The terminal state and the outbox row are committed; the row is leased to the publisher,
    /// as are `executions`, the events of the executions this record ended (recorded before
    /// the job's).
    Inserted {
        outbox_id: RowId,
        executions: Vec<PendingEvent>,
    },
    /// Nothing written: the job had already ended (or is deleting, or deleted).
    AlreadyTerminal { status: JobStatus },
    /// The job's cancel wins over the outcome ([`lifecycle::step`]): a cancel of the caller's
    /// run is in progress, a cancel came before the job's message, or the owner of a cancel in
    /// progress is gone (its lease lapsed). The cancel is ended instead, in the same transaction
    /// (as [`Store::end_cancel`] ends it, as the owner when the caller holds the claim): the
    /// job is `canceled`, with the events of the transition (leased to the publisher), the
    /// run's executions written and the others ended `CANCELED`. Nothing of the outcome is
    /// written. `then` says what becomes of an object the run may have stored.
    Canceled {
        transition: Transition,
        events: Vec<PendingEvent>,
        canceled: Option<CancelEnded>,
    },
    /// Nothing written: the job is held by a claim that is not the caller's (with `owner: Some`,
    /// the claim was taken over; with `owner: None`, a live claim holds the job).
    LostClaim,
    /// Nothing written: an outbox row with this event's ce-id already exists (it belongs to a
    /// job state that is not terminal, so the store was edited by hand). The transaction was
    /// rolled back.
    DuplicateEvent { ce_id: String },
    /// Nothing written: without a claim, the job's row belongs to another tenant than the
    /// record's (a job has one tenant).
    OtherTenant,
}

impl Store {
    /// Records the end of a job: the terminal status with its result or redacted error, and the
    /// outbox row of its event, in one transaction (contract §5, §8). Either both are committed
    /// or neither is.
    ///
    /// On a claimed job's normal path this is one statement
    /// ([`Store::record_terminal_claimed`]); when that writes nothing, the locked-row
    /// transaction ([`Store::record_terminal_locked`]) answers.
    pub async fn record_terminal(&self, record: &TerminalRecord<'_>) -> Result<Recorded> {
        check_event(record, record.outcome.status())?;
        if let Some(recorded) = self.record_terminal_claimed(record).await? {
            return Ok(recorded);
        }
        self.record_terminal_locked(record).await
    }

    /// [`Store::record_terminal`] as a transaction under the job's row lock, whatever the
    /// job's state: the lifecycle machine judges the state read under the lock, and every
    /// answer of [`Recorded`] comes from here.
    pub async fn record_terminal_locked(&self, record: &TerminalRecord<'_>) -> Result<Recorded> {
        let status = record.outcome.status();
        check_event(record, status)?;
        let db = |e| OutboxError::sqlx(STEP, e);

        let mut tx = self.pool().begin().await.map_err(db)?;
        if record.owner.is_none() {
            // A job failed before it was ever claimed has no row yet.
            sqlx::query(
                "INSERT INTO jobs (job_id, tenant_id, request_id, status)
                 VALUES ($1, $2, $3, 'pending')
                 ON CONFLICT (job_id) DO NOTHING",
            )
            .bind(record.job_id)
            .bind(record.tenant)
            .bind(record.event.request_id.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }

        match verdict(&mut tx, record).await? {
            Verdict::Record => {}
            Verdict::Refuse(refusal) => {
                tx.rollback().await.map_err(db)?;
                return Ok(refusal);
            }
            Verdict::EndCancel => return self.cancel_instead(tx, record).await,
        }

        let events = ExecutionEvents {
            tenant: record.tenant,
            request_id: record.event.request_id.as_deref(),
            source: &record.event.attributes.source,
            publisher: record.publisher,
            lease: record.lease,
            traceparent: record.event.attributes.traceparent.as_deref(),
        };
        let mut executions =
            executions::apply(&mut tx, record.job_id, record.executions, &events).await?;
        // A run that reported every datasource ended leaves nothing open.
        if let Some(close) = record
            .close
            .filter(|_| !executions::all_ended(record.executions))
        {
            executions.extend(executions::close(&mut tx, record.job_id, close, &events).await?);
        }
        let Some(event) = end_with_event(&mut tx, record).await? else {
            tx.rollback().await.map_err(db)?;
            return Ok(Recorded::DuplicateEvent {
                ce_id: record.event.ce_id().to_owned(),
            });
        };
        let outbox_id = event.id;
        executions.push(event);
        mirror::record(&mut tx, self.mirror(), record.job_id, &executions).await?;
        executions.pop();
        tx.commit().await.map_err(db)?;
        Ok(Recorded::Inserted {
            outbox_id,
            executions,
        })
    }
}

impl Store {
    /// Ends the job's cancel in the record's transaction, instead of its outcome.
    async fn cancel_instead(
        &self,
        tx: Transaction<'static, Postgres>,
        record: &TerminalRecord<'_>,
    ) -> Result<Recorded> {
        let request = EndCancel {
            job_id: record.job_id,
            tenant: record.tenant,
            metadata: record.metadata,
            request_id: record.event.request_id.as_deref(),
            source: &record.event.attributes.source,
            publisher: record.publisher,
            lease: record.lease,
            owner: record.owner,
            executions: record.executions,
            traceparent: record.event.attributes.traceparent.as_deref(),
        };
        Ok(match end_cancel_in(tx, self.mirror(), &request).await? {
            Controlled::Done {
                transition,
                events,
                canceled,
            } => Recorded::Canceled {
                transition,
                events,
                canceled,
            },
            // The verdict was read under the same lock, so these do not happen; were they to,
            // nothing is written, as for a claim lost.
            Controlled::Refused(_) => Recorded::LostClaim,
        })
    }
}

/// What the record does, as the machine answers under the job's row lock.
enum Verdict {
    /// Write the outcome.
    Record,
    /// Write nothing.
    Refuse(Recorded),
    /// The job's cancel wins: end it instead.
    EndCancel,
}

/// The event must be this job's event of this outcome: anything else is a bug of the caller
/// that would publish a wrong event forever.
fn check_event(record: &TerminalRecord<'_>, status: TerminalStatus) -> Result<()> {
    let attributes = &record.event.attributes;
    if attributes.status != status.into() || attributes.is_execution() {
        return Err(OutboxError::invalid(
            STEP,
            format!(
                "a {status} outcome with a {}{} event",
                if attributes.is_execution() {
                    "execution "
                } else {
                    ""
                },
                attributes.status
            ),
        ));
    }
    if attributes.subject != record.job_id.as_hyphenated().to_string() {
        return Err(OutboxError::invalid(
            STEP,
            format!(
                "the event of job {} for job {}",
                attributes.subject, record.job_id
            ),
        ));
    }
    Ok(())
}

/// Locks the job row and says what the record does: the state machine ([`lifecycle::step`])
/// decides what the outcome does to the stored state, once the caller is known to be entitled
/// to end the job.
async fn verdict(
    tx: &mut Transaction<'static, Postgres>,
    record: &TerminalRecord<'_>,
) -> Result<Verdict> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let row = sqlx::query(
        "SELECT status, cancel_requested, force_canceled, delete_requested, owner,
                lease_expires_at <= now() AS expired,
                tenant_id IS DISTINCT FROM $2 AS other_tenant
         FROM jobs WHERE job_id = $1 FOR UPDATE",
    )
    .bind(record.job_id)
    .bind(record.tenant)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db)?;
    // Only a claimed record can miss its row (it is created above otherwise): never claimed.
    let Some(row) = row else {
        return Ok(Verdict::Refuse(Recorded::LostClaim));
    };
    let other_tenant: bool = row.try_get("other_tenant").map_err(db)?;
    if record.owner.is_none() && other_tenant {
        return Ok(Verdict::Refuse(Recorded::OtherTenant));
    }
    let status: String = row.try_get("status").map_err(db)?;
    let state = JobState {
        status: status
            .parse()
            .map_err(|e: UnknownStatus| OutboxError::Corrupt {
                step: STEP,
                detail: e.to_string(),
            })?,
        cancel_requested: row.try_get("cancel_requested").map_err(db)?,
        force: row.try_get("force_canceled").map_err(db)?,
        delete_requested: row.try_get("delete_requested").map_err(db)?,
    };
    let holder: Option<String> = row.try_get("owner").map_err(db)?;
    let expired: Option<bool> = row.try_get("expired").map_err(db)?;
    // Who may end the job: the holder of its claim; without a claim, anyone while no live
    // claim holds it.
    let entitled = match record.owner {
        Some(owner) => {
            holder.as_deref() == Some(owner)
                && matches!(
                    state.status,
                    JobStatus::Processing | JobStatus::CancellationInProgress
                )
        }
        None => state.status == JobStatus::Pending || expired == Some(true),
    };
    let outcome = record.outcome.status();
    let step = match outcome {
        TerminalStatus::Completed => Step::Completed,
        TerminalStatus::Failed => Step::Failed,
    };
    Ok(match lifecycle::step(Some(state), step) {
        // The job ended already (or is deleting, or deleted): nothing to do.
        Err(Refusal::InvalidTransition { from }) if !ongoing(from) => {
            Verdict::Refuse(Recorded::AlreadyTerminal { status: from })
        }
        Err(_) => Verdict::Refuse(Recorded::LostClaim),
        Ok(_) if !entitled => Verdict::Refuse(Recorded::LostClaim),
        // Its cancel wins: a cancel in progress, or one that came before the job's message.
        Ok(transition) if transition.events.contains(&Event::Canceled) => Verdict::EndCancel,
        Ok(transition) if transition.to.status.as_str() == outcome.as_str() => Verdict::Record,
        Ok(transition) => {
            return Err(OutboxError::invalid(
                STEP,
                format!(
                    "the lifecycle ends a {outcome} outcome of a {} job {}",
                    state.status, transition.to.status
                ),
            ))
        }
    })
}

/// A job not ended yet: a terminal outcome it refuses means the caller lost its claim.
fn ongoing(status: JobStatus) -> bool {
    matches!(
        status,
        JobStatus::Pending | JobStatus::Processing | JobStatus::CancellationInProgress
    )
}

/// Sets the job's terminal status with its result or error and inserts its event's outbox row
/// (leased to the publisher), in one statement. `None`: a row with the event's ce-id exists;
/// the job's row was updated all the same, so the caller rolls the transaction back.
async fn end_with_event(
    tx: &mut Transaction<'static, Postgres>,
    record: &TerminalRecord<'_>,
) -> Result<Option<PendingEvent>> {
    let (path, hmac, size, rows, error, object_left) = ended_fields(record)?;
    let event = record.event;
    let row = sqlx::query(
        "WITH ended AS (
             UPDATE jobs SET status = $2, result_path = $3, result_hmac = $4,
                             result_size_bytes = $5, result_row_count = $6, error_message = $7,
                             lease_expires_at = NULL, object_left = $8, finished_at = now(),
                             updated_at = now()
             WHERE job_id = $1
             RETURNING job_id)
         INSERT INTO outbox (ce_id, job_id, body, attributes, request_id, attempts,
                             leased_by, lease_until)
         SELECT $9, job_id, $10, $11, $12, 1, $13, now() + $14 FROM ended
         ON CONFLICT (ce_id, sink) DO NOTHING
         RETURNING id, created_at",
    )
    .bind(record.job_id)
    .bind(record.outcome.status().as_str())
    .bind(path)
    .bind(hmac)
    .bind(size)
    .bind(rows)
    .bind(error)
    .bind(object_left)
    .bind(event.ce_id())
    .bind(event.body.as_slice())
    .bind(Json(&event.attributes))
    .bind(event.request_id.as_deref())
    .bind(record.publisher)
    .bind(interval(record.lease))
    .fetch_optional(&mut **tx)
    .await
    .map_err(|e| OutboxError::sqlx(STEP, e))?;
    row.map(|row| leased_event(&row, record.job_id, event.clone()))
        .transpose()
        .map_err(|e| OutboxError::sqlx(STEP, e))
}

/// The job row's fields of its end: result path, HMAC, size and row count (completed), the
/// redacted error (failed), and whether an object is left for the sweeper.
#[allow(clippy::type_complexity)]
pub(crate) fn ended_fields<'a>(
    record: &'a TerminalRecord<'_>,
) -> Result<(
    Option<&'a str>,
    Option<&'a str>,
    Option<i64>,
    Option<i64>,
    Option<&'a str>,
    bool,
)> {
    let object_left =
        record.leaves_object && matches!(record.outcome, TerminalOutcome::Failed { .. });
    Ok(match &record.outcome {
        TerminalOutcome::Completed { result } => (
            Some(result.path.as_str()),
            Some(result.hmac.as_str()),
            Some(to_i64("sizeBytes", result.size_bytes)?),
            Some(to_i64("rowCount", result.row_count)?),
            None,
            object_left,
        ),
        TerminalOutcome::Failed { error } => {
            (None, None, None, None, Some(error.as_str()), object_left)
        }
    })
}

fn to_i64(what: &str, value: u64) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| OutboxError::invalid(STEP, format!("{what} {value} exceeds a bigint")))
}
