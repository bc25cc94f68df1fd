//! A claimed job's result, from extraction to stored object: extract, HMAC, seal, store.
//!
//! A result that could not be written is written again in the same run, from the sealed bytes
//! kept in memory, for up to `OBJECT_STORAGE_RETRY_SEC` (never past the job's timeout): an S3
//! outage costs no re-extraction, and a long one fails the job instead of sending it back to
//! the customer's database again and again.

use std::time::Duration;

use contract::event::StoredResult;
use contract::Redacted;
use engine::{EngineError, Watch};
use outbox::Lease;
use storage::object_key;
use tokio::time::Instant;
use uuid::Uuid;

use super::core::JobCore;
use super::run::ClaimedRun;
use crate::metrics;

/// Why a claimed job produced no stored result.
pub(super) enum Failure {
    /// The job fails, with this (redacted) reason.
    Job(Redacted),
    /// The job's timeout fired (lifecycle §2): it fails with this reason, and the datasources
    /// still running timed out.
    TimedOut(Redacted),
    /// A dependency was unreachable; the job may complete later.
    Transient(String),
    /// The claim was taken over before the object was written: the new owner runs the job.
    LostClaim,
    /// A cancel came before the object was written (a graceful one let the running
    /// datasources end first): nothing is stored; the run ends it.
    Canceled,
}

impl Failure {
    /// A dependency's error: transient when it says a retry may succeed, else the job's end.
    fn of(retriable: bool, error: &dyn std::fmt::Display) -> Failure {
        if retriable {
            Failure::Transient(error.to_string())
        } else {
            Failure::Job(Redacted::new(&error.to_string()))
        }
    }
}

/// How a result write is tried again: from 250 ms doubling to 5 s, with full jitter.
const STORE_BACKOFF: outbox::Backoff = outbox::Backoff {
    base: Duration::from_millis(250),
    cap: Duration::from_secs(5),
};

/// Extraction to stored object. Returns the result the event reports and the object's key.
pub(super) async fn produce(
    core: &JobCore,
    run: &ClaimedRun<'_>,
    started: Instant,
    watch: Watch,
) -> Result<(StoredResult, String), Failure> {
    let job = run.job;
    let ports = &core.ports;
    let key = object_key(ports.objects.key_prefix(), run.tenant, job.job_id)
        .map_err(|e| Failure::Job(Redacted::new(&e.to_string())))?;

    let limit = run.time_limit(ports.extractor.timeout());
    let extracting = Instant::now();
    let graceful = watch.graceful.clone();
    let extraction = ports
        .extractor
        .extract(&job.mapped_fields, &job.filters, limit, watch)
        .await
        .map_err(|e| match e {
            // A canceled job ends canceled, whatever its last datasources came to.
            _ if graceful.is_cancelled() => Failure::Canceled,
            EngineError::Canceled => Failure::Canceled,
            EngineError::Timeout(_) => {
                metrics::timed_out();
                Failure::TimedOut(Redacted::new(&e.to_string()))
            }
            e => Failure::of(e.is_retriable(), &e),
        })?;
    if graceful.is_cancelled() {
        return Err(Failure::Canceled);
    }
    metrics::stage("extract", extracting.elapsed());
    let size_bytes = extraction.size_bytes();
    let row_count = extraction.row_count;
    metrics::extracted(row_count, size_bytes);

    // HMAC and AES-GCM over up to hundreds of MiB: off the async threads.
    let sealing = Instant::now();
    let keys = core.settings.keys.clone();
    let (hmac, sealed) = tokio::task::spawn_blocking(move || {
        let hmac = keys.external_hmac().sign_hex(&extraction.plaintext);
        (hmac, keys.storage().seal_raw(extraction.plaintext))
    })
    .await
    .map_err(|e| Failure::Transient(format!("sealing the result was interrupted: {e}")))?;
    metrics::stage("seal", sealing.elapsed());

    // Every run of a job writes the same key. The heartbeat notices a lost claim only a third
    // of a lease at a time, so the claim is checked (and renewed) right before the write: a run
    // whose claim was taken over while it extracted leaves the object to the new owner, and a
    // run canceled meanwhile (gracefully: its statements were left to end) stores nothing.
    match ports
        .jobs
        .renew_lease(job.job_id, run.owner, core.settings.lease)
        .await
    {
        Ok(Lease::Held) => {}
        Ok(Lease::Canceling { .. }) => return Err(Failure::Canceled),
        Ok(Lease::Lost) => return Err(Failure::LostClaim),
        Err(e) => return Err(Failure::Transient(e.to_string())),
    }
    let storing = Instant::now();
    // The timeout covers the whole run: no write starts after it.
    let job_ends = started + limit.remaining().unwrap_or_default();
    store_sealed(core, job.job_id, &key.full, &sealed, job_ends).await?;
    metrics::stage("store", storing.elapsed());
    Ok((
        StoredResult {
            path: key.path,
            size_bytes,
            row_count,
            hmac,
        },
        key.full,
    ))
}

/// Writes the sealed result, trying a transient failure again after a capped, jittered wait
/// while `OBJECT_STORAGE_RETRY_SEC` from the first failure and the job's own time (`job_ends`)
/// both last. No attempt starts after that; the job then fails, its reason redacted.
async fn store_sealed(
    core: &JobCore,
    job_id: Uuid,
    key: &str,
    sealed: &[u8],
    job_ends: Instant,
) -> Result<(), Failure> {
    let mut failures = 0u32;
    let mut give_up_at = None;
    loop {
        let error = match core.ports.objects.put_sealed(key, sealed).await {
            Ok(()) => return Ok(()),
            Err(error) if !error.is_retriable() => {
                return Err(Failure::Job(Redacted::new(&error.to_string())))
            }
            Err(error) => error,
        };
        failures += 1;
        metrics::storage_retry();
        let give_up_at = *give_up_at
            .get_or_insert_with(|| (Instant::now() + core.settings.storage_retry).min(job_ends));
        let wait = STORE_BACKOFF.delay(failures);
        if Instant::now() + wait >= give_up_at {
            tracing::warn!(%job_id, %error, failures, "Job failed: its result could not be stored within OBJECT_STORAGE_RETRY_SEC.");
            return Err(Failure::Job(Redacted::new(&format!(
                "storage write did not complete: {error}"
            ))));
        }
        tracing::warn!(%job_id, %error, failures, wait_ms = wait.as_millis() as u64, "Could not store the job's result; writing it again.");
        tokio::time::sleep(wait).await;
    }
}
