//! Ending a cancel without a run (lifecycle §3): for a delivery of a job whose cancel came
//! first (the events carry its message's metadata), and for the sweeper, when the owner of a
//! cancel in progress died. An object a dead owner may have stored is deleted.

use contract::lifecycle::{Refusal, Then, Transition};
use contract::Redacted;
use outbox::{CancelEnded, Controlled, EndCancel, ExecutionReport, PendingEvent};
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
    match core.ports.jobs.end_cancel(&request).await {
        Ok(Controlled::Done {
            transition,
            events,
            canceled,
        }) => {
            if job.owner.is_none() {
                tracing::info!(job_id = %job.job_id, status = %transition.to.status, "The job's cancel ended without a run.");
            }
            let ended = CancelCommitted {
                transition,
                events,
                canceled,
            };
            after_cancel(core, job.job_id, job.tenant, &publisher, ended).await;
            CancelEnd::Ended
        }
        Ok(Controlled::Refused(Refusal::Unknown)) => CancelEnd::OtherTenant,
        Ok(Controlled::Refused(Refusal::InvalidTransition { .. })) => CancelEnd::MovedOn,
        Err(error) => CancelEnd::NotRecorded(error.to_string()),
    }
}

/// A cancel's end, committed (by [`end_cancel`], or by a terminal record the cancel won).
pub(super) struct CancelCommitted {
    pub transition: Transition,
    pub events: Vec<PendingEvent>,
    pub canceled: Option<CancelEnded>,
}

/// After a cancel's end is committed: it is said where a person looks, its events are
/// published, and the object a run may have stored is discarded (or, when a delete waited on
/// the cancel, deleted and the deletion recorded).
pub(super) async fn after_cancel(
    core: &JobCore,
    job_id: Uuid,
    tenant: Option<&str>,
    publisher: &str,
    ended: CancelCommitted,
) {
    if let Some(canceled) = &ended.canceled {
        report_canceled(job_id, tenant, canceled);
    }
    core.publish(publisher, &ended.events).await;
    match ended.transition.then {
        Then::DiscardObject => delete_result_of(core, tenant, job_id).await,
        Then::DeleteObject => {
            finish_deletion(core, job_id, tenant, publisher).await;
        }
        Then::Nothing | Then::Run | Then::StopStatements { .. } => {}
    }
}

/// The line a person reads first about a canceled job: at WARN, with why (the cancel's kind,
/// its reason code and its redacted comment); and the cancel's duration in its histogram.
pub(crate) fn report_canceled(job_id: Uuid, tenant: Option<&str>, ended: &CancelEnded) {
    if let Some(after) = ended.after {
        crate::metrics::canceled(after);
    }
    let reason = Redacted::new(&cancel_reason(ended));
    let tenant = tenant.unwrap_or("");
    tracing::warn!(%job_id, tenant, status = "canceled", %reason, "Job canceled.");
}

/// Why a job was canceled, in the words of its cancel request.
fn cancel_reason(ended: &CancelEnded) -> String {
    let kind = if ended.force {
        "force-canceled"
    } else {
        "canceled"
    };
    let mut reason = format!("{kind} through the control API");
    if let Some(code) = &ended.reason_code {
        reason.push_str(&format!(" (reasonCode {code})"));
    }
    if let Some(comment) = ended.comment.as_deref().filter(|c| !c.is_empty()) {
        reason.push_str(&format!(": {comment}"));
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(force: bool, reason_code: Option<&str>, comment: Option<&str>) -> CancelEnded {
        CancelEnded {
            after: None,
            force,
            reason_code: reason_code.map(str::to_owned),
            comment: comment.map(str::to_owned),
        }
    }

    #[test]
    fn the_reason_names_the_kind_the_code_and_the_comment() {
        assert_eq!(
            cancel_reason(&ended(false, None, None)),
            "canceled through the control API"
        );
        assert_eq!(
            cancel_reason(&ended(true, Some("OPS_1"), Some("wrong period"))),
            "force-canceled through the control API (reasonCode OPS_1): wrong period"
        );
        assert_eq!(
            cancel_reason(&ended(false, None, Some(""))),
            "canceled through the control API"
        );
    }
}
