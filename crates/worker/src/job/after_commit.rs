//! The one step after a lifecycle transition is committed, whoever committed it (a cancel or
//! delete request, a cancel ended by a run, a delivery or the sweeper, a terminal record the
//! cancel won, retention, a deletion's second phase): say it where a person looks, publish its
//! events, and do what the machine said follows ([`Then`]): discard the object a run may have
//! stored, or delete it and record `deleted`.
//!
//! A terminal record that wrote its own outcome (`completed`, `failed`) follows `finish.rs`,
//! whose publish first asks whether a lost commit happened.

use contract::lifecycle::{Refusal, Then, Transition};
use outbox::{CancelEnded, Controlled, PendingEvent};
use uuid::Uuid;

use super::cancel::report_canceled;
use super::core::JobCore;
use super::deletion::finish_deletion;
use super::finish::delete_result_of;

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
        Then::DiscardObject => delete_result_of(core, tenant, job_id).await,
        Then::DeleteObject => {
            // A store that cannot be reached leaves it `deletion_in_progress` for the sweeper.
            finish_deletion(core, job_id, tenant, publisher).await;
        }
        Then::Nothing | Then::Run | Then::StopStatements { .. } => {}
    }
}
