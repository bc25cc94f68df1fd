//! Retention (issue 37): what is due for deletion, the pruning of ended jobs, and the lease that
//! lets one replica at a time run the pass. A completed job's result is deleted through the
//! lifecycle's own delete ([`Store::control`]), never here: here only rows that hold no object go.

use std::time::Duration;

use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::store::{in_batches, interval, Store};

impl Store {
    /// Completed jobs that ended more than `age` ago, oldest first, at most `limit`, with their
    /// tenant: their results are due for deletion.
    pub async fn results_due(
        &self,
        age: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>> {
        sqlx::query_as(
            "SELECT job_id, tenant_id FROM jobs
             WHERE status = 'completed' AND finished_at < now() - $1
             ORDER BY finished_at LIMIT $2",
        )
        .bind(interval(age))
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("listing results due for deletion", e))
    }

    /// Deletes the rows of jobs that ended holding no object (`failed`, `canceled`, and the
    /// tombstones of `deleted` ones) and last changed more than `age` ago, with their
    /// executions and their published events, `batch` jobs per statement until a statement
    /// deletes fewer. A job with an event still unpublished stays until it is published.
    /// Returns how many jobs were deleted.
    pub async fn prune_ended_jobs(&self, age: Duration, batch: i64) -> Result<u64> {
        const STEP: &str = "pruning ended jobs";
        in_batches(STEP, batch, || async {
            // The outbox rows go in the same statement: their foreign key is checked at its end.
            Ok(sqlx::query(
                "WITH due AS (
                     SELECT job_id FROM jobs j
                     WHERE status IN ('failed', 'canceled', 'deleted')
                       AND updated_at < now() - $1
                       AND NOT EXISTS (SELECT 1 FROM outbox o
                                       WHERE o.job_id = j.job_id AND o.published_at IS NULL)
                     ORDER BY updated_at LIMIT $2
                     FOR UPDATE SKIP LOCKED),
                 events AS (DELETE FROM outbox WHERE job_id IN (SELECT job_id FROM due))
                 DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM due)",
            )
            .bind(interval(age))
            .bind(batch)
            .execute(self.pool())
            .await
            .map_err(|e| OutboxError::sqlx(STEP, e))?
            .rows_affected())
        })
        .await
    }

    /// Takes the lease of the pass `name` for `owner` until `lease` from now, or renews it;
    /// `false` when another owner holds it and its lease has not lapsed.
    pub async fn take_pass_lease(&self, name: &str, owner: &str, lease: Duration) -> Result<bool> {
        let held: Option<String> = sqlx::query_scalar(
            "INSERT INTO pass_leases (name, owner, expires_at) VALUES ($1, $2, now() + $3)
             ON CONFLICT (name) DO UPDATE
                 SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
                 WHERE pass_leases.owner = EXCLUDED.owner OR pass_leases.expires_at <= now()
             RETURNING owner",
        )
        .bind(name)
        .bind(owner)
        .bind(interval(lease))
        .fetch_optional(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("taking a pass's lease", e))?;
        Ok(held.is_some())
    }
}
