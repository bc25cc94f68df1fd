//! [`ManagerStore`]: the job core's state port on the Manager's MongoDB, and what its methods
//! share: one multi-document transaction per transition, the job read as the lifecycle sees it,
//! and the driver's errors as `outbox::OutboxError`.
//!
//! Each transition reads the job document in a transaction, builds a
//! [`contract::lifecycle::JobState`] from it, asks [`contract::lifecycle::step`] and writes the
//! answer with a filter on what was read (`status` and [`VERSION`], a counter every write of
//! this Worker bumps), together with the event's outbox row, then commits. Two Workers racing
//! read the same version; the server lets one write it (the other's filter matches nothing, or
//! its transaction meets a write conflict and is run again from the read), so only one wins.
//! A transition whose only write is that conditional update (a claim: it records no event) runs
//! it without a transaction ([`ManagerStore::conditional`]): the same compare-and-set, one
//! `commitTransaction` fewer.
//! Transactions need a replica set (the chart's MongoDB is one); on a standalone server every
//! transition fails as unavailable.
//!
//! Leases and ages are computed with this Worker's clock (Go's job writes carry no lease to
//! agree with); Workers sharing a deployment must keep their clocks within a lease's margin.

use chrono::{DateTime, Utc};
use contract::lifecycle::{JobState, JobStatus};
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{
    Error as DriverError, TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT,
};
use mongodb::ClientSession;
use outbox::OutboxError;
use uuid::Uuid;

use crate::held_claims::HeldClaims;
use crate::jobs::{self, JobDocument, ManagerStatus, WORKER_FIELD};
use crate::outbox_claim::ClaimWindows;
use crate::{binary_id, Error, Store};

/// `$store.transaction($step, ...)` around `$body`, a block that sees the transaction's session
/// as `$session: &mut ClientSession` and answers `Result<Txn<T>, Fail>` (`return` and `?` leave
/// the block, not the caller).
macro_rules! transaction {
    ($store:expr, $step:expr, |$session:ident| $body:block) => {
        $store.transaction($step, |mut owned| async move {
            let answer: Result<_, $crate::manager_store::Fail> = async {
                let $session = &mut owned;
                $body
            }
            .await;
            (owned, answer)
        })
    };
}
pub(crate) use transaction;

/// What this Worker keeps under [`WORKER_FIELD`], key by key (Go ignores the sub-document).
pub(crate) mod field {
    /// Bumped by every write of this Worker: the compare-and-set of a transition.
    pub const VERSION: &str = "version";
    /// The lifecycle status (`canceled` among them), which the Manager's four cannot say.
    pub const STATE: &str = "state";
    pub const OWNER: &str = "owner";
    pub const LEASE_EXPIRES_AT: &str = "lease_expires_at";
    pub const ATTEMPTS: &str = "attempts";
    pub const FIRST_STARTED_AT: &str = "first_started_at";
    pub const STARTED_AT: &str = "started_at";
    pub const FINISHED_AT: &str = "finished_at";
    /// The job's tenant (`X-Tenant-ID`), fixed by its first claim; absent for single-tenant.
    pub const TENANT: &str = "tenant";
    pub const REQUEST_ID: &str = "request_id";
    /// SHA-256 of the first accepted message body (binary subtype 0).
    pub const MESSAGE_SHA256: &str = "message_sha256";
    pub const TIMEOUT_SECONDS: &str = "timeout_seconds";
    /// A run stored an object the job's end does not keep (see `JobStore::objects_left`).
    pub const OBJECT_LEFT: &str = "object_left";
    pub const RESULT_SIZE_BYTES: &str = "result_size_bytes";
    pub const RESULT_ROW_COUNT: &str = "result_row_count";
    /// The run's executions, by datasource (their state only, see `sweeps.rs`).
    pub const EXECUTIONS: &str = "executions";
    /// `{ce_id, outbox_id, tenant_id}`: the terminal event's outbox row, for
    /// `recorded_event` and a redelivery's republish.
    pub const TERMINAL_EVENT: &str = "terminal_event";
    /// The lifecycle's flags of a cancel or delete ([`contract::lifecycle::JobState`]).
    pub const CANCEL_REQUESTED: &str = "cancel_requested";
    pub const FORCE: &str = "force";
    pub const DELETE_REQUESTED: &str = "delete_requested";
    /// A cancel's or delete's `comment` and `reasonCode`, as accepted.
    pub const COMMENT: &str = "comment";
    pub const REASON_CODE: &str = "reason_code";
    /// When a cancel was first accepted (a canceled job has one).
    pub const CANCEL_REQUESTED_AT: &str = "cancel_requested_at";
    /// When a deletion started, and when it ended.
    pub const DELETION_STARTED_AT: &str = "deletion_started_at";
    pub const DELETED_AT: &str = "deleted_at";
    /// The last write of this Worker's.
    pub const UPDATED_AT: &str = "updated_at";
}

