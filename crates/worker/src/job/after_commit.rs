//! The one step after a lifecycle transition is committed, whoever committed it (a cancel or
//! delete request, a cancel ended by a run, a delivery or the sweeper, a terminal record the
//! cancel won, retention, a deletion's second phase): say it where a person looks, publish its
//! events, and do what the machine said follows ([`Then`]): discard the object a run may have
//! stored, or delete it and record `deleted`.
//!
//! A terminal record that wrote its own outcome (`completed`, `failed`) follows `finish.rs`,
//! whose publish first asks whether a lost commit happened.

use contract::lifecycle::{Refusal, Then, Transition};
use contract::Redacted;
use outbox::{CancelEnded, Controlled, PendingEvent};
use storage::object_key;
use uuid::Uuid;

use super::core::JobCore;
use super::deletion::finish_deletion;

/// A committed transition, as its store answered it.
pub struct Committed {
    pub transition: Transition,
    /// Its events' outbox rows, leased to the publisher.
    pub events: Vec<PendingEvent>,
    /// When it ended the job `canceled`, the cancel it ended.
    pub canceled: Option<CancelEnded>,
}

impl Committed {
    /// The transition of a [`Controlled::Done`], or the refusal.
    pub fn of(controlled: Controlled) -> Result<Committed, Refusal> {
        match controlled {
            Controlled::Done {
                transition,
                events,
                canceled,
            } => Ok(Committed {
                transition,
                events,
                canceled,
            }),
            Controlled::Refused(refusal) => Err(refusal),
        }
    }
}

/// See the module's docs. `publisher` holds the events' lease.
pub async fn after_commit(
    core: &JobCore,
    job_id: Uuid,
    tenant: Option<&str>,
    publisher: &str,
    committed: Committed,
) {
    if let Some(canceled) = &committed.canceled {
        report_canceled(job_id, tenant, canceled);
    }
    core.publish(publisher, &committed.events).await;
    match committed.transition.then {
        Then::DiscardObject => discard_object(core, tenant, job_id).await,
        Then::DeleteObject => {
            // A store that cannot be reached leaves it `deletion_in_progress` for the sweeper.
            finish_deletion(core, job_id, tenant, publisher).await;
        }
        Then::Nothing | Then::Run | Then::StopStatements { .. } => {}
    }
}

/// The line a person reads first about a canceled job: at WARN, with why (the cancel's kind,
/// its reason code and its redacted comment); and the cancel's duration in its histogram.
fn report_canceled(job_id: Uuid, tenant: Option<&str>, ended: &CancelEnded) {
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

/// Deletes the object a job that did not complete may have under its key, and says it is gone.
/// When the store cannot be reached, the object stays marked left (with the job's end) and the
/// sweeper deletes it later.
pub(super) async fn discard_object(core: &JobCore, tenant: Option<&str>, job_id: Uuid) {
    // A tenant that cannot be part of a key never had an object stored.
    let Ok(key) = object_key(core.ports.objects.key_prefix(), tenant, job_id) else {
        return;
    };
    if let Err(error) = core.ports.objects.delete(&key.full).await {
        tracing::warn!(%job_id, %error, "Could not delete the object of a job that did not complete; the sweeper deletes it later.");
        return;
    }
    if let Err(error) = core.ports.jobs.object_discarded(job_id).await {
        tracing::debug!(%job_id, %error, "Could not clear the object left; the sweeper deletes it again.");
    }
}

/// Deletes the object `key` a run stored for a job that did not complete with it, once. Used
/// where the job's state does not say the object is left (its end was not recorded, so the
/// job is retried and its next run overwrites or discards the object).
pub(super) async fn delete_quietly(core: &JobCore, key: &str) {
    if let Err(error) = core.ports.objects.delete(key).await {
        tracing::warn!(%error, "A result object of a job that did not complete could not be deleted; the job's next run replaces or discards it.");
    }
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
