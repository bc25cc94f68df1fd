//! In-memory ports: each answers from a script the test sets (an empty script answers the
//! everyday case) and remembers every call, for the test to read back.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use contract::event::TerminalStatus;
use contract::lifecycle::ExecutionStatus;
use contract::message::{Filters, MappedFields};
use engine::{DatasourceEnd, EngineError, Extracted, Extraction, TimeLimit, Watch};
use futures_util::future::BoxFuture;
use outbox::{
    Claim, ClaimRequest, Controlled, EndCancel, ExecutionEvents, ExecutionReport, ExpiredJob,
    Lease, OutboxError, PendingEvent, Recorded, RecordedEvent, TerminalOutcome, TerminalRecord,
};
use storage::{Cause, RetryPolicy, StorageError};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::job::ports::{EventSink, Extractor, JobStore, ResultStore, ResultUpload};

/// The state database is away.
pub fn db_down() -> OutboxError {
    OutboxError::Unavailable {
        step: "test",
        detail: "connection refused".into(),
    }
}

/// S3 is away.
pub fn s3_down(key: &str) -> StorageError {
    StorageError::Put {
        key: key.to_owned(),
        cause: Cause::new("connection refused", true),
    }
}

/// A terminal record as the fake store kept it.
#[derive(Debug, Clone)]
pub struct Written {
    pub job_id: Uuid,
    pub owner: Option<String>,
    pub status: TerminalStatus,
    pub error: Option<String>,
    pub ce_id: String,
    pub publisher: String,
    /// The run's last reports of its executions, and how those left open end.
    pub executions: Vec<ExecutionReport>,
    pub close_running: Option<ExecutionStatus>,
    pub close_error: Option<String>,
}

#[derive(Default)]
pub struct Jobs(Mutex<JobsState>);

pub struct JobsState {
    /// Answers of `claim`, in order; then `claim_default`.
    pub claims: VecDeque<Result<Claim, OutboxError>>,
    pub claim_default: Claim,
    /// The owners that asked for a claim.
    pub claimed: Vec<String>,
    /// Answers of `renew_lease`, in order; then `true`.
    pub renewals: VecDeque<Result<Lease, OutboxError>>,
    pub renew_calls: u32,
    pub released: Vec<String>,
    /// Answers of `record_terminal`, in order; then an insert. Each insert is kept in `written`.
    pub records: VecDeque<Result<Recorded, OutboxError>>,
    pub written: Vec<Written>,
    /// Answers of `recorded_event`, in order; then "not recorded".
    pub lookups: VecDeque<Result<Option<RecordedEvent>, OutboxError>>,
    /// Once `lookups` is spent: the event is committed, leased to the first claim's owner.
    pub committed_for_claimer: bool,
    pub accepted_digest: Result<Option<[u8; 32]>, ()>,
    /// What `lease_unpublished` hands out, and the jobs it was asked for.
    pub unpublished: Vec<PendingEvent>,
    pub leased_for: Vec<Uuid>,
    pub expired: Vec<ExpiredJob>,
    /// Answers of `end_cancel` and `object_deleted`, in order.
    pub cancels: VecDeque<Result<Controlled, OutboxError>>,
    pub deletions: VecDeque<Result<Controlled, OutboxError>>,
    /// `object_deleted` was told whether the object existed.
    pub deleted_results: Vec<bool>,
    /// What `deletions_in_progress` hands out.
    pub deleting: Vec<(Uuid, Option<String>)>,
    /// Each `record_executions` call's reports, and the `end_cancel` calls' reports.
    pub execution_writes: Vec<Vec<ExecutionReport>>,
    pub cancel_executions: Vec<Vec<ExecutionReport>>,
}

