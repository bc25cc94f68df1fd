//! What the control API reads and changes, whichever state backend keeps the jobs: the
//! PostgreSQL store (`outbox::Store`) or, in the Manager mode, the Manager's MongoDB
//! (`mongostate::ManagerStore`). The row types are the `outbox` crate's, so the API's JSON is
//! the same on both.

use std::collections::HashMap;

use async_trait::async_trait;
use mongostate::ManagerStore;
use outbox::{ControlRequest, Controlled, ExecutionRow, JobQuery, JobRow, OutboxError};
use uuid::Uuid;

/// The control API's port on the state database.
///
/// Obligations: [`ControlStore::control`] applies the transition `contract::lifecycle::step`
/// answers, with its events' outbox rows (leased to `request.publisher`), in one transaction,
/// or nothing; a job of another tenant than `request.tenant` is `Refused(Unknown)`. Reads never
/// return a secret: rows hold redacted errors only.
#[async_trait]
pub trait ControlStore: Send + Sync {
    /// The job, if the state database knows it.
    async fn job(&self, job_id: Uuid) -> Result<Option<JobRow>, OutboxError>;

    /// The job's executions, by datasource name.
    async fn executions(&self, job_id: Uuid) -> Result<Vec<ExecutionRow>, OutboxError>;

    /// Applies a cancel or delete request (lifecycle §3).
    async fn control(&self, request: &ControlRequest<'_>) -> Result<Controlled, OutboxError>;

    /// Whether [`ControlStore::list_jobs`] is offered (`GET /v1/fetcher` answers 501 if not).
    fn lists_jobs(&self) -> bool;

    /// A page of jobs, newest first.
    async fn list_jobs(&self, query: &JobQuery<'_>) -> Result<Vec<JobRow>, OutboxError>;

    /// The executions of each of `job_ids` (a job without any is absent).
    async fn executions_of(
        &self,
        job_ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<ExecutionRow>>, OutboxError>;
}

#[async_trait]
impl ControlStore for outbox::Store {
    async fn job(&self, job_id: Uuid) -> Result<Option<JobRow>, OutboxError> {
        outbox::Store::job(self, job_id).await
    }

    async fn executions(&self, job_id: Uuid) -> Result<Vec<ExecutionRow>, OutboxError> {
        outbox::Store::executions(self, job_id).await
    }

    async fn control(&self, request: &ControlRequest<'_>) -> Result<Controlled, OutboxError> {
        outbox::Store::control(self, request).await
    }

    fn lists_jobs(&self) -> bool {
        true
    }

    async fn list_jobs(&self, query: &JobQuery<'_>) -> Result<Vec<JobRow>, OutboxError> {
        outbox::Store::list_jobs(self, query).await
    }

    async fn executions_of(
        &self,
        job_ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<ExecutionRow>>, OutboxError> {
        outbox::Store::executions_of(self, job_ids).await
    }
}

/// The Manager mode: finding jobs is not offered (the Manager's `job` collection has no index
/// for a tenant's keyset pages, and the Manager lists nothing itself).
#[async_trait]
impl ControlStore for ManagerStore {
    async fn job(&self, job_id: Uuid) -> Result<Option<JobRow>, OutboxError> {
        ManagerStore::job(self, job_id).await
    }

    async fn executions(&self, job_id: Uuid) -> Result<Vec<ExecutionRow>, OutboxError> {
        ManagerStore::executions(self, job_id).await
    }

    async fn control(&self, request: &ControlRequest<'_>) -> Result<Controlled, OutboxError> {
        ManagerStore::control(self, request).await
    }

    fn lists_jobs(&self) -> bool {
        false
    }

    async fn list_jobs(&self, _query: &JobQuery<'_>) -> Result<Vec<JobRow>, OutboxError> {
        Err(OutboxError::InvalidArgument {
            step: "listing jobs",
            detail: "finding jobs is not offered in the Manager mode".to_owned(),
        })
    }

    async fn executions_of(
        &self,
        job_ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<ExecutionRow>>, OutboxError> {
        let mut found = HashMap::new();
        for id in job_ids {
            let executions = ManagerStore::executions(self, *id).await?;
            if !executions.is_empty() {
                found.insert(*id, executions);
            }
        }
        Ok(found)
    }
}
