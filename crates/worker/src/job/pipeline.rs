//! A claimed job's run: extract, HMAC, seal, store, then record the terminal state with its
//! event and publish it. Fail-fast: any failure ends the job `failed` (without a stored
//! object), except transient ones, which send the message back to be retried.
//!
//! A result that could not be written is written again in the same run, from the sealed bytes
//! kept in memory, for up to `OBJECT_STORAGE_RETRY_SEC` (never past the job's timeout): an S3
//! outage costs no re-extraction, and a long one fails the job instead of sending it back to
//! the customer's database again and again.
//!
//! A job's object has one key (contract §7), so every run of a job writes the same object.
//! Whoever ends a job `failed` after an earlier run may have stored it deletes it; a run whose
//! commit went unanswered asks the database whether it happened before deleting anything.

use std::time::{Duration, Instant};

use chrono::Utc;
use contract::event::TerminalStatus;
use contract::event::{OutboundEvent, StoredResult};
use contract::{JobMessage, Redacted};
use outbox::{PendingEvent, Recorded, TerminalOutcome, TerminalRecord};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::events::EventContext;
use super::JobContext;
use crate::metrics;
use storage::object_key;

/// How a claimed run ended.
#[derive(Debug)]
pub(crate) enum RunEnd {
    /// The terminal state is committed (by this run or another); its event was published or
    /// left to the repairer.
    Recorded,
    /// A dependency was unreachable: nothing was recorded; the message should come back later.
    Retry(String),
    /// The claim was taken over while this run worked: the new owner finishes the job.
    LostClaim,
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

/// Why a job did not complete.
enum Failure {
    /// The job fails, with this (redacted) reason.
    Job(Redacted),
    /// A dependency was unreachable; the job may complete later.
    Transient(String),
    /// The claim was taken over before the object was written: the new owner runs the job.
    LostClaim,
}

/// How a result write is tried again: from 250 ms doubling to 5 s, with full jitter.
const STORE_BACKOFF: outbox::Backoff = outbox::Backoff {
    base: Duration::from_millis(250),
    cap: Duration::from_secs(5),
};

pub(crate) async fn run(
    ctx: &JobContext,
    job: &JobMessage,
    tenant: Option<&str>,
    request_id: Option<&str>,
    owner: &str,
    attempt: u32,
) -> RunEnd {
    let started = Instant::now();
    let lost = CancellationToken::new();
    let heartbeat = tokio::spawn(
        heartbeat(
            ctx.store.clone(),
            job.job_id,
            owner.to_owned(),
            ctx.lease,
            lost.clone(),
        )
        .in_current_span(),
    );
    let _stop_heartbeat = AbortOnDrop(heartbeat);

    let events = EventContext {
        job_id: job.job_id,
        tenant,
        request_id,
        metadata: &job.metadata,
        source: &ctx.source,
    };
    let produced = tokio::select! {
        produced = produce(ctx, job, tenant, owner, started) => produced,
        _ = lost.cancelled() => return RunEnd::LostClaim,
    };
    let (outcome, stored_key, event) = match produced {
        Ok((result, key)) => {
            let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            match events.completed(&result, took_ms.max(1), Utc::now()) {
                Ok(event) => (TerminalOutcome::Completed { result }, Some(key), event),
                Err(error) => {
                    delete_quietly(ctx, &key).await;
                    let error = Redacted::new(&format!("failed to build the job event: {error}"));
                    match events.failed(&error, Utc::now()) {
                        Ok(event) => (TerminalOutcome::Failed { error }, None, event),
                        Err(error) => return RunEnd::Retry(error.to_string()),
                    }
                }
            }
        }
        Err(Failure::Job(error)) => match events.failed(&error, Utc::now()) {
            Ok(event) => (TerminalOutcome::Failed { error }, None, event),
            Err(error) => return RunEnd::Retry(error.to_string()),
        },
        Err(Failure::Transient(reason)) => return RunEnd::Retry(reason),
        Err(Failure::LostClaim) => {
            tracing::warn!(job_id = %job.job_id, "The job's claim was taken over during extraction; abandoning this run before storing.");
            return RunEnd::LostClaim;
        }
    };

    let status = outcome.status();
    let record = TerminalRecord {
        job_id: job.job_id,
        owner: Some(owner),
        tenant,
        outcome,
        event: &event,
        publisher: owner,
        lease: ctx.lease,
    };
    let recording = Instant::now();
    let recorded = ctx.store.record_terminal(&record).await;
    metrics::stage("record", recording.elapsed());
    match recorded {
        Ok(Recorded::Inserted { outbox_id }) => {
            metrics::job_finished(status.as_str(), started.elapsed());
            tracing::info!(job_id = %job.job_id, tenant = tenant.unwrap_or(""), status = %status, "Job finished.");
            if status == TerminalStatus::Failed && attempt > 1 {
                delete_result_of(ctx, tenant, job.job_id).await;
            }
            publish_now(ctx, outbox_id, job.job_id, event, owner).await;
            RunEnd::Recorded
        }
        Ok(Recorded::AlreadyTerminal { status }) => {
            // Another run ended the job; an object this run stored belongs to no completed job.
            if status == TerminalStatus::Failed {
                if let Some(key) = stored_key {
                    delete_quietly(ctx, &key).await;
                }
            }
            RunEnd::Recorded
        }
        // `OtherTenant` is only for records without a claim; a claim already checked the tenant.
        Ok(Recorded::LostClaim | Recorded::OtherTenant) => RunEnd::LostClaim,
        Ok(Recorded::DuplicateEvent { ce_id }) => {
            tracing::error!(job_id = %job.job_id, %ce_id, "The job's event already exists for a job that had not ended; the state database was edited by hand.");
            RunEnd::Recorded
        }
        Err(error) => match commit_check(ctx, event.ce_id()).await {
            CommitCheck::Committed {
                outbox_id,
                leased_by,
            } => {
                tracing::info!(job_id = %job.job_id, tenant = tenant.unwrap_or(""), status = %status, "Job finished (the commit's answer was lost; the commit is confirmed).");
                if leased_by.as_deref() == Some(owner) {
                    metrics::job_finished(status.as_str(), started.elapsed());
                    publish_now(ctx, outbox_id, job.job_id, event, owner).await;
                }
                RunEnd::Recorded
            }
            CommitCheck::NotCommitted => {
                // The job is not completed, so its object must not stay.
                if let Some(key) = stored_key {
                    delete_quietly(ctx, &key).await;
                }
                RunEnd::Retry(error.to_string())
            }
            // The object stays. The message's next run finds the job ended (the commit happened)
            // or runs it again: it overwrites the object, or deletes it if it fails.
            CommitCheck::Unknown => RunEnd::Retry(error.to_string()),
        },
    }
}

/// Whether a terminal transaction whose answer was lost was committed anyway (the connection
/// can break after the `COMMIT` left).
#[derive(Debug, Clone, PartialEq, Eq)]
enum CommitCheck {
    /// It was: the event's outbox row, and who holds its lease.
    Committed {
        outbox_id: i64,
        leased_by: Option<String>,
    },
    /// It was not: nothing of it exists.
    NotCommitted,
    /// The database did not answer within a few seconds.
    Unknown,
}

/// Asks the database, a few times, whether the event `ce_id` was recorded.
async fn commit_check(ctx: &JobContext, ce_id: &str) -> CommitCheck {
    let mut wait = Duration::from_millis(250);
    for _ in 0..5 {
        match ctx.store.recorded_event(ce_id).await {
            Ok(Some((outbox_id, leased_by))) => {
                return CommitCheck::Committed {
                    outbox_id,
                    leased_by,
                }
            }
            Ok(None) => return CommitCheck::NotCommitted,
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    CommitCheck::Unknown
}

/// Deletes the object an earlier run of a job that ended `failed` may have stored.
pub(crate) async fn delete_result_of(ctx: &JobContext, tenant: Option<&str>, job_id: uuid::Uuid) {
    // A tenant that cannot be part of a key never had an object stored.
    if let Ok(key) = object_key(&ctx.objects.config().key_prefix, tenant, job_id) {
        delete_quietly(ctx, &key.full).await;
    }
}

/// Extraction to stored object. Returns the result the event reports and the object's key.
async fn produce(
    ctx: &JobContext,
    job: &JobMessage,
    tenant: Option<&str>,
    owner: &str,
    started: Instant,
) -> Result<(StoredResult, String), Failure> {
    let key = object_key(&ctx.objects.config().key_prefix, tenant, job.job_id)
        .map_err(|e| Failure::Job(Redacted::new(&e.to_string())))?;

    let extracting = Instant::now();
    let extraction = ctx
        .engine
        .extract(&job.mapped_fields, &job.filters)
        .await
        .map_err(|e| Failure::of(e.is_retriable(), &e))?;
    metrics::stage("extract", extracting.elapsed());
    let size_bytes = extraction.size_bytes();
    let row_count = extraction.row_count;
    metrics::extracted(row_count, size_bytes);

    // HMAC and AES-GCM over up to hundreds of MiB: off the async threads.
    let sealing = Instant::now();
    let keys = ctx.keys.clone();
    let (hmac, sealed) = tokio::task::spawn_blocking(move || {
        let hmac = keys.external_hmac().sign_hex(&extraction.plaintext);
        (hmac, keys.storage().seal_raw(extraction.plaintext))
    })
    .await
    .map_err(|e| Failure::Transient(format!("sealing the result was interrupted: {e}")))?;
    metrics::stage("seal", sealing.elapsed());

    // Every run of a job writes the same key. The heartbeat notices a lost claim only a third
    // of a lease at a time, so the claim is checked (and renewed) right before the write: a run
    // whose claim was taken over while it extracted leaves the object to the new owner.
    match ctx.store.renew_lease(job.job_id, owner, ctx.lease).await {
        Ok(true) => {}
        Ok(false) => return Err(Failure::LostClaim),
        Err(e) => return Err(Failure::Transient(e.to_string())),
    }
    let storing = Instant::now();
    let job_ends = started + ctx.engine.config().timeout;
    store_sealed(ctx, job.job_id, &key.full, &sealed, job_ends).await?;
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
    ctx: &JobContext,
    job_id: uuid::Uuid,
    key: &str,
    sealed: &[u8],
    job_ends: Instant,
) -> Result<(), Failure> {
    let mut failures = 0u32;
    let mut give_up_at = None;
    loop {
        let error = match ctx.objects.put_sealed(key, sealed).await {
            Ok(_) => return Ok(()),
            Err(error) if !error.is_retriable() => {
                return Err(Failure::Job(Redacted::new(&error.to_string())))
            }
            Err(error) => error,
        };
        failures += 1;
        metrics::storage_retry();
        let give_up_at =
            *give_up_at.get_or_insert_with(|| (Instant::now() + ctx.storage_retry).min(job_ends));
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

/// Publishes a just-recorded event (its outbox row leased to `owner`); the repairer retries it
/// if this does not land.
pub(crate) async fn publish_now(
    ctx: &JobContext,
    outbox_id: i64,
    job_id: uuid::Uuid,
    event: OutboundEvent,
    owner: &str,
) {
    let publishing = Instant::now();
    let pending = [PendingEvent {
        id: outbox_id,
        job_id,
        event,
        attempts: 1,
        created_at: Utc::now(),
    }];
    if let Err(error) = repairer::relay(&ctx.store, &ctx.publisher, owner, &pending).await {
        tracing::warn!(%job_id, %error, "Could not record the publish; the repairer will publish the event.");
    }
    metrics::stage("publish", publishing.elapsed());
}

async fn delete_quietly(ctx: &JobContext, key: &str) {
    if let Err(error) = ctx.objects.delete(key).await {
        tracing::error!(%error, "A result object of a job that did not complete could not be deleted.");
    }
}

/// Renews the claim every third of the lease; cancels `lost` when the claim is gone.
async fn heartbeat(
    store: outbox::Store,
    job_id: uuid::Uuid,
    owner: String,
    lease: Duration,
    lost: CancellationToken,
) {
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match store.renew_lease(job_id, &owner, lease).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(%job_id, "The job's claim was taken over; abandoning this run.");
                lost.cancel();
                return;
            }
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not renew the job's claim; retrying.")
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
