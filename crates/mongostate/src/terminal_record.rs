//! A job's end on the Manager's document with its event's outbox row, in one transaction.
//!
//! Upstream's gaps and what is chosen here:
//! - Go writes the terminal status with the three `metadata.terminalEvent*` markers, then the
//!   outbox row, then clears the markers: three writes, bridged by the repairer (§1.4, §5). Here
//!   the status and the row are one transaction, which leaves what Go's three writes leave once
//!   they all ran (no marker, the row there) and never less, so the markers that would only
//!   bridge its writes are not written at all: the terminal write `$unset`s them instead (one
//!   command fewer than setting them and clearing them in the same transaction). A Go repairer
//!   never sees a marker of this Worker's (it would only re-emit a duplicate, which consumers
//!   drop by `ce-id`).
//! - Go's terminal write has no status in its filter; here it is conditioned on the document as
//!   read (`status` and `fetcher_worker.version`), after the lifecycle machine judged it.
//! - The event's `ce-id` and row are kept under `fetcher_worker.terminal_event`, since a row's
//!   `payload` is a string no filter can look into.

use chrono::Utc;
use contract::event::TerminalStatus;
use contract::lifecycle::{self, Event, JobStatus, Refusal, Step};
use mongodb::bson::{doc, Bson, Document};
use outbox::{
    Controlled, ExecutionEvents, ExecutionReport, OutboxError, Recorded, RowId, TerminalOutcome,
    TerminalRecord,
};
use uuid::Uuid;

use crate::control::Texts;
use crate::executions;
use crate::jobs::{bson_time, ManagerStatus};
use crate::manager_store::{
    field, to_outbox, transaction, worker_key, Fail, ManagerStore, Seen, Txn, VERSION,
};
use crate::marker_repair::marker_keys;
use crate::outbox::Emit;
use crate::outbox_event::{event_time, leased_row};

const STEP: &str = "recording a terminal state";

impl ManagerStore {
    /// Records the job's end and its event's row (leased to `record.publisher`) in one
    /// transaction, or nothing; see `outbox::Recorded` for when nothing is written. A job with
    /// no document is [`Recorded::LostClaim`]: nothing is written (the Manager creates jobs),
    /// and no event is queued, as Go's failed write of a missing job queues none.
    ///
    /// The run's last execution reports are written first and the executions they leave open
    /// closed as `record.close` says, each end's event in this Worker's own outbox
    /// (`worker_outbox`), returned leased to the publisher.
    pub async fn record_terminal(
        &self,
        record: &TerminalRecord<'_>,
    ) -> Result<Recorded, OutboxError> {
        let status = record.outcome.status();
        check_event(record, status)?;
        let body =
            std::str::from_utf8(&record.event.body).map_err(|_| OutboxError::InvalidArgument {
                step: STEP,
                detail: "the event body is not UTF-8".to_owned(),
            })?;
        let at = event_time(record.event).map_err(|e| to_outbox(STEP, e))?;
        transaction!(self, STEP, |session| {
            let now = Utc::now();
            let Some(job) = self.read_job(session, record.job_id).await? else {
                return Ok(Txn::Abort(Recorded::LostClaim));
            };
            let seen = Seen::of(job)?;
            if record.owner.is_none()
                && seen.owner.is_some()
                && seen.tenant.as_deref() != record.tenant
            {
                return Ok(Txn::Abort(Recorded::OtherTenant));
            }
            let state = seen.state;
            let entitled = match record.owner {
                Some(owner) => {
                    seen.owner.as_deref() == Some(owner)
                        && matches!(
                            state.status,
                            JobStatus::Processing | JobStatus::CancellationInProgress
                        )
                }
                // A Go Worker's `processing` has no lease: it is never this caller's to end.
                None => {
                    state.status == JobStatus::Pending
                        || seen.lease_expires_at.is_some_and(|until| until <= now)
                }
            };
            let step = match status {
                TerminalStatus::Completed => Step::Completed,
                TerminalStatus::Failed => Step::Failed,
            };
            match lifecycle::step(Some(state), step) {
                Err(Refusal::InvalidTransition { from }) if !ongoing(from) => {
                    return Ok(Txn::Abort(Recorded::AlreadyTerminal { status: from }))
                }
                Err(_) => return Ok(Txn::Abort(Recorded::LostClaim)),
                Ok(_) if !entitled => return Ok(Txn::Abort(Recorded::LostClaim)),
                // The job's cancel wins over the outcome: it is ended instead, in this
                // transaction, as a control request's end of it would.
                Ok(transition) if transition.events.contains(&Event::Canceled) => {
                    let worker = seen.worker();
                    let stored = |key: &str| worker.get_str(key).ok().map(str::to_owned);
                    let texts = Texts {
                        request_id: stored(field::REQUEST_ID)
                            .or_else(|| record.event.request_id.clone()),
                        source: &record.event.attributes.source,
                        comment: stored(field::COMMENT),
                        reason_code: stored(field::REASON_CODE),
                        result_deleted: false,
                        publisher: record.publisher,
                        lease: record.lease,
                        executions: record.executions,
                        traceparent: record.event.attributes.traceparent.as_deref(),
                    };
                    return match self.apply(session, &seen, transition, &texts).await? {
                        Controlled::Done {
                            transition,
                            events,
                            canceled,
                        } => Ok(Txn::Commit(Recorded::Canceled {
                            transition,
                            events,
                            canceled,
                        })),
                        Controlled::Refused(_) => Ok(Txn::Abort(Recorded::LostClaim)),
                    };
                }
                Ok(transition) if transition.to.status.as_str() == status.as_str() => {}
                Ok(transition) => {
                    return Err(Fail::Outbox(OutboxError::InvalidArgument {
                        step: STEP,
                        detail: format!(
                            "the lifecycle ends a {status} outcome of a {} job {}",
                            state.status, transition.to.status
                        ),
                    }))
                }
            }
            // The row's tenant is the event's, so the event a relay rebuilds from the row's
            // envelope is the one recorded.
            let tenant = record.event.tenant();
            let emit = Emit {
                tenant,
                job_id: record.job_id,
                status,
                body,
                exchange: &self.config().exchange,
                source: &record.event.attributes.source,
                at,
            };
            let (row_id, row) = leased_row(&emit, record.publisher)?;
            // The run's last reports, then whatever they leave open closed, each end with its
            // event, recorded before the job's.
            let mut executions = executions::stored(&seen.worker());
            let mut ended = executions::apply(&mut executions, record.executions);
            if let Some(close) = record.close.filter(|_| !all_ended(record.executions)) {
                ended.extend(executions::close(&mut executions, close, now));
            }
            let events = ExecutionEvents {
                tenant: record.tenant,
                request_id: record.event.request_id.as_deref(),
                source: &record.event.attributes.source,
                publisher: record.publisher,
                lease: record.lease,
                traceparent: record.event.attributes.traceparent.as_deref(),
            };
            let mut update = terminal_update(record, status, now, row_id, tenant);
            if let Ok(set) = update.get_document_mut("$set") {
                set.insert(worker_key(field::EXECUTIONS), executions);
            }
            self.write_as_seen(&mut *session, &seen, update).await?;
            let written = self
                .execution_events(session, record.job_id, &ended, &events)
                .await?;
            self.store()
                .outbox_rows()
                .insert_one(row)
                .session(&mut *session)
                .await?;
            crate::mirror::record(
                self.store(),
                session,
                self.mirror(),
                record.job_id,
                record.event,
            )
            .await?;
            Ok(Txn::Commit(Recorded::Inserted {
                outbox_id: RowId::Uuid(row_id),
                executions: written,
            }))
        })
        .await
    }
}