impl Default for JobsState {
    fn default() -> Self {
        JobsState {
            claims: VecDeque::new(),
            claim_default: Claim::Acquired {
                attempt: 1,
                running_for: Duration::ZERO,
            },
            claimed: Vec::new(),
            renewals: VecDeque::new(),
            renew_calls: 0,
            released: Vec::new(),
            records: VecDeque::new(),
            written: Vec::new(),
            lookups: VecDeque::new(),
            committed_for_claimer: false,
            accepted_digest: Ok(None),
            unpublished: Vec::new(),
            leased_for: Vec::new(),
            expired: Vec::new(),
            cancels: VecDeque::new(),
            deletions: VecDeque::new(),
            deleted_results: Vec::new(),
            deleting: Vec::new(),
            execution_writes: Vec::new(),
            cancel_executions: Vec::new(),
        }
    }
}

impl Jobs {
    pub fn state(&self) -> MutexGuard<'_, JobsState> {
        self.0.lock().expect("fake state")
    }
}

#[async_trait]
impl JobStore for Jobs {
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim, OutboxError> {
        let mut state = self.state();
        state.claimed.push(request.owner.to_owned());
        let default = state.claim_default.clone();
        state.claims.pop_front().unwrap_or(Ok(default))
    }

    async fn renew_lease(&self, _: Uuid, _: &str, _: Duration) -> Result<Lease, OutboxError> {
        let mut state = self.state();
        state.renew_calls += 1;
        state.renewals.pop_front().unwrap_or(Ok(Lease::Held))
    }

    async fn release(&self, _: Uuid, owner: &str) -> Result<bool, OutboxError> {
        self.state().released.push(owner.to_owned());
        Ok(true)
    }

    async fn record_terminal(&self, record: &TerminalRecord<'_>) -> Result<Recorded, OutboxError> {
        let mut state = self.state();
        let answer = state.records.pop_front().unwrap_or(Ok(Recorded::Inserted {
            outbox_id: outbox::RowId::Serial(state.written.len() as i64 + 1),
            executions: Vec::new(),
        }));
        if let Ok(Recorded::Inserted { .. }) = answer {
            state.written.push(Written {
                job_id: record.job_id,
                owner: record.owner.map(str::to_owned),
                status: record.outcome.status(),
                error: match &record.outcome {
                    TerminalOutcome::Failed { error } => Some(error.as_str().to_owned()),
                    TerminalOutcome::Completed { .. } => None,
                },
                ce_id: record.event.ce_id().to_owned(),
                publisher: record.publisher.to_owned(),
                executions: record.executions.to_vec(),
                close_running: record.close.map(|c| c.running),
                close_error: record.close.and_then(|c| c.error).map(str::to_owned),
            });
        }
        answer
    }

    async fn recorded_event(&self, _: &str) -> Result<Option<RecordedEvent>, OutboxError> {
        let mut state = self.state();
        let committed = state.committed_for_claimer.then(|| RecordedEvent {
            outbox_id: outbox::RowId::Serial(7),
            leased_by: state.claimed.first().cloned(),
        });
        state.lookups.pop_front().unwrap_or(Ok(committed))
    }

    async fn accepted_message_digest(
        &self,
        _: Uuid,
        _: Option<&str>,
    ) -> Result<Option<[u8; 32]>, OutboxError> {
        self.state().accepted_digest.map_err(|()| db_down())
    }

    async fn lease_unpublished(
        &self,
        job_id: Uuid,
        _: &str,
        _: Duration,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        let mut state = self.state();
        state.leased_for.push(job_id);
        Ok(std::mem::take(&mut state.unpublished))
    }

    async fn record_executions(
        &self,
        _: Uuid,
        _: &str,
        reports: &[ExecutionReport],
        _: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        self.state().execution_writes.push(reports.to_vec());
        Ok(Vec::new())
    }

    async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled, OutboxError> {
        let mut state = self.state();
        state.cancel_executions.push(request.executions.to_vec());
        state
            .cancels
            .pop_front()
            .expect("the test scripts end_cancel")
    }

