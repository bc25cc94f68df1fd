//! A claimed job's result, from extraction to stored object, as one stream: the engine's
//! chunks of result JSON are HMAC'd and sealed as they come and written to the object store in
//! parts, so memory stays bounded whatever the result's size and the stages overlap.
//!
//! Nothing partial is ever visible: the object is published only at the end, after the
//! extraction succeeded and the claim was checked once more; a failure, a timeout or a cancel
//! aborts the upload. A request to the store that fails is tried again where it failed (a part,
//! from the bytes it still holds) for up to `OBJECT_STORAGE_RETRY_SEC` from the first failure,
//! never past the job's timeout: an S3 outage costs no re-extraction, and a long one fails the
//! job instead of sending it back to the customer's database again and again.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use contract::event::StoredResult;
use contract::Redacted;
use engine::{Chunks, EngineError, Watch};
use outbox::Lease;
use storage::{object_key, RetryPolicy, StorageError};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument as _;
use uuid::Uuid;

use super::claimed::ClaimedRun;
use super::core::{JobCore, Requeue};
use super::ports::ResultUpload;
use super::sealing::{Sealing, SealingError};
use super::spans::{stage, DatasourceSpans};
use crate::metrics;

/// Why a claimed job produced no stored result.
pub(super) enum Failure {
    /// The job fails, with this (redacted) reason.
    Job(Redacted),
    /// The job's timeout fired (lifecycle §2): it fails with this reason, and the datasources
    /// still running timed out.
    TimedOut(Redacted),
    /// A dependency was unreachable (the cause); the job may complete later.
    Transient(Requeue, String),
    /// The claim was taken over before the object was written: the new owner runs the job.
    LostClaim,
    /// A cancel came before the object was written (a graceful one let the running
    /// datasources end first): nothing is stored; the run ends it.
    Canceled,
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
    // The timeout covers the whole run: no write is tried again after it.
    let job_ends = started + limit.remaining().unwrap_or_default();
    let retry = Arc::new(StoreRetry {
        job_id: job.job_id,
        window: core.settings.storage_retry,
        job_ends,
        give_up_at: OnceLock::new(),
    });
    let mut upload = ports.objects.upload(&key.full, retry);
    let sealing = Sealing::new(&core.settings.keys);
    let graceful = watch.graceful.clone();

    let (out, chunks) = mpsc::channel(engine::OUTPUT_CHUNKS);
    let extracting = Instant::now();
    let extract_span = stage!("extract");
    let watch = Watch {
        observer: DatasourceSpans::around(watch.observer, &extract_span),
        graceful: watch.graceful,
        admission: watch.admission,
    };
    let extraction = async {
        let extracted = ports
            .extractor
            .extract(&job.mapped_fields, &job.filters, limit, watch, out)
            .await;
        metrics::stage("extract", extracting.elapsed());
        extracted
    }
    .instrument(extract_span);
    // Sealing runs as the chunks come (each full part uploaded as it fills): its span covers it.
    let (extracted, written) = tokio::join!(
        extraction,
        write(job.job_id, chunks, sealing, upload.as_mut()).instrument(stage!("seal"))
    );
    let outcome = match (extracted, written) {
        (_, Err(failure)) => Err(failure),
        (Err(error), Ok(_)) => Err(extraction_failure(
            job.job_id,
            error,
            graceful.is_cancelled(),
        )),
        (Ok(_), Ok(_)) if graceful.is_cancelled() => Err(Failure::Canceled),
        (Ok(extracted), Ok(sealing)) => Ok((extracted, sealing)),
    };
    let (extracted, sealing) = match outcome {
        Ok(done) => done,
        Err(failure) => {
            upload.abort().await;
            return Err(failure);
        }
    };
    metrics::extracted(extracted.row_count, extracted.size_bytes);
    metrics::spilled(extracted.spilled);

    let (hmac, tail, sealing_took) = sealing.finish();
    metrics::stage("seal", sealing_took);
    let stored = async {
        let storing = Instant::now();
        if let Err(error) = upload.write(&tail).await {
            upload.abort().await;
            return Err(store_failure(job.job_id, error));
        }
        // Every run of a job writes the same key. The heartbeat notices a lost claim only a third
        // of a lease at a time, so the claim is checked (and renewed when less than half a lease
        // is left) right before the object is published: a run whose claim was taken over while
        // it extracted leaves the object to the new owner, and a run canceled meanwhile
        // (gracefully: its statements were left to end) stores nothing.
        let mut verdict = None;
        let check = Box::pin(async {
            let lease = ports
                .jobs
                .hold_lease(job.job_id, run.owner, core.settings.lease)
                .await;
            let refused = match lease {
                Ok(Lease::Held) => return Ok(()),
                Ok(Lease::Canceling { .. }) => Failure::Canceled,
                Ok(Lease::Lost) => Failure::LostClaim,
                Err(e) => Failure::Transient(Requeue::StateDatabase, e.to_string()),
            };
            verdict = Some(refused);
            Err("the job's claim is no longer held".to_owned())
        });
        let finished = upload.finish(check).await;
        if let Some(refused) = verdict {
            return Err(refused);
        }
        finished.map_err(|error| store_failure(job.job_id, error))?;
        metrics::stage("store", storing.elapsed());
        Ok(())
    }
    .instrument(stage!("store"))
    .await;
    stored?;
    Ok((
        StoredResult {
            path: key.path,
            size_bytes: extracted.size_bytes,
            row_count: extracted.row_count,
            hmac,
        },
        key.full,
    ))
}