/// The terminal `UpdateOne` (§9 item 5) with this Worker's fields: dotted `$set`s of `status`,
/// `dedup_active: false`, `completed_at`, the result fields or `metadata.error`, and
/// `fetcher_worker`'s end, lease cleared and version bumped; the three markers `$unset` (their
/// row is written in the same transaction, see the module's docs).
fn terminal_update(
    record: &TerminalRecord<'_>,
    status: TerminalStatus,
    now: chrono::DateTime<Utc>,
    row_id: Uuid,
    tenant: &str,
) -> Document {
    let mut set = doc! {
        "status": ManagerStatus::from(status).as_str(),
        "dedup_active": false,
        "completed_at": bson_time(now),
    };
    match &record.outcome {
        TerminalOutcome::Completed { result } => {
            if !result.path.is_empty() {
                set.insert("result_path", &result.path);
            }
            if !result.hmac.is_empty() {
                set.insert("result_hmac", &result.hmac);
            }
            set.insert(
                worker_key(field::RESULT_SIZE_BYTES),
                i64::try_from(result.size_bytes).unwrap_or(i64::MAX),
            );
            set.insert(
                worker_key(field::RESULT_ROW_COUNT),
                i64::try_from(result.row_count).unwrap_or(i64::MAX),
            );
        }
        TerminalOutcome::Failed { error } => {
            set.insert("metadata.error", error.as_str());
        }
    }
    set.insert(worker_key(field::STATE), status.as_str());
    set.insert(worker_key(field::LEASE_EXPIRES_AT), Bson::Null);
    set.insert(worker_key(field::FINISHED_AT), bson_time(now));
    set.insert(
        worker_key(field::OBJECT_LEFT),
        record.leaves_object && status == TerminalStatus::Failed,
    );
    set.insert(
        worker_key(field::TERMINAL_EVENT),
        doc! {
            "ce_id": record.event.ce_id(),
            "outbox_id": row_id.hyphenated().to_string(),
            "tenant_id": tenant,
        },
    );
    if let Some(tenant) = record.tenant {
        set.insert(worker_key(field::TENANT), tenant);
    }
    doc! {"$set": set, "$unset": marker_keys(), "$inc": {VERSION: 1_i64}}
}

/// The event must be this job's event of this outcome, as the PostgreSQL store checks.
fn check_event(record: &TerminalRecord<'_>, status: TerminalStatus) -> Result<(), OutboxError> {
    let attributes = &record.event.attributes;
    if attributes.status != status.into() || attributes.is_execution() {
        return Err(OutboxError::InvalidArgument {
            step: STEP,
            detail: format!("a {status} outcome with a {} event", attributes.status),
        });
    }
    if attributes.subject != record.job_id.as_hyphenated().to_string() {
        return Err(OutboxError::InvalidArgument {
            step: STEP,
            detail: format!(
                "the event of job {} for job {}",
                attributes.subject, record.job_id
            ),
        });
    }
    Ok(())
}

/// Whether `reports` leave nothing to close: every datasource reported, each ended.
fn all_ended(reports: &[ExecutionReport]) -> bool {
    !reports.is_empty() && reports.iter().all(|r| r.status.is_terminal())
}

/// A job not ended yet: a terminal outcome it refuses means the caller lost its claim.
fn ongoing(status: JobStatus) -> bool {
    matches!(
        status,
        JobStatus::Pending | JobStatus::Processing | JobStatus::CancellationInProgress
    )
}