    async fn object_deleted(
        &self,
        _: Uuid,
        result_deleted: bool,
        _: &str,
        _: &str,
        _: Duration,
    ) -> Result<Controlled, OutboxError> {
        let mut state = self.state();
        state.deleted_results.push(result_deleted);
        state
            .deletions
            .pop_front()
            .expect("the test scripts object_deleted")
    }

    async fn deletions_in_progress(
        &self,
        _: Duration,
        _: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        Ok(std::mem::take(&mut self.state().deleting))
    }

    async fn expired_jobs(&self, _: Duration, _: i64) -> Result<Vec<ExpiredJob>, OutboxError> {
        Ok(std::mem::take(&mut self.state().expired))
    }

    async fn objects_left(
        &self,
        _: Duration,
        _: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        Ok(Vec::new())
    }

    async fn mark_object_left(&self, _: Uuid) -> Result<(), OutboxError> {
        Ok(())
    }

    async fn object_discarded(&self, _: Uuid) -> Result<(), OutboxError> {
        Ok(())
    }
}

/// The object store: an upload collects its text and, at `finish`, after its check, "puts"
/// it: each put answers from the script, tried again as the upload's retry policy says.
#[derive(Default)]
pub struct Objects(Arc<Mutex<ObjectsState>>);

#[derive(Default)]
pub struct ObjectsState {
    /// Stored bodies (the sealed result's base64 text) by key.
    pub stored: BTreeMap<String, Vec<u8>>,
    /// Answers of the puts, in order; then success.
    pub puts: VecDeque<Result<(), StorageError>>,
    pub put_calls: u32,
    /// Failing every put from the script's end on.
    pub always_fail: bool,
    pub deleted: Vec<String>,
    /// Uploads abandoned: aborted, or dropped unfinished (the real one then aborts in the
    /// background).
    pub aborted: u32,
}

impl Objects {
    pub fn state(&self) -> MutexGuard<'_, ObjectsState> {
        self.0.lock().expect("fake state")
    }
}

#[async_trait]
impl ResultStore for Objects {
    fn key_prefix(&self) -> &str {
        ""
    }

    fn upload(&self, key: &str, retry: Arc<dyn RetryPolicy>) -> Box<dyn ResultUpload> {
        Box::new(FakeUpload {
            state: self.0.clone(),
            key: key.to_owned(),
            text: Vec::new(),
            retry,
            finished: false,
        })
    }

    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        let mut state = self.state();
        state.stored.remove(key);
        state.deleted.push(key.to_owned());
        Ok(())
    }
}

struct FakeUpload {
    state: Arc<Mutex<ObjectsState>>,
    key: String,
    text: Vec<u8>,
    retry: Arc<dyn RetryPolicy>,
    finished: bool,
}

impl Drop for FakeUpload {
    fn drop(&mut self) {
        if !self.finished {
            self.state.lock().expect("fake state").aborted += 1;
        }
    }
}

impl FakeUpload {
    fn put(&self) -> Result<(), StorageError> {
        let mut state = self.state.lock().expect("fake state");
        state.put_calls += 1;
        let answer = match state.puts.pop_front() {
            Some(answer) => answer,
            None if state.always_fail => Err(s3_down(&self.key)),
            None => Ok(()),
        };
        if answer.is_ok() {
            state.stored.insert(self.key.clone(), self.text.clone());
        }
        answer
    }
}

#[async_trait]
impl ResultUpload for FakeUpload {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        self.text.extend_from_slice(bytes);
        Ok(())
    }

    async fn finish(
        mut self: Box<Self>,
        check: BoxFuture<'_, Result<(), String>>,
    ) -> Result<u64, StorageError> {
        check.await.map_err(|reason| StorageError::Refused {
            key: self.key.clone(),
            reason,
        })?;
        storage::retry::retrying(&self.retry, || async { self.put() }).await?;
        self.finished = true;
        Ok(self.text.len() as u64)
    }

    /// Counted as aborted when dropped.
    async fn abort(self: Box<Self>) {}
}