/// Seals each chunk as it comes, its text appended straight into the upload's part being
/// filled (a chunk that fills the part goes on in the next), until the extraction ends (its
/// sender dropped). Returns the seal to finish; the extraction says whether to.
async fn write(
    job_id: Uuid,
    mut chunks: Chunks,
    mut sealing: Sealing,
    upload: &mut dyn ResultUpload,
) -> Result<Sealing, Failure> {
    // Dropping `chunks` on a failure ends the extraction too (`EngineError::Abandoned`).
    while let Some(mut chunk) = chunks.recv().await {
        let mut from = 0;
        while from < chunk.len() {
            let part = upload
                .lend()
                .await
                .map_err(|error| store_failure(job_id, error))?;
            let sealed = sealing
                .update(chunk, from, part)
                .await
                .map_err(|e| match e {
                    SealingError::TooLong => Failure::Job(Redacted::new(&e.to_string())),
                    SealingError::Interrupted(_) => {
                        Failure::Transient(Requeue::Internal, e.to_string())
                    }
                })?;
            (sealing, chunk, from) = (sealed.sealing, sealed.chunk, sealed.sealed);
            upload
                .give_back(sealed.part)
                .await
                .map_err(|error| store_failure(job_id, error))?;
        }
    }
    Ok(sealing)
}

/// Why an extraction that ended in `error` produced nothing.
fn extraction_failure(job_id: Uuid, error: EngineError, canceled: bool) -> Failure {
    match error {
        // A canceled job ends canceled, whatever its last datasources came to.
        _ if canceled => Failure::Canceled,
        EngineError::Canceled => Failure::Canceled,
        EngineError::Timeout(_) => {
            metrics::timed_out();
            Failure::TimedOut(Redacted::new(&error.to_string()))
        }
        // This Worker's disk, which no retry fixes: the job fails once, and says where.
        EngineError::Spill { .. } => {
            metrics::spill_failed();
            let reason = Redacted::new(&error.to_string());
            tracing::warn!(%job_id, %reason, "Job failed: a part of its result could not be spilled to ENGINE_SPILL_DIR.");
            Failure::Job(reason)
        }
        // Only the connection store's outage is retriable: the job may complete once it answers.
        e if e.is_retriable() => Failure::Transient(Requeue::ConnectionStore, e.to_string()),
        e => Failure::Job(Redacted::new(&e.to_string())),
    }
}

/// A write the store refused, or that was tried again until [`StoreRetry`] gave up: the job
/// fails, its reason redacted.
fn store_failure(job_id: Uuid, error: StorageError) -> Failure {
    if error.is_retriable() {
        tracing::warn!(%job_id, %error, "Job failed: its result could not be stored within OBJECT_STORAGE_RETRY_SEC.");
        return Failure::Job(Redacted::new(&format!(
            "storage write did not complete: {error}"
        )));
    }
    Failure::Job(Redacted::new(&error.to_string()))
}

/// When a failed write to the store is tried again: after a capped, jittered wait, while
/// `OBJECT_STORAGE_RETRY_SEC` from the job's first failed write and the job's own time
/// (`job_ends`) both last. No attempt starts after that.
struct StoreRetry {
    job_id: Uuid,
    window: Duration,
    job_ends: Instant,
    /// Set at the first failure, shared by every request of the upload.
    give_up_at: OnceLock<Instant>,
}

impl RetryPolicy for StoreRetry {
    fn next_wait(&self, failures: u32, error: &StorageError) -> Option<Duration> {
        let now = Instant::now();
        let give_up_at = *self
            .give_up_at
            .get_or_init(|| (now + self.window).min(self.job_ends));
        let wait = STORE_BACKOFF.delay(failures);
        if now + wait >= give_up_at {
            return None;
        }
        metrics::storage_retry();
        let job_id = self.job_id;
        tracing::warn!(%job_id, %error, failures, wait_ms = wait.as_millis() as u64, "Could not store part of the job's result; writing it again.");
        Some(wait)
    }
}
