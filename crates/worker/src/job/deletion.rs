//! The second phase of a delete (lifecycle §3): the job's object is deleted (a missing one is
//! fine), then `deleted` is recorded with its event. When the store cannot be reached the job
//! stays `deletion_in_progress`; the sweeper's pass tries again until it succeeds, so `deleted`
//! is never recorded while the object may exist.

use outbox::Controlled;
use storage::object_key;
use uuid::Uuid;

use super::core::JobCore;

/// How a deletion's second phase went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// The object is gone and `deleted` is recorded.
    Deleted,
    /// Not now (the store or the state database could not be reached, or the job moved on):
    /// it stays `deletion_in_progress` for the next pass.
    Pending,
}

/// Deletes `job_id`'s object and records `deleted`, publishing its event as `publisher`.
pub async fn finish_deletion(
    core: &JobCore,
    job_id: Uuid,
    tenant: Option<&str>,
    publisher: &str,
) -> Deletion {
    // A tenant that cannot be part of a key never had an object stored.
    let existed = match object_key(core.ports.objects.key_prefix(), tenant, job_id) {
        Ok(key) => match core.ports.objects.delete(&key.full).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not delete the job's object; its deletion stays in progress.");
                crate::metrics::delete("retried");
                return Deletion::Pending;
            }
        },
        Err(_) => false,
    };
    let recorded = core
        .ports
        .jobs
        .object_deleted(
            job_id,
            existed,
            &core.settings.source,
            publisher,
            core.settings.lease,
        )
        .await;
    match recorded {
        Ok(Controlled::Done { events, .. }) => {
            core.publish(publisher, &events).await;
            crate::metrics::delete("deleted");
            tracing::info!(%job_id, "Job deleted.");
            Deletion::Deleted
        }
        Ok(Controlled::Refused(refusal)) => {
            tracing::warn!(%job_id, %refusal, "The job's deletion was not recorded.");
            Deletion::Pending
        }
        Err(error) => {
            tracing::warn!(%job_id, %error, "Could not record the job's deletion; it stays in progress.");
            Deletion::Pending
        }
    }
}
