//! Cancels and deletes on the Manager's documents (lifecycle §3): a control request, the end of
//! a cancel (by its run, a delivery or the sweeper) and the end of a deletion. Each reads the
//! job in a transaction, asks [`contract::lifecycle::step`], and writes the answer (conditioned
//! on the document as read) with its events' rows in this Worker's own outbox, then commits.
//!
//! What the Manager sees, since it knows four statuses only (UPSTREAM-MANAGER §6.2):
//! - a job being canceled stays `processing`; a canceled one is `failed`, `dedup_active:
//!   false`, `completed_at` set, and `metadata.error` a redacted text saying it was canceled.
//!   No `metadata.terminalEvent*` marker is written: a marker's status can only be `completed`
//!   or `failed`, and a Go repairer would re-emit its payload as `job.failed`, a second
//!   terminal event of a job whose terminal event is `job.canceled` (lifecycle §1). The
//!   `job.canceled` row is written in the same transaction instead, so nothing is left to repair.
//! - a job being deleted or deleted keeps its last status (the Manager has no delete); once
//!   deleted its `result_path` and `result_hmac` are unset.
//!
//! The lifecycle's own status (`canceled`, `deletion_in_progress`, ...) and flags live under
//! `fetcher_worker`, which the control API reads (`read_model.rs`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::event::{CancelBody, CloudEventAttributes, DeletionBody, Operation, OutboundEvent};
use contract::lifecycle::{
    self, Event, JobProcessDetails, JobStatus, Refusal, Step, Then, Transition,
};
use contract::Redacted;
use mongodb::bson::{doc, Bson, Document};
use mongodb::ClientSession;
use outbox::{
    CancelEnded, Close, ControlRequest, Controlled, EndCancel, ExecutionEvents, ExecutionReport,
    OutboxError, PendingEvent,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::claims::json_map;
use crate::executions;
use crate::jobs::{bson_time, ManagerStatus};
use crate::manager_store::{
    field, transaction, worker_key, Fail, ManagerStore, Seen, Txn, VERSION,
};
use crate::worker_outbox;

const STEP: &str = "recording a control request";

impl ManagerStore {
    /// Applies a cancel or delete request. The Manager creates every job: a job without a
    /// document is unknown (there is no `pending` row to wait for its message in), as is one
    /// of another tenant.
    pub async fn control(&self, request: &ControlRequest<'_>) -> Result<Controlled, OutboxError> {
        if !matches!(request.step, Step::Cancel { .. } | Step::Delete { .. }) {
            return Err(OutboxError::InvalidArgument {
                step: STEP,
                detail: "not a cancel or delete request".to_owned(),
            });
        }
        transaction!(self, STEP, |session| {
            let Some(job) = self.read_job(session, request.job_id).await? else {
                return Ok(Txn::Abort(Controlled::Refused(Refusal::Unknown)));
            };
            let seen = Seen::of(job)?;
            if seen.tenant.as_deref() != request.tenant {
                return Ok(Txn::Abort(Controlled::Refused(Refusal::Unknown)));
            }
            let transition = match lifecycle::step(Some(seen.state), request.step) {
                Ok(transition) => transition,
                Err(refusal) => return Ok(Txn::Abort(Controlled::Refused(refusal))),
            };
            let worker = seen.worker();
            let stored = |key: &str| worker.get_str(key).ok().map(str::to_owned);
            let texts = Texts {
                request_id: request
                    .request_id
                    .map(str::to_owned)
                    .or(stored(field::REQUEST_ID)),
                source: request.source,
                comment: request
                    .comment
                    .map(str::to_owned)
                    .or(stored(field::COMMENT)),
                reason_code: request
                    .reason_code
                    .map(str::to_owned)
                    .or(stored(field::REASON_CODE)),
                result_deleted: false,
                publisher: request.publisher,
                lease: request.lease,
                executions: &[],
                traceparent: None,
            };
            let done = self.apply(session, &seen, transition, &texts).await?;
            Ok(Txn::Commit(done))
        })
        .await
    }

    /// Ends the cancel of a job that must not run on: a job whose run stopped (`owner`, its
    /// claim's), or one whose owner died while canceling it (its lease lapsed). Refused when
    /// the job is in neither state.
    pub async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled, OutboxError> {
        transaction!(self, STEP, |session| {
            let Some(job) = self.read_job(session, request.job_id).await? else {
                return Ok(Txn::Abort(Controlled::Refused(Refusal::Unknown)));
            };
            let seen = Seen::of(job)?;
            if seen.owner.is_some() && seen.tenant.as_deref() != request.tenant {
                return Ok(Txn::Abort(Controlled::Refused(Refusal::Unknown)));
            }
            let state = seen.state;
            let waiting = state.status == JobStatus::Pending && state.cancel_requested;
            let canceling = state.status == JobStatus::CancellationInProgress;
            let lapsed = seen
                .lease_expires_at
                .is_none_or(|until| until <= Utc::now());
            let own =
                canceling && request.owner.is_some() && seen.owner.as_deref() == request.owner;
            if !(waiting || (canceling && lapsed) || own) {
                let refusal = Refusal::InvalidTransition { from: state.status };
                return Ok(Txn::Abort(Controlled::Refused(refusal)));
            }
            let step = if own { Step::Stopped } else { Step::Claim };
            let transition = match lifecycle::step(Some(state), step) {
                Ok(transition) => transition,
                Err(refusal) => return Ok(Txn::Abort(Controlled::Refused(refusal))),
            };
            let worker = seen.worker();
            let stored = |key: &str| worker.get_str(key).ok().map(str::to_owned);
            let texts = Texts {
                request_id: stored(field::REQUEST_ID).or(request.request_id.map(str::to_owned)),
                source: request.source,
                comment: stored(field::COMMENT),
                reason_code: stored(field::REASON_CODE),
                result_deleted: false,
                publisher: request.publisher,
                lease: request.lease,
                executions: request.executions,
                traceparent: request.traceparent,
            };
            let done = self.apply(session, &seen, transition, &texts).await?;
            Ok(Txn::Commit(done))
        })
        .await
    }

    /// Ends a deletion once the job's object is gone (`result_deleted`: its key was deleted;
    /// the event's `resultDeleted` is true when the job also had a stored result): `deleted`
    /// with its event; the executions go, each with its `job.execution.deleted`; the Manager's
    /// `result_path` and `result_hmac` are unset.
    pub async fn object_deleted(
        &self,
        job_id: Uuid,
        result_deleted: bool,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled, OutboxError> {
        transaction!(self, STEP, |session| {
            let Some(job) = self.read_job(session, job_id).await? else {
                return Ok(Txn::Abort(Controlled::Refused(Refusal::Unknown)));
            };
            let seen = Seen::of(job)?;
            let transition = match lifecycle::step(Some(seen.state), Step::ObjectDeleted) {
                Ok(transition) => transition,
                Err(refusal) => return Ok(Txn::Abort(Controlled::Refused(refusal))),
            };
            let worker = seen.worker();
            let stored = |key: &str| worker.get_str(key).ok().map(str::to_owned);
            let texts = Texts {
                request_id: stored(field::REQUEST_ID),
                source,
                comment: stored(field::COMMENT),
                reason_code: stored(field::REASON_CODE),
                result_deleted: result_deleted && seen.job.result_path.is_some(),
                publisher,
                lease,
                executions: &[],
                traceparent: None,
            };
            let done = self.apply(session, &seen, transition, &texts).await?;
            Ok(Txn::Commit(done))
        })
        .await
    }

    /// Writes `transition` over the job as `seen`, records its events (the executions' first),
    /// in `session`'s transaction; [`Fail::Conflict`] when the document changed since it was
    /// read. Shared by the requests above and a terminal record whose cancel wins.
    pub(crate) async fn apply(
        &self,
        session: &mut ClientSession,
        seen: &Seen,
        transition: Transition,
        texts: &Texts<'_>,
    ) -> Result<Controlled, Fail> {
        let now = Utc::now();
        let job_id = seen.job.id;
        let worker = seen.worker();
        let to = transition.to;
        let canceled = transition.events.contains(&Event::Canceled);
        let deleted = transition.events.contains(&Event::Deleted);
        let mut set = doc! {
            worker_key(field::STATE): to.status.as_str(),
            worker_key(field::CANCEL_REQUESTED): to.cancel_requested,
            worker_key(field::FORCE): to.force,
            worker_key(field::DELETE_REQUESTED): to.delete_requested,
            worker_key(field::COMMENT): texts.comment.as_deref().map_or(Bson::Null, Bson::from),
            worker_key(field::REASON_CODE): texts.reason_code.as_deref().map_or(Bson::Null, Bson::from),
            worker_key(field::UPDATED_AT): bson_time(now),
        };
        let mut unset = Document::new();
        let first = |key: &str, set: &mut Document| {
            if !matches!(worker.get(key), Some(Bson::DateTime(_))) {
                set.insert(worker_key(key), bson_time(now));
            }
        };
        if to.cancel_requested
            || matches!(
                to.status,
                JobStatus::CancellationInProgress | JobStatus::Canceled
            )
            || canceled
        {
            first(field::CANCEL_REQUESTED_AT, &mut set);
        }
        if matches!(
            to.status,
            JobStatus::DeletionInProgress | JobStatus::Deleted
        ) {
            first(field::DELETION_STARTED_AT, &mut set);
        }
        let mut stored = executions::stored(&worker);
        let mut ended = Vec::new();
        if canceled {
            // The Manager's view of a canceled job: a failed end, no marker (see the module).
            set.insert("status", ManagerStatus::Failed.as_str());
            set.insert("dedup_active", false);
            set.insert("completed_at", bson_time(now));
            set.insert("metadata.error", cancel_error(to.force, texts).as_str());
            set.insert(worker_key(field::LEASE_EXPIRES_AT), Bson::Null);
            first(field::FINISHED_AT, &mut set);
            ended = executions::apply(&mut stored, texts.executions);
            ended.extend(executions::close(&mut stored, Close::CANCELED, now));
            set.insert(worker_key(field::EXECUTIONS), stored.clone());
        }
        if transition.then == Then::DiscardObject {
            set.insert(worker_key(field::OBJECT_LEFT), true);
        }
        let mut removed = Vec::new();
        if deleted {
            set.insert(worker_key(field::DELETED_AT), bson_time(now));
            set.insert(worker_key(field::OBJECT_LEFT), false);
            unset.insert("result_path", "");
            unset.insert("result_hmac", "");
            unset.insert(worker_key(field::EXECUTIONS), "");
            removed = std::mem::take(&mut stored);
            removed.sort_by(|a, b| {
                a.get_str("datasource")
                    .ok()
                    .cmp(&b.get_str("datasource").ok())
            });
        }
        let mut update = doc! {"$set": set, "$inc": {VERSION: 1_i64}};
        if !unset.is_empty() {
            update.insert("$unset", unset);
        }
        self.write_as_seen(&mut *session, seen, update).await?;
        let execution_events = ExecutionEvents {
            tenant: seen.tenant.as_deref(),
            request_id: texts.request_id.as_deref(),
            source: texts.source,
            publisher: texts.publisher,
            lease: texts.lease,
            traceparent: texts.traceparent,
        };
        // The executions end (or go, with the job's deletion) before the job's own events.
        let mut events = self
            .execution_events(session, job_id, &ended, &execution_events)
            .await?;
        for execution in &removed {
            let event = executions::event_of(
                job_id,
                execution,
                Some(Operation::Deleted),
                &execution_events,
            )?;
            if let Some(event) = event {
                events.extend(self.insert(session, job_id, event, texts).await?);
            }
        }
        let metadata = event_metadata(seen);
        let details = JobProcessDetails::of(
            stored
                .iter()
                .filter_map(|e| e.get_str("status").ok()?.parse().ok()),
        );
        for event in &transition.events {
            let at = Utc::now();
            let body = match event {
                Event::CancellationInProgress | Event::Canceled => CancelBody {
                    job_id,
                    metadata: &metadata,
                    force: to.force,
                    comment: texts.comment.as_deref(),
                    reason_code: texts.reason_code.as_deref(),
                    canceled: (*event == Event::Canceled).then_some((at, details)),
                }
                .to_bytes(),
                Event::DeletionInProgress | Event::Deleted => DeletionBody {
                    job_id,
                    metadata: &metadata,
                    comment: texts.comment.as_deref(),
                    deleted: (*event == Event::Deleted).then_some((at, texts.result_deleted)),
                }
                .to_bytes(),
                Event::Completed | Event::Failed => {
                    return Err(Fail::Outbox(OutboxError::InvalidArgument {
                        step: STEP,
                        detail: "a run's outcome is recorded by record_terminal".to_owned(),
                    }))
                }
            }
            .map_err(|e| {
                Fail::Outbox(OutboxError::InvalidArgument {
                    step: STEP,
                    detail: e.to_string(),
                })
            })?;
            let mut attributes =
                CloudEventAttributes::new(*event, job_id, texts.source, seen.tenant.as_deref(), at);
            attributes.traceparent = texts.traceparent.map(str::to_owned);
            let outbound = OutboundEvent {
                attributes,
                request_id: texts.request_id.clone(),
                body,
            };
            events.extend(self.insert(session, job_id, outbound, texts).await?);
        }
        let canceled = canceled.then(|| CancelEnded {
            after: (now - cancel_requested_at(&worker).unwrap_or(now))
                .to_std()
                .ok(),
            force: to.force,
            reason_code: texts.reason_code.clone(),
            comment: texts.comment.clone(),
        });
        Ok(Controlled::Done {
            transition,
            events,
            canceled,
        })
    }

    async fn insert(
        &self,
        session: &mut ClientSession,
        job_id: Uuid,
        event: OutboundEvent,
        texts: &Texts<'_>,
    ) -> Result<Option<PendingEvent>, Fail> {
        worker_outbox::insert_leased(
            self.store(),
            session,
            job_id,
            event,
            texts.publisher,
            texts.lease,
            self.mirror(),
        )
        .await
    }
}

/// What a transition's write carries beside the lifecycle's state.
pub(crate) struct Texts<'a> {
    pub request_id: Option<String>,
    /// `STREAMING_CLOUDEVENTS_SOURCE`, for the events.
    pub source: &'a str,
    pub comment: Option<String>,
    pub reason_code: Option<String>,
    /// For `job.deleted`: an object existed and was removed.
    pub result_deleted: bool,
    pub publisher: &'a str,
    pub lease: Duration,
    /// A run's last reports of its executions, for a transition that ends its cancel.
    pub executions: &'a [ExecutionReport],
    /// The trace of the delivery or run that ends a cancel (telemetry on). A request through
    /// the control API has none: the Manager's job document keeps no trace.
    pub traceparent: Option<&'a str>,
}

/// `metadata.error` of a canceled job: that it was canceled, how, and the request's reason
/// code and comment, redacted.
fn cancel_error(force: bool, texts: &Texts<'_>) -> Redacted {
    let kind = if force { "force-canceled" } else { "canceled" };
    let mut reason = format!("job {kind} through the control API");
    if let Some(code) = &texts.reason_code {
        reason.push_str(&format!(" (reasonCode {code})"));
    }
    if let Some(comment) = texts.comment.as_deref().filter(|c| !c.is_empty()) {
        reason.push_str(&format!(": {comment}"));
    }
    Redacted::new(&reason)
}

/// The job's metadata as its lifecycle events carry it: the request's, without the markers
/// and without the `error` a Worker wrote at a failed (or canceled) end.
pub(crate) fn event_metadata(seen: &Seen) -> Map<String, Value> {
    let mut metadata = seen.job.request_metadata();
    if seen.job.status == ManagerStatus::Failed {
        metadata.remove("error");
    }
    json_map(&metadata)
}

fn cancel_requested_at(worker: &Document) -> Option<DateTime<Utc>> {
    match worker.get(field::CANCEL_REQUESTED_AT) {
        Some(Bson::DateTime(at)) => DateTime::from_timestamp_millis(at.timestamp_millis()),
        _ => None,
    }
}
