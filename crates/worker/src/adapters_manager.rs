//! The job core's ports in the Manager mode: the state and the outbox in the Manager's MongoDB
//! (`mongostate::ManagerStore`, the capped datasources' slots too), events through `repairer::ManagerRelay`; the bucket and the
//! engine as in [`crate::adapters`]. Each method forwards; the obligations are the crates'.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mongostate::ManagerStore;
use outbox::{
    Claim, ClaimRequest, Controlled, EndCancel, ExecutionEvents, ExecutionReport, ExpiredJob,
    Lease, OutboxError, PendingEvent, Recorded, RecordedEvent, SlotHolder, TerminalRecord,
};
use storage::ObjectStore;
use uuid::Uuid;

use crate::job::ports::{EventSink, JobStore, Ports, SlotStore};

/// The ports of the Manager mode.
pub fn manager_ports(
    store: ManagerStore,
    objects: ObjectStore,
    publisher: Arc<publisher::Publisher>,
    engine: engine::Engine,
) -> Ports {
    let store_for_slots = store.clone();
    Ports {
        jobs: Arc::new(store.clone()),
        objects: Arc::new(objects),
        events: Arc::new(ManagerEvents(repairer::ManagerRelay::new(store, publisher))),
        extractor: Arc::new(engine),
        slots: Some(Arc::new(store_for_slots)),
    }
}

#[async_trait]
impl SlotStore for ManagerStore {
    async fn take_slot(
        &self,
        datasource: &str,
        slots: u32,
        holder: SlotHolder<'_>,
        lease: Duration,
    ) -> Result<Option<u32>, OutboxError> {
        ManagerStore::take_slot(self, datasource, slots, holder, lease).await
    }

    async fn renew_slot(
        &self,
        datasource: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<bool, OutboxError> {
        ManagerStore::renew_slot(self, datasource, owner, lease).await
    }

    async fn release_slot(&self, datasource: &str, owner: &str) -> Result<(), OutboxError> {
        ManagerStore::release_slot(self, datasource, owner).await
    }
}

#[async_trait]
impl JobStore for ManagerStore {
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim, OutboxError> {
        ManagerStore::claim(self, request).await
    }

    async fn renew_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError> {
        ManagerStore::renew_lease(self, job_id, owner, lease).await
    }

    async fn release(&self, job_id: Uuid, owner: &str) -> Result<bool, OutboxError> {
        ManagerStore::release(self, job_id, owner).await
    }

    async fn record_terminal(&self, record: &TerminalRecord<'_>) -> Result<Recorded, OutboxError> {
        ManagerStore::record_terminal(self, record).await
    }

    async fn record_executions(
        &self,
        job_id: Uuid,
        owner: &str,
        reports: &[ExecutionReport],
        events: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        ManagerStore::record_executions(self, job_id, owner, reports, events).await
    }

    async fn recorded_event(&self, ce_id: &str) -> Result<Option<RecordedEvent>, OutboxError> {
        ManagerStore::recorded_event(self, ce_id).await
    }

    async fn accepted_message_digest(
        &self,
        job_id: Uuid,
        tenant: Option<&str>,
    ) -> Result<Option<[u8; 32]>, OutboxError> {
        ManagerStore::accepted_message_digest(self, job_id, tenant).await
    }

    async fn lease_unpublished(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        ManagerStore::lease_unpublished(self, job_id, owner, lease).await
    }

    async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled, OutboxError> {
        ManagerStore::end_cancel(self, request).await
    }

    async fn object_deleted(
        &self,
        job_id: Uuid,
        result_deleted: bool,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled, OutboxError> {
        ManagerStore::object_deleted(self, job_id, result_deleted, source, publisher, lease).await
    }

    async fn deletions_in_progress(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        ManagerStore::deletions_in_progress(self, grace, limit).await
    }

    async fn expired_jobs(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<ExpiredJob>, OutboxError> {
        ManagerStore::expired_jobs(self, grace, limit).await
    }

    async fn objects_left(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        ManagerStore::objects_left(self, grace, limit).await
    }

    async fn mark_object_left(&self, job_id: Uuid) -> Result<(), OutboxError> {
        ManagerStore::mark_object_left(self, job_id).await
    }

    async fn object_discarded(&self, job_id: Uuid) -> Result<(), OutboxError> {
        ManagerStore::object_discarded(self, job_id).await
    }
}

/// Events go out through the Manager mode's relay: publish, then settle each row while its
/// publisher still holds it. Its marks are not batched across jobs as the PostgreSQL mode's
/// are (`repairer::Marks`): a row of lib-streaming's outbox left `PROCESSING` by a lost mark
/// waits for lib-commons' 10-minute takeover, not a one-minute lease, so each is settled here.
struct ManagerEvents(repairer::ManagerRelay);

#[async_trait]
impl EventSink for ManagerEvents {
    async fn deliver(&self, owner: &str, events: &[PendingEvent]) -> Result<(), OutboxError> {
        self.0.deliver(owner, events).await.map(drop)
    }
}
