//! Whether a delivery's signature holds (contract §3), and the one case where an old signature
//! is taken: a later delivery of a job already accepted from this very body.

use chrono::Utc;
use contract::envelope::{self, Route, ScannedJobId, SignatureError, Verified, VerifyPolicy};
use uuid::Uuid;

use super::core::{Disposition, JobCore, Requeue};
use super::inbound::InboundHeaders;
use crate::metrics;

/// Checks the signature; `Err` holds the disposition of a refused message, already logged.
/// `digest` is the body's SHA-256 once computed (a stale redelivery needs it here, the claim
/// later): the body is hashed at most once.
///
/// Freshness guards a job's first acceptance only. A signature older than the window is taken
/// when it is otherwise valid and the job was already accepted, for the same tenant, from this
/// very body (its digest is stored with the claim): a broker redelivery, a retry after an
/// unreachable dependency or a Worker that died must not turn into a dead-lettered "stale" job.
/// The state database is asked only once the MAC holds.
pub(super) async fn authenticate(
    core: &JobCore,
    headers: &InboundHeaders<'_>,
    route: &Route<'_>,
    body: &[u8],
    signed_job_id: &ScannedJobId,
    digest: &mut Option<[u8; 32]>,
) -> Result<(), Disposition> {
    let policy = &core.settings.verify;
    let verified = match verify(core, headers, route, body, signed_job_id, policy) {
        Err(stale @ SignatureError::Stale { .. }) => {
            verify_redelivery(core, headers, route, body, signed_job_id, stale, digest).await?
        }
        verified => verified,
    };
    match verified {
        Ok(Verified::V1) => Ok(()),
        Ok(Verified::LegacyBody) => {
            metrics::legacy_verified();
            Ok(())
        }
        Err(error) => {
            metrics::rejected(error.code());
            tracing::warn!(reason = error.code(), %error, "Job message dead-lettered: its signature was refused.");
            Err(Disposition::DeadLetter(error.code()))
        }
    }
}

/// A stale signature on a later delivery of an accepted job: `Ok(Ok(_))` when the MAC holds and
/// the body is the accepted one, `Ok(Err(stale))` when not, `Err(Retry)` when the state database
/// cannot tell.
async fn verify_redelivery(
    core: &JobCore,
    headers: &InboundHeaders<'_>,
    route: &Route<'_>,
    body: &[u8],
    signed_job_id: &ScannedJobId,
    stale: SignatureError,
    digest: &mut Option<[u8; 32]>,
) -> Result<Result<Verified, SignatureError>, Disposition> {
    let ageless = VerifyPolicy {
        max_age_secs: i64::MAX,
        ..core.settings.verify
    };
    let verified = match verify(core, headers, route, body, signed_job_id, &ageless) {
        Ok(verified) => verified,
        Err(error) => return Ok(Err(error)),
    };
    let job_id = match signed_job_id {
        ScannedJobId::Id(id) => Uuid::parse_str(id).ok(),
        ScannedJobId::TooLong => None,
    };
    let Some(job_id) = job_id else {
        return Ok(Err(stale));
    };
    match core
        .ports
        .jobs
        .accepted_message_digest(job_id, headers.tenant)
        .await
    {
        Ok(Some(accepted)) if accepted == *digest.get_or_insert_with(|| message_digest(body)) => {
            metrics::stale_redelivery_accepted();
            tracing::info!(%job_id, %stale, "Redelivery of an accepted job taken despite its signature's age: its body is the accepted one.");
            Ok(Ok(verified))
        }
        Ok(_) => Ok(Err(stale)),
        Err(error) => {
            tracing::warn!(%job_id, %error, "Could not check a stale redelivery against its accepted job; the message will be retried.");
            Err(Disposition::Retry(Requeue::StateDatabase))
        }
    }
}

/// Checks the signature with the internal key; `signed_job_id` is the body's, scanned once.
pub(super) fn verify(
    core: &JobCore,
    headers: &InboundHeaders<'_>,
    route: &Route<'_>,
    body: &[u8],
    signed_job_id: &ScannedJobId,
    policy: &VerifyPolicy,
) -> Result<Verified, SignatureError> {
    let keys = &core.settings.keys;
    envelope::verify_scanned(
        &headers.signature,
        route,
        body,
        signed_job_id,
        policy,
        Utc::now().timestamp(),
        |parts, signature| keys.internal_hmac().verify_hex_parts(parts, signature),
    )
}

/// The SHA-256 of a job message's body, kept with the job's claim.
pub(super) fn message_digest(body: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(body).into()
}
