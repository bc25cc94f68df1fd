//! The job core's ports ([`crate::job::ports`]) on the real services: the state database
//! (`outbox::Store`), the bucket (`storage::ObjectStore`), the broker (the repairer's relay over
//! `publisher::Publisher`, its published marks batched across jobs by `repairer::Marks`) and the
//! engine. Each method forwards; the obligations are the crates'.

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
use storage::{ObjectStore, PartBuffer, RetryPolicy, StorageError, Upload};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::job::ports::{
    EventSink, Extractor, JobStore, Ports, ResultStore, ResultUpload, SlotStore,
};

/// The ports on the real services; `marks` marks the published events.
pub fn ports(
    store: outbox::Store,
    objects: ObjectStore,
    publisher: Arc<publisher::Publisher>,
    marks: repairer::Marks,
    engine: engine::Engine,
) -> Ports {
    let store_for_slots = store.clone();
    Ports {
        jobs: Arc::new(store.clone()),
        objects: Arc::new(objects),
        events: Arc::new(Relay {
            store,
            publisher: publisher.into(),
            marks,
        }),
        extractor: Arc::new(engine),
        slots: Some(Arc::new(store_for_slots)),
    }
}

#[async_trait]
impl SlotStore for outbox::Store {
    async fn take_slot(
        &self,
        datasource: &str,
        slots: u32,
        holder: SlotHolder<'_>,
        lease: Duration,
    ) -> Result<Option<u32>, OutboxError> {
        outbox::Store::take_slot(self, datasource, slots, holder, lease).await
    }

    async fn renew_slot(
        &self,
        datasource: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<bool, OutboxError> {
        outbox::Store::renew_slot(self, datasource, owner, lease).await
    }

    async fn release_slot(&self, datasource: &str, owner: &str) -> Result<(), OutboxError> {
        outbox::Store::release_slot(self, datasource, owner).await
    }
}

#[async_trait]
impl JobStore for outbox::Store {
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim, OutboxError> {
        outbox::Store::claim(self, request).await
    }

    async fn renew_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError> {
        outbox::Store::renew_lease(self, job_id, owner, lease).await
    }

    async fn hold_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError> {
        outbox::Store::hold_lease(self, job_id, owner, lease).await
    }

    async fn release(&self, job_id: Uuid, owner: &str) -> Result<bool, OutboxError> {
        outbox::Store::release(self, job_id, owner).await
    }

    async fn record_terminal(&self, record: &TerminalRecord<'_>) -> Result<Recorded, OutboxError> {
        outbox::Store::record_terminal(self, record).await
    }

    async fn record_executions(
        &self,
        job_id: Uuid,
        owner: &str,
        reports: &[ExecutionReport],
        events: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        outbox::Store::record_executions(self, job_id, owner, reports, events).await
    }

    async fn recorded_event(&self, ce_id: &str) -> Result<Option<RecordedEvent>, OutboxError> {
        outbox::Store::recorded_event(self, ce_id).await
    }

    async fn accepted_message_digest(
        &self,
        job_id: Uuid,
        tenant: Option<&str>,
    ) -> Result<Option<[u8; 32]>, OutboxError> {
        outbox::Store::accepted_message_digest(self, job_id, tenant).await
    }

    async fn lease_unpublished(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        self.claim_for_job(job_id, owner, lease).await
    }

    async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled, OutboxError> {
        outbox::Store::end_cancel(self, request).await
    }

    async fn object_deleted(
        &self,
        job_id: Uuid,
        result_deleted: bool,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled, OutboxError> {
        outbox::Store::object_deleted(self, job_id, result_deleted, source, publisher, lease).await
    }

    async fn deletions_in_progress(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        outbox::Store::deletions_in_progress(self, grace, limit).await
    }

    async fn expired_jobs(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<ExpiredJob>, OutboxError> {
        outbox::Store::expired_jobs(self, grace, limit).await
    }

    async fn objects_left(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        outbox::Store::objects_left(self, grace, limit).await
    }

    async fn mark_object_left(&self, job_id: Uuid) -> Result<(), OutboxError> {
        outbox::Store::mark_object_left(self, job_id).await
    }

    async fn object_discarded(&self, job_id: Uuid) -> Result<(), OutboxError> {
        outbox::Store::object_discarded(self, job_id).await
    }
}

#[async_trait]
impl ResultStore for ObjectStore {
    fn key_prefix(&self) -> &str {
        &self.config().key_prefix
    }

    fn upload(&self, key: &str, retry: Arc<dyn RetryPolicy>) -> Box<dyn ResultUpload> {
        Box::new(ObjectStore::upload(self, key).with_retry(retry))
    }

    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        ObjectStore::delete(self, key).await
    }
}

#[async_trait]
impl ResultUpload for Upload {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        Upload::write(self, bytes).await
    }

    async fn lend(&mut self) -> Result<PartBuffer, StorageError> {
        Upload::lend(self).await
    }

    async fn give_back(&mut self, part: PartBuffer) -> Result<(), StorageError> {
        Upload::give_back(self, part).await
    }

    async fn finish(
        self: Box<Self>,
        check: BoxFuture<'_, Result<(), String>>,
    ) -> Result<u64, StorageError> {
        Upload::finish(*self, check).await
    }

    async fn abort(self: Box<Self>) {
        Upload::abort(*self).await
    }
}

/// Events go out through the repairer's relay, as in its passes, except that the confirmed
/// rows' marks are batched with other jobs' (`repairer::Marks`): under load many jobs publish
/// within milliseconds of each other, and one statement marks them all.
struct Relay {
    store: outbox::Store,
    publisher: repairer::SinkPublisher,
    marks: repairer::Marks,
}

#[async_trait]
impl EventSink for Relay {
    async fn deliver(&self, owner: &str, events: &[PendingEvent]) -> Result<(), OutboxError> {
        repairer::relay_marked_later(&self.store, &self.publisher, &self.marks, owner, events)
            .await
            .map(drop)
    }
}

#[async_trait]
impl Extractor for engine::Engine {
    fn check_limits(&self, mapped: &MappedFields) -> Result<(), EngineError> {
        engine::Engine::check_limits(self, mapped)
    }

    fn timeout(&self) -> Duration {
        self.config().timeout
    }

    async fn extract(
        &self,
        mapped: &MappedFields,
        filters: &Filters,
        limit: TimeLimit,
        watch: Watch,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Extracted, EngineError> {
        self.extract_streamed(mapped, filters, limit, watch, out)
            .await
    }
}