/// `fetcher_worker.version`, as a filter or `$inc` path.
pub(crate) const VERSION: &str = "fetcher_worker.version";

/// How many times a transaction that met a write conflict is run again from its read.
const TRANSACTION_TRIES: usize = 5;

/// What this Worker's events need from the deployment's configuration.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// `RABBITMQ_JOB_EVENTS_EXCHANGE`: copied into each outbox row, whose relay publishes there.
    pub exchange: String,
    /// `STREAMING_CLOUDEVENTS_SOURCE`: the `ce-source` of events re-emitted from a marker.
    pub source: String,
}

/// The job core's `JobStore` on the Manager's MongoDB. Cheap to clone (the client is shared).
#[derive(Debug, Clone)]
pub struct ManagerStore {
    store: Store,
    config: ManagerConfig,
    /// The MQTT mirror's topic prefix, when the mirror is on (`mirror`).
    mirror: Option<String>,
    /// When a relay of this Worker's takes a claimed or failed row of lib-streaming's outbox.
    windows: ClaimWindows,
    /// The claims this process's relays could not give back, shared by the clones.
    held: HeldClaims,
}

impl ManagerStore {
    pub fn new(store: Store, config: ManagerConfig) -> ManagerStore {
        ManagerStore {
            store,
            config,
            mirror: None,
            windows: ClaimWindows::default(),
            held: HeldClaims::default(),
        }
    }

    /// The same store taking lib-streaming's claimed and failed rows after `windows` instead of
    /// lib-commons' defaults (its repairer's passes and a redelivery's republish alike).
    pub fn with_windows(self, windows: ClaimWindows) -> ManagerStore {
        ManagerStore { windows, ..self }
    }

    pub fn windows(&self) -> &ClaimWindows {
        &self.windows
    }

    /// The claims of lib-streaming's outbox this process's relays (the publisher right after a
    /// commit, the repairer's passes) could not give back: one list for every clone of this
    /// store, so the repairer's next pass gives back what the publisher held.
    pub fn held_claims(&self) -> &HeldClaims {
        &self.held
    }

    /// The same store with the MQTT mirror on: every event recorded from now on also gets a row
    /// in `fetcher_worker_mirror` (topics under `prefix`), in its transaction.
    pub fn mirrored(self, prefix: &str) -> ManagerStore {
        ManagerStore {
            mirror: Some(prefix.to_owned()),
            ..self
        }
    }