/// The events handed to the sink: (publisher, ce-id, attempts).
#[derive(Default)]
pub struct Events(Mutex<Vec<(String, String, u32)>>);

impl Events {
    pub fn delivered(&self) -> Vec<(String, String, u32)> {
        self.0.lock().expect("fake state").clone()
    }
}

#[async_trait]
impl EventSink for Events {
    async fn deliver(&self, owner: &str, events: &[PendingEvent]) -> Result<(), OutboxError> {
        let mut delivered = self.0.lock().expect("fake state");
        for pending in events {
            delivered.push((
                owner.to_owned(),
                pending.event.ce_id().to_owned(),
                pending.attempts,
            ));
        }
        Ok(())
    }
}

pub struct Extract(Mutex<ExtractState>);

pub struct ExtractState {
    /// Answers of `extract`, in order; then `rows`.
    pub answers: VecDeque<Result<Extraction, EngineError>>,
    pub rows: Vec<u8>,
    /// How long each extraction takes.
    pub takes: Duration,
    pub calls: u32,
    pub over_limits: bool,
    pub timeout: Duration,
    /// The time limit of each extraction.
    pub limits: Vec<TimeLimit>,
    /// An extraction stops early when its graceful stop comes (`EngineError::Canceled`).
    pub honors_graceful: bool,
}

impl Default for Extract {
    fn default() -> Self {
        Extract(Mutex::new(ExtractState {
            answers: VecDeque::new(),
            rows: br#"{"db":{"payments":[{"id":1}]}}"#.to_vec(),
            takes: Duration::ZERO,
            calls: 0,
            over_limits: false,
            timeout: Duration::from_secs(300),
            limits: Vec::new(),
            honors_graceful: false,
        }))
    }
}

impl Extract {
    pub fn state(&self) -> MutexGuard<'_, ExtractState> {
        self.0.lock().expect("fake state")
    }
}

#[async_trait]
impl Extractor for Extract {
    fn check_limits(&self, _: &MappedFields) -> Result<(), EngineError> {
        if self.state().over_limits {
            return Err(EngineError::LimitExceeded {
                what: "tables",
                limit: 1,
            });
        }
        Ok(())
    }

    fn timeout(&self) -> Duration {
        self.state().timeout
    }

    /// Every datasource starts, the extraction takes its time (or its graceful stop comes),
    /// then each ends as the answer says; a successful answer's plaintext is sent in two
    /// chunks.
    async fn extract(
        &self,
        mapped: &MappedFields,
        _: &Filters,
        limit: TimeLimit,
        watch: Watch,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Extracted, EngineError> {
        for name in mapped.keys() {
            watch.observer.started(name);
        }
        let (takes, answer, honors_graceful) = {
            let mut state = self.state();
            state.calls += 1;
            state.limits.push(limit);
            let rows = state.rows.clone();
            let answer = state.answers.pop_front().unwrap_or(Ok(Extraction {
                plaintext: rows,
                row_count: 1,
            }));
            (state.takes, answer, state.honors_graceful)
        };
        tokio::select! {
            _ = tokio::time::sleep(takes) => {}
            _ = watch.graceful.cancelled(), if honors_graceful => return Err(EngineError::Canceled),
        }
        for name in mapped.keys() {
            let end = match &answer {
                Ok(extraction) => DatasourceEnd::Succeeded {
                    rows: extraction.row_count,
                },
                Err(error) => DatasourceEnd::Failed(error),
            };
            watch.observer.ended(name, &end);
        }
        let extraction = answer?;
        let (first, second) = extraction
            .plaintext
            .split_at(extraction.plaintext.len() / 2);
        for chunk in [first, second] {
            out.send(chunk.to_vec())
                .await
                .map_err(|_| EngineError::Abandoned)?;
        }
        Ok(Extracted {
            row_count: extraction.row_count,
            size_bytes: extraction.size_bytes(),
            spilled: Default::default(),
        })
    }
}
