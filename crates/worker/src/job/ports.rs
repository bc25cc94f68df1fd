//! What the job core needs from the world, as five small traits, and what each implementation
//! must guarantee. The real ones (PostgreSQL, S3, RabbitMQ, the engine) are in
//! [`crate::adapters`]; the state-machine tests use in-memory ones.
//!
//! The data types are the owning crates' own (`outbox`'s claims and records, `storage`'s and
//! `engine`'s errors): a port narrows what the core may call, it does not translate.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use contract::message::{Filters, MappedFields};
use engine::{EngineError, Extracted, TimeLimit, Watch};
use futures_util::future::BoxFuture;
use outbox::{
    Claim, ClaimRequest, Controlled, EndCancel, ExecutionEvents, ExecutionReport, ExpiredJob,
    Lease, OutboxError, PendingEvent, Recorded, RecordedEvent, SlotHolder, TerminalRecord,
};
use storage::{PartBuffer, RetryPolicy, StorageError};
use tokio::sync::mpsc;
use uuid::Uuid;

/// The job state and the outbox (contract §5, §8): claims with leases, and each job's end
/// written with its event in one transaction.
///
/// Obligations: every method is atomic; an `Err` that [`OutboxError::is_retriable`] may still
/// have committed (the answer can be lost after the `COMMIT` left), so
/// [`JobStore::recorded_event`] must tell whether a terminal record happened.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Creates the job's row if new and takes it for `request.owner`, unless it is terminal,
    /// held under a live lease by another owner, or another tenant's.
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim, OutboxError>;

    /// Extends `owner`'s lease, and says whether a cancel came ([`Lease`]).
    async fn renew_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError>;

    /// The fence before the object is stored: what [`JobStore::renew_lease`] answers, with at
    /// least half of `lease` left when held. A store may renew only when less is left.
    async fn hold_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError> {
        self.renew_lease(job_id, owner, lease).await
    }

    /// Gives the job back (pending) if `owner` still holds it, so its next delivery takes it
    /// at once.
    async fn release(&self, job_id: Uuid, owner: &str) -> Result<bool, OutboxError>;

    /// Writes the job's end and its event's outbox row (leased to `record.publisher`) in one
    /// transaction, or nothing; see [`Recorded`] for when nothing is written. When the job's
    /// cancel wins over the outcome, it ends the cancel instead in that same transaction
    /// ([`Recorded::Canceled`]), as the lifecycle machine answers.
    async fn record_terminal(&self, record: &TerminalRecord<'_>) -> Result<Recorded, OutboxError>;

    /// Writes a run's reports of its executions while `owner` holds the job, each end with its
    /// event (returned, leased to `events.publisher`); nothing once `owner` lost it.
    async fn record_executions(
        &self,
        job_id: Uuid,
        owner: &str,
        reports: &[ExecutionReport],
        events: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, OutboxError>;

    /// The outbox row of the event `ce_id`, if it was committed.
    async fn recorded_event(&self, ce_id: &str) -> Result<Option<RecordedEvent>, OutboxError>;

    /// The SHA-256 of the body `job_id` was first accepted from, for `tenant`'s job.
    async fn accepted_message_digest(
        &self,
        job_id: Uuid,
        tenant: Option<&str>,
    ) -> Result<Option<[u8; 32]>, OutboxError>;

    /// Leases the job's unpublished events to `owner` (those no one else holds).
    async fn lease_unpublished(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<PendingEvent>, OutboxError>;

    /// Ends the cancel of a job whose claim answered [`Claim::CancelRequested`]: it is not
    /// run; its state and events are recorded together.
    async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled, OutboxError>;

    /// Ends a deletion once the job's object is gone (`result_deleted`: it existed).
    async fn object_deleted(
        &self,
        job_id: Uuid,
        result_deleted: bool,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled, OutboxError>;

    /// Jobs left `deletion_in_progress` for more than `grace`, with their tenant.
    async fn deletions_in_progress(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError>;

    /// Processing jobs whose lease lapsed more than `grace` ago, at most `limit`.
    async fn expired_jobs(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<ExpiredJob>, OutboxError>;

    /// Jobs whose object is marked left (failed or canceled after a run stored it), their end
    /// more than `grace` ago, at most `limit`, with their tenant.
    async fn objects_left(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError>;

    /// Marks the job's object left: a run stored it after the job ended failed or canceled.
    async fn mark_object_left(&self, job_id: Uuid) -> Result<(), OutboxError>;

    /// The job's object is gone: no longer left.
    async fn object_discarded(&self, job_id: Uuid) -> Result<(), OutboxError>;
}

/// Where sealed results go (contract §7).
///
/// Obligations: an object becomes visible whole, at [`ResultUpload::finish`] and only after its
/// check passed, or never (a failed, aborted or dropped upload leaves nothing, no open
/// multipart upload either); a delete of a missing object succeeds.
#[async_trait]
pub trait ResultStore: Send + Sync {
    /// The prefix every object key starts with ([`storage::object_key`]).
    fn key_prefix(&self) -> &str;

    /// Starts writing the object `key`, its failed requests tried again as `retry` says.
    fn upload(&self, key: &str, retry: Arc<dyn RetryPolicy>) -> Box<dyn ResultUpload>;

    async fn delete(&self, key: &str) -> Result<(), StorageError>;
}

/// An object being written, piece by piece ([`storage::Upload`]).
#[async_trait]
pub trait ResultUpload: Send {
    /// Appends to the body; may wait while earlier pieces are sent.
    async fn write(&mut self, bytes: &[u8]) -> Result<(), StorageError>;

    /// Lends the buffer the next bytes of the body are appended to in place, at most its
    /// [`room`](PartBuffer::room) (the part being filled, for [`storage::Upload`]); nothing else
    /// is written until it is [given back](Self::give_back). Optional: by default a buffer of
    /// its own, which `give_back` writes (a copy).
    async fn lend(&mut self) -> Result<PartBuffer, StorageError> {
        Ok(PartBuffer::unbounded())
    }

    /// Takes back the buffer [`lend`](Self::lend) lent: what was appended to it is the body's
    /// next bytes. May wait while earlier pieces are sent.
    async fn give_back(&mut self, part: PartBuffer) -> Result<(), StorageError> {
        self.write(part.appended()).await
    }

    /// Sends the rest, awaits `check` (its `Err` refuses the object) and publishes the object.
    async fn finish(
        self: Box<Self>,
        check: BoxFuture<'_, Result<(), String>>,
    ) -> Result<u64, StorageError>;

    /// Abandons the object; nothing of it stays.
    async fn abort(self: Box<Self>);
}

/// Where recorded events go (contract §8).
///
/// Obligations: `deliver` publishes events whose outbox rows are leased to `owner` and marks
/// each row published only once the broker confirmed it, never before; whatever it could not
/// publish stays in the outbox for the repairer. The mark may come after `deliver` returns
/// (batched with other jobs' marks): a mark that never comes (a crash, the state database
/// away) leaves the row leased until its lease ends, and the repairer publishes it again, at
/// least once. An `Err` is the state database's; the events are not lost.
#[async_trait]
pub trait EventSink: Send + Sync {
    async fn deliver(&self, owner: &str, events: &[PendingEvent]) -> Result<(), OutboxError>;
}

/// The extraction (contract §6).
///
/// Obligations: `extract` ends within its time limit and fails fast; an error that
/// [`EngineError::is_retriable`] means nothing about the job is known to be wrong.
#[async_trait]
pub trait Extractor: Send + Sync {
    /// Refuses a job over the engine's limits, before anything is stored or claimed for it.
    fn check_limits(&self, mapped: &MappedFields) -> Result<(), EngineError>;

    /// A job's timeout when its message names none (`ENGINE_EXTRACTION_TIMEOUT_SEC`).
    fn timeout(&self) -> Duration;

    /// Sends the result document on `out`, in order, in chunks; the document is whole only if
    /// this returns `Ok`. Ends with [`EngineError::Timeout`] once `limit` runs out, its
    /// statements stopped; tells `watch`'s observer how each datasource goes, and stops
    /// gracefully when asked ([`EngineError::Canceled`]); ends with
    /// [`EngineError::Abandoned`] when `out`'s receiver is gone.
    async fn extract(
        &self,
        mapped: &MappedFields,
        filters: &Filters,
        limit: TimeLimit,
        watch: Watch,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Extracted, EngineError>;
}

/// The slots of capped datasources (`DATASOURCE_<NAME>_MAX_CONCURRENT`), shared by every
/// replica: leases in the state database, not a semaphore of this process.
///
/// Obligations: [`take_slot`](SlotStore::take_slot) is one atomic decision that never lets
/// more than `slots` live holders of a datasource exist; a slot whose lease lapsed is free
/// (its Worker died); a holder is a datasource and an owner (one run reads a datasource once
/// at a time), so renew and release need no slot number, and a release of a slot not held
/// (or no longer held) does nothing. An `Err` decides nothing the caller relies on: it asks
/// again.
#[async_trait]
pub trait SlotStore: Send + Sync {
    /// Takes one of `datasource`'s `slots` slots for `holder` until `lease` from now; `None`
    /// when none is free.
    async fn take_slot(
        &self,
        datasource: &str,
        slots: u32,
        holder: SlotHolder<'_>,
        lease: Duration,
    ) -> Result<Option<u32>, OutboxError>;

    /// Extends `owner`'s slot of `datasource`; `false` when it no longer holds one.
    async fn renew_slot(
        &self,
        datasource: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<bool, OutboxError>;

    /// Frees `owner`'s slot of `datasource`, if it holds one.
    async fn release_slot(&self, datasource: &str, owner: &str) -> Result<(), OutboxError>;
}

/// The job core's dependencies.
#[derive(Clone)]
pub struct Ports {
    pub jobs: Arc<dyn JobStore>,
    pub objects: Arc<dyn ResultStore>,
    pub events: Arc<dyn EventSink>,
    pub extractor: Arc<dyn Extractor>,
    /// The capped datasources' slots; `None`: no datasource is capped (tests without a state
    /// backend).
    pub slots: Option<Arc<dyn SlotStore>>,
}