    /// The mirror's topic prefix, when it is on.
    pub fn mirror(&self) -> Option<&str> {
        self.mirror.as_deref()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// Runs `body` in a transaction and commits it; a write conflict or a commit whose result
    /// is unknown runs it again from its read (at most [`TRANSACTION_TRIES`] times). `body`'s
    /// answer [`Txn::Abort`] aborts instead of committing.
    ///
    /// `body` owns the session while it runs and hands it back with its answer (a closure
    /// borrowing it would make its future's `Send` unprovable); [`transaction!`] writes that
    /// shape around a block.
    pub(crate) async fn transaction<T, F, Fut>(
        &self,
        step: &'static str,
        mut body: F,
    ) -> Result<T, OutboxError>
    where
        F: FnMut(ClientSession) -> Fut,
        Fut: std::future::Future<Output = (ClientSession, Result<Txn<T>, Fail>)>,
    {
        let mut last = None;
        for _ in 0..TRANSACTION_TRIES {
            let mut session = self
                .store
                .client()
                .start_session()
                .await
                .map_err(|e| unavailable(step, &e))?;
            session
                .start_transaction()
                .await
                .map_err(|e| unavailable(step, &e))?;
            let (mut session, answer) = body(session).await;
            let answer = match answer {
                Ok(Txn::Commit(answer)) => answer,
                Ok(Txn::Abort(answer)) => {
                    // Nothing was written that must stay; an abort that fails ends with the
                    // session.
                    let _ = session.abort_transaction().await;
                    return Ok(answer);
                }
                Err(Fail::Driver(error)) if error.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                    let _ = session.abort_transaction().await;
                    last = Some(contract::redact(&error.to_string()));
                    continue;
                }
                Err(Fail::Conflict) => {
                    let _ = session.abort_transaction().await;
                    last = Some("the job changed while this transition read it".to_owned());
                    continue;
                }
                Err(fail) => {
                    let _ = session.abort_transaction().await;
                    return Err(fail.into_outbox(step));
                }
            };
            let mut commit = session.commit_transaction().await;
            // The server may have committed: asking again is what the driver's own retry does.
            while let Err(error) = &commit {
                if !error.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) {
                    break;
                }
                commit = session.commit_transaction().await;
            }
            match commit {
                Ok(()) => return Ok(answer),
                Err(error) if error.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                    last = Some(contract::redact(&error.to_string()));
                }
                Err(error) => return Err(unavailable(step, &error)),
            }
        }
        Err(OutboxError::Unavailable {
            step,
            detail: last.unwrap_or_else(|| "the transaction kept conflicting".to_owned()),
        })
    }

    /// A transition whose only write is one conditional update of the job document, outside
    /// a transaction: `attempt` reads the document ([`read_job_alone`](Self::read_job_alone)),
    /// asks the lifecycle and writes its answer with
    /// [`write_alone_as_seen`](Self::write_alone_as_seen), which matches the document only as
    /// it was read (`status` and [`VERSION`], which every write of this Worker bumps); a
    /// [`Fail::Conflict`] runs it again from its read (at most [`TRANSACTION_TRIES`] times).
    ///
    /// The same guarantee as [`transaction`](Self::transaction) for such a transition (of two
    /// racing writers only one matches the version both read; nothing else is written that
    /// could be left half-done), without a transaction's `commitTransaction`: one command and
    /// one commit fewer. Transitions that write an event's row with the state use
    /// [`transaction`](Self::transaction).
    pub(crate) async fn conditional<T, F, Fut>(
        &self,
        step: &'static str,
        mut attempt: F,
    ) -> Result<T, OutboxError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Fail>>,
    {
        for _ in 0..TRANSACTION_TRIES {
            match attempt().await {
                Ok(answer) => return Ok(answer),
                Err(Fail::Conflict) => continue,
                Err(fail) => return Err(fail.into_outbox(step)),
            }
        }
        Err(OutboxError::Unavailable {
            step,
            detail: "the job kept changing while this transition read it".to_owned(),
        })
    }

    /// The job document `id`, read in `session`'s transaction; `None` when the Manager has none.
    /// Writes `update` on the job as `seen` read it, in `session`: [`Fail::Conflict`] (the
    /// transaction runs again from its read) when another writer changed it meanwhile.
    pub(crate) async fn write_as_seen(
        &self,
        session: &mut ClientSession,
        seen: &Seen,
        update: Document,
    ) -> Result<(), Fail> {
        self.write_as_seen_in(Some(session), seen, update).await
    }

    /// [`write_as_seen`](Self::write_as_seen) outside any transaction: for a transition whose
    /// one write is this one (see [`conditional`](Self::conditional)).
    pub(crate) async fn write_alone_as_seen(
        &self,
        seen: &Seen,
        update: Document,
    ) -> Result<(), Fail> {
        self.write_as_seen_in(None, seen, update).await
    }

    async fn write_as_seen_in(
        &self,
        session: Option<&mut ClientSession>,
        seen: &Seen,
        update: Document,
    ) -> Result<(), Fail> {
        let jobs = self.store.jobs();
        let write = jobs.update_one(seen.unchanged(), update);
        let done = match session {
            Some(session) => write.session(session).await?,
            None => write.await?,
        };
        if done.matched_count != 1 {
            return Err(Fail::Conflict);
        }
        Ok(())
    }

    pub(crate) async fn read_job(
        &self,
        session: &mut ClientSession,
        id: Uuid,
    ) -> Result<Option<JobDocument>, Fail> {
        self.read_job_in(Some(session), id).await
    }

    /// [`read_job`](Self::read_job) outside any transaction (the latest committed document).
    pub(crate) async fn read_job_alone(&self, id: Uuid) -> Result<Option<JobDocument>, Fail> {
        self.read_job_in(None, id).await
    }

    async fn read_job_in(
        &self,
        session: Option<&mut ClientSession>,
        id: Uuid,
    ) -> Result<Option<JobDocument>, Fail> {
        let jobs = self.store.jobs();
        let find = jobs.find_one(doc! {"_id": binary_id(id)});
        let found = match session {
            Some(session) => find.session(session).await?,
            None => find.await?,
        };
        match found {
            None => Ok(None),
            Some(document) => jobs::decode(document)
                .map(Some)
                .map_err(|reason| Fail::Store(Error::UndecodableJob { id, reason })),
        }
    }
}

