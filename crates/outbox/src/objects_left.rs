//! Objects left under the key of a job that ended without keeping one (failed, or canceled,
//! after a run had stored it; `jobs.object_left`, set with the end): the Worker deletes each
//! right after the commit, and its sweeper deletes those it could not, until they are gone.

use std::time::Duration;

use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::store::{interval, Store};

impl Store {
    /// Jobs whose object is still marked left, their end more than `grace` ago (the Worker that
    /// ended them deletes it first), oldest first, at most `limit`, with their tenant.
    pub async fn objects_left(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>> {
        sqlx::query_as(
            "SELECT job_id, tenant_id FROM jobs
             WHERE object_left AND updated_at <= now() - $1
             ORDER BY updated_at LIMIT $2",
        )
        .bind(interval(grace))
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("listing objects left", e))
    }

    /// Marks the job's object left: a run stored it after the job ended otherwise (failed,
    /// canceled, or deleted).
    pub async fn mark_object_left(&self, job_id: Uuid) -> Result<()> {
        sqlx::query(
            "UPDATE jobs SET object_left = true
             WHERE job_id = $1 AND status IN ('failed', 'canceled', 'deleted')",
        )
        .bind(job_id)
        .execute(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("marking an object left", e))?;
        Ok(())
    }

    /// The job's object is gone: no longer left.
    pub async fn object_discarded(&self, job_id: Uuid) -> Result<()> {
        sqlx::query("UPDATE jobs SET object_left = false WHERE job_id = $1 AND object_left")
            .bind(job_id)
            .execute(self.pool())
            .await
            .map_err(|e| OutboxError::sqlx("clearing an object left", e))?;
        Ok(())
    }
}
