//! Ending a cancel without a run (lifecycle §3): for a delivery of a job whose cancel came
//! first (the events carry its message's metadata), and for the sweeper, when the owner of a
//! cancel in progress died. An object a dead owner may have stored is deleted.

use contract::lifecycle::{Refusal, Then};
use outbox::{Controlled, EndCancel, ExecutionReport};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::core::JobCore;
use super::deletion::finish_deletion;
use super::finish::delete_result_of;

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
    };
    let (transition, events) = match core.ports.jobs.end_cancel(&request).await {
        Ok(Controlled::Done {
            transition,
            events,
            canceled_after,
        }) => {
            if let Some(after) = canceled_after {
                crate::metrics::canceled(after);
            }
            (transition, events)
        }
        Ok(Controlled::Refused(Refusal::Unknown)) => return CancelEnd::OtherTenant,
        Ok(Controlled::Refused(Refusal::InvalidTransition { .. })) => return CancelEnd::MovedOn,
        Err(error) => return CancelEnd::NotRecorded(error.to_string()),
    };
    tracing::info!(job_id = %job.job_id, status = %transition.to.status, "Job canceled without a run.");
    core.publish(&publisher, &events).await;
    match transition.then {
        Then::DiscardObject => delete_result_of(core, job.tenant, job.job_id).await,
        Then::DeleteObject => {
            finish_deletion(core, job.job_id, job.tenant, &publisher).await;
        }
        Then::Nothing | Then::Run | Then::StopStatements { .. } => {}
    }
    CancelEnd::Ended
}