/// A transaction body's answer.
pub(crate) enum Txn<T> {
    Commit(T),
    /// Nothing to keep: abort (a refusal, or a compare-and-set that matched nothing).
    Abort(T),
}

/// Why a transaction body stopped.
#[derive(Debug)]
pub(crate) enum Fail {
    Driver(DriverError),
    Store(Error),
    Outbox(OutboxError),
    /// A conditional write matched nothing: the document changed since it was read; the
    /// transaction runs again from its read.
    Conflict,
}

impl From<DriverError> for Fail {
    fn from(error: DriverError) -> Fail {
        Fail::Driver(error)
    }
}

impl From<Error> for Fail {
    fn from(error: Error) -> Fail {
        Fail::Store(error)
    }
}

impl Fail {
    fn into_outbox(self, step: &'static str) -> OutboxError {
        match self {
            Fail::Driver(error) => unavailable(step, &error),
            Fail::Store(error) => to_outbox(step, error),
            Fail::Outbox(error) => error,
            Fail::Conflict => OutboxError::Unavailable {
                step,
                detail: "the job changed while this transition read it".to_owned(),
            },
        }
    }
}

/// A driver error as the port's: every one the server or the network gave is worth trying
/// again later (a refused write of ours is a bug, not the database's state).
pub(crate) fn unavailable(step: &'static str, error: &DriverError) -> OutboxError {
    OutboxError::Unavailable {
        step,
        detail: contract::redact(&error.to_string()),
    }
}

/// This crate's errors as the port's: unavailable stays retriable; a document Go could not read
/// either is corrupt; a value refused before writing is an invalid argument.
pub fn to_outbox(step: &'static str, error: Error) -> OutboxError {
    match error {
        Error::Unavailable(detail) => OutboxError::Unavailable { step, detail },
        Error::JobNotFound(_) => OutboxError::Database {
            step,
            detail: error.to_string(),
        },
        Error::UndecodableJob { .. }
        | Error::UndecodableRow { .. }
        | Error::InvalidEnvelope { .. } => OutboxError::Corrupt {
            step,
            detail: error.to_string(),
        },
        Error::InvalidWrite { .. } => OutboxError::InvalidArgument {
            step,
            detail: error.to_string(),
        },
    }
}

