//! The slots of capped datasources (`DATASOURCE_<NAME>_MAX_CONCURRENT`): how many reads of one
//! datasource run at once across every replica. A slot is a row of `datasource_slots` held under
//! a lease: taken by one conditional statement, renewed while the read runs, deleted when it
//! ends, free again once its lease lapsed.

use std::time::Duration;

use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::store::{interval, Store};

/// Who takes a slot: a run (its claim's owner) of a job.
#[derive(Debug, Clone, Copy)]
pub struct SlotHolder<'a> {
    pub owner: &'a str,
    pub job_id: Uuid,
}

impl Store {
    /// Takes one of `datasource`'s `slots` slots for `holder` until `lease` from now: a slot
    /// without a row, or one whose lease lapsed. `None` when every slot is held (or when
    /// another taker won the free one this statement chose: the caller asks again).
    ///
    /// One statement decides: the free slot is chosen at random among the free ones (takers of
    /// several replicas then rarely pick the same), and the insert takes it only if it is still
    /// free when its row is locked (`ON CONFLICT … WHERE` re-checks the lease on the row's latest
    /// version), so no more than `slots` live holders ever exist.
    pub async fn take_slot(
        &self,
        datasource: &str,
        slots: u32,
        holder: SlotHolder<'_>,
        lease: Duration,
    ) -> Result<Option<u32>> {
        let taken: Option<i32> = sqlx::query_scalar(
            "INSERT INTO datasource_slots (datasource, slot, owner, job_id, expires_at)
             SELECT $1, free.slot, $3, $4, now() + $5
             FROM (SELECT s AS slot FROM generate_series(0, $2 - 1) s
                   WHERE NOT EXISTS (SELECT 1 FROM datasource_slots d
                                     WHERE d.datasource = $1 AND d.slot = s
                                       AND d.expires_at > now())
                   ORDER BY random() LIMIT 1) free
             ON CONFLICT (datasource, slot) DO UPDATE
                 SET owner = EXCLUDED.owner, job_id = EXCLUDED.job_id,
                     expires_at = EXCLUDED.expires_at
                 WHERE datasource_slots.expires_at <= now()
             RETURNING slot",
        )
        .bind(datasource)
        .bind(i32::try_from(slots).unwrap_or(i32::MAX))
        .bind(holder.owner)
        .bind(holder.job_id)
        .bind(interval(lease))
        .fetch_optional(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("taking a datasource slot", e))?;
        Ok(taken.and_then(|slot| u32::try_from(slot).ok()))
    }

    /// Extends `owner`'s slot of `datasource` to `lease` from now; `false` when it holds none
    /// (its lease lapsed and another run took it). One run reads a datasource once at a time,
    /// so a datasource and an owner name one slot.
    pub async fn renew_slot(&self, datasource: &str, owner: &str, lease: Duration) -> Result<bool> {
        let renewed = sqlx::query(
            "UPDATE datasource_slots SET expires_at = now() + $3
             WHERE datasource = $1 AND owner = $2",
        )
        .bind(datasource)
        .bind(owner)
        .bind(interval(lease))
        .execute(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("renewing a datasource slot", e))?
        .rows_affected();
        Ok(renewed > 0)
    }

    /// Frees `owner`'s slot of `datasource`; nothing if it holds none.
    pub async fn release_slot(&self, datasource: &str, owner: &str) -> Result<()> {
        sqlx::query("DELETE FROM datasource_slots WHERE datasource = $1 AND owner = $2")
            .bind(datasource)
            .bind(owner)
            .execute(self.pool())
            .await
            .map_err(|e| OutboxError::sqlx("releasing a datasource slot", e))?;
        Ok(())
    }
}
