//! Ending a cancel (lifecycle §3): for a delivery of a job whose cancel came first (the events
//! carry its message's metadata), for the sweeper, when the owner of a cancel in progress died,
//! and for a run whose statements ended or were stopped. An object a dead owner may have
//! stored is deleted (`after_commit.rs`).

use contract::lifecycle::Refusal;
use outbox::{EndCancel, ExecutionReport};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::after_commit::{after_commit, Committed};
use super::core::JobCore;

/// The job whose cancel is ended.
pub(super) struct Canceled<'a> {
    pub job_id: Uuid,
    pub tenant: Option<&'a str>,
    /// The message's (or the stored job's) metadata, for the events.
    pub metadata: &'a Map<String, Value>,
    pub request_id: Option<&'a str>,
    /// The claim owner of the run that ends its own cancel; `None` otherwise.
    pub owner: Option<&'a str>,
    /// That run's last reports of its executions (none otherwise).
    pub executions: &'a [ExecutionReport],
}

/// What ending a cancel came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CancelEnd {
    /// Recorded (with its events, handed to the sink), its object dealt with.
    Ended,
    /// The job left the state that called for it (claim it again).
    MovedOn,
    /// The job is another tenant's.
    OtherTenant,
    /// The state database did not record it; try again later.
    NotRecorded(String),
}

/// Ends the job's cancel: records it, publishes its events, and deletes the object a dead
/// owner may have stored (and records the deletion that was waiting on the cancel).
pub(super) async fn end_cancel(core: &JobCore, job: &Canceled<'_>) -> CancelEnd {
    let publisher = core.owner();
    let traceparent = crate::traces::current_traceparent();
    let request = EndCancel {
        job_id: job.job_id,
        tenant: job.tenant,
        metadata: job.metadata,
        request_id: job.request_id,
        source: &core.settings.source,
        publisher: &publisher,
        lease: core.settings.lease,
        owner: job.owner,
        executions: job.executions,
        // The delivery's or the run's trace; none for the sweeper (the store keeps the job's).
        traceparent: traceparent.as_deref(),
    };
    let committed = match core
        .ports
        .jobs
        .end_cancel(&request)
        .await
        .map(Committed::of)
    {
        Ok(Ok(committed)) => committed,
        Ok(Err(Refusal::Unknown)) => return CancelEnd::OtherTenant,
        Ok(Err(Refusal::InvalidTransition { .. })) => return CancelEnd::MovedOn,
        Err(error) => return CancelEnd::NotRecorded(error.to_string()),
    };
    if job.owner.is_none() {
        tracing::info!(job_id = %job.job_id, status = %committed.transition.to.status, "The job's cancel ended without a run.");
    }
    after_commit(core, job.job_id, job.tenant, &publisher, committed).await;
    CancelEnd::Ended
}
