//! Ending a cancel (lifecycle §3): for a delivery of a job whose cancel came first (the events
//! carry its message's metadata), for the sweeper, when the owner of a cancel in progress died,
//! and for a run whose statements ended or were stopped. An object a dead owner may have
//! stored is deleted (`after_commit.rs`). And the line that says a job was canceled.

use contract::lifecycle::Refusal;
use contract::Redacted;
use outbox::{CancelEnded, EndCancel, ExecutionReport};
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