/// The job as the lifecycle sees it, with what a transition needs of this Worker's fields.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub job: JobDocument,
    pub state: JobState,
    /// `fetcher_worker.version` as read (`None`: this Worker never wrote the job).
    pub version: Option<i64>,
    pub owner: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub tenant: Option<String>,
}

impl Seen {
    /// Reads the lifecycle state: this Worker's `state` when it is consistent with the
    /// Manager's status (a Go Worker may have written the job since), else the Manager's status.
    pub fn of(job: JobDocument) -> Result<Seen, Error> {
        let worker = job.fetcher_worker.clone().unwrap_or_default();
        let stored_state = worker
            .get_str(field::STATE)
            .ok()
            .and_then(|s| s.parse::<JobStatus>().ok());
        let from_manager = match job.status {
            ManagerStatus::Pending => JobStatus::Pending,
            ManagerStatus::Processing => JobStatus::Processing,
            ManagerStatus::Completed => JobStatus::Completed,
            ManagerStatus::Failed => JobStatus::Failed,
        };
        let status = match stored_state {
            Some(state) if shown_as(state, job.status) => state,
            _ => from_manager,
        };
        // Flags written with another status than the one read are not this job's any more.
        let consistent = stored_state == Some(status);
        let flag = |key: &str| consistent && worker.get_bool(key).unwrap_or(false);
        let state = JobState {
            status,
            cancel_requested: flag(field::CANCEL_REQUESTED),
            force: flag(field::FORCE),
            delete_requested: flag(field::DELETE_REQUESTED),
        };
        let version = match worker.get(field::VERSION) {
            Some(Bson::Int64(n)) => Some(*n),
            Some(Bson::Int32(n)) => Some(i64::from(*n)),
            _ => None,
        };
        let lease_expires_at = match worker.get(field::LEASE_EXPIRES_AT) {
            Some(Bson::DateTime(at)) => DateTime::from_timestamp_millis(at.timestamp_millis()),
            _ => None,
        };
        Ok(Seen {
            state,
            version,
            owner: worker.get_str(field::OWNER).ok().map(str::to_owned),
            lease_expires_at,
            tenant: worker.get_str(field::TENANT).ok().map(str::to_owned),
            job,
        })
    }

    /// The filter that matches the document only as it was read.
    pub fn unchanged(&self) -> Document {
        let version = self.version.map_or(Bson::Null, Bson::Int64);
        doc! {
            "_id": binary_id(self.job.id),
            "status": self.job.status.as_str(),
            VERSION: version,
        }
    }

    /// `fetcher_worker`, as read.
    pub fn worker(&self) -> Document {
        self.job.fetcher_worker.clone().unwrap_or_default()
    }
}

/// Whether the Manager's `status` is what it is shown for the lifecycle status `state`: a
/// canceled job is `failed` (its `metadata.error` says canceled), a job being canceled is still
/// `processing`, and a job being deleted or deleted keeps its last status (the Manager has no
/// delete: `completed`, or `failed` for a failed or canceled one). Anything else means a Go
/// Worker wrote the job since, and its status is the truth.
pub(crate) fn shown_as(state: JobStatus, manager: ManagerStatus) -> bool {
    use ManagerStatus as M;
    match state {
        JobStatus::Pending => manager == M::Pending,
        JobStatus::Processing | JobStatus::CancellationInProgress => manager == M::Processing,
        JobStatus::Completed => manager == M::Completed,
        JobStatus::Failed | JobStatus::Canceled => manager == M::Failed,
        JobStatus::DeletionInProgress | JobStatus::Deleted => {
            matches!(manager, M::Completed | M::Failed)
        }
    }
}

/// `key` under [`WORKER_FIELD`], for dotted `$set`s.
pub(crate) fn worker_key(key: &str) -> String {
    format!("{WORKER_FIELD}.{key}")
}
