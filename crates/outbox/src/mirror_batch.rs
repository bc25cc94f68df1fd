//! The MQTT mirror's rows as a delivery queue: taken under row locks in an open transaction,
//! deleted once the broker acknowledged them.
//!
//! An AMQP row is the event's record (kept, marked published, purged after the retention) and is
//! leased at its commit by the Worker that publishes it. An MQTT row is only the delivery of a
//! copy nobody else publishes: the mirror's relay locks a batch (`FOR UPDATE SKIP LOCKED`, so
//! relays of several Workers never wait on each other nor take one row twice), publishes it
//! while the transaction stays open, then deletes the acknowledged rows and backs off the others
//! in the same transaction. A relay that dies mid-batch leaves no lease behind: its transaction
//! ends with its connection and the rows are free at once.
//!
//! That is a row lock and a delete per event instead of a lease and a mark, two row versions and
//! five index entries (`BENCHMARKS.md`, "MQTT mirror relay").

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Row, Transaction};

use crate::error::{OutboxError, Result};
use crate::outbox::{decode_all, PendingEvent, RowId};
use crate::store::{interval, Store};

/// A batch of unpublished MQTT rows, locked by its open transaction until [`MirrorBatch::finish`]
/// or [`MirrorBatch::release`]. A batch that is dropped instead leaves its rows untouched, and
/// free once its transaction's rollback has run, which sqlx does when the connection is next
/// used (or closed).
pub struct MirrorBatch {
    tx: Transaction<'static, Postgres>,
    events: Vec<PendingEvent>,
    cursor: Option<MirrorCursor>,
}

/// A row of the batch that was not published, to be retried after `retry_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpublished {
    pub id: RowId,
    /// Why (redacted before it is stored as the row's `last_error`).
    pub error: String,
    pub retry_after: Duration,
}

/// Where a batch ended in the relay's order (due first, then id): the next batch of the same pass
/// starts after it, instead of stepping over the rows other batches of the pass hold locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorCursor {
    next_attempt_at: DateTime<Utc>,
    id: i64,
}

impl Store {
    /// Takes up to `limit` due MQTT rows recorded at least `grace` ago, oldest due first, after
    /// `after` when given (a batch this pass took before). Each event's `attempts` is the row's
    /// plus this one (it is stored only if the publish fails).
    pub async fn take_mirror_batch(
        &self,
        grace: Duration,
        limit: i64,
        after: Option<MirrorCursor>,
    ) -> Result<MirrorBatch> {
        const STEP: &str = "taking the mirror's unpublished events";
        let db = |e| OutboxError::sqlx(STEP, e);
        let mut tx = self.pool().begin().await.map_err(db)?;
        // What this transaction writes (deletes of delivered rows, backoffs) may be lost in a
        // crash of the database without harm: the rows are then delivered again, with their
        // stable `eventId`s (at least once). So its commit does not wait for the WAL flush.
        sqlx::query("SET LOCAL synchronous_commit = off")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        // The row comparison is a bound of the unpublished index's scan (an `OR` for "no cursor"
        // would not be): two statements.
        let after_cursor = if after.is_some() {
            "AND (next_attempt_at, id) > ($3, $4)"
        } else {
            ""
        };
        let sql = format!(
            "SELECT id, job_id, sink, topic, body, attributes, request_id,
                    attempts + 1 AS attempts, created_at, next_attempt_at
             FROM outbox
             WHERE published_at IS NULL AND sink = 'mqtt'
               AND created_at <= now() - $1
               AND next_attempt_at <= now()
               AND (lease_until IS NULL OR lease_until <= now())
               {after_cursor}
             ORDER BY next_attempt_at, id
             LIMIT $2
             FOR UPDATE SKIP LOCKED"
        );
        let mut query = sqlx::query(&sql).bind(interval(grace)).bind(limit);
        if let Some(cursor) = after {
            query = query.bind(cursor.next_attempt_at).bind(cursor.id);
        }
        let rows = query.fetch_all(&mut *tx).await.map_err(db)?;
        let cursor = match rows.last() {
            Some(last) => Some(MirrorCursor {
                next_attempt_at: last.try_get("next_attempt_at").map_err(db)?,
                id: last.try_get("id").map_err(db)?,
            }),
            None => after,
        };
        Ok(MirrorBatch {
            tx,
            events: decode_all(STEP, &rows),
            cursor,
        })
    }
}

impl MirrorBatch {
    /// The batch's events, in id order.
    pub fn events(&self) -> &[PendingEvent] {
        &self.events
    }

    /// Where the pass's next batch starts (where the one before ended, if this one is empty).
    pub fn cursor(&self) -> Option<MirrorCursor> {
        self.cursor
    }

    /// Gives the batch's rows back untouched, now (the rollback is awaited).
    pub async fn release(self) -> Result<()> {
        self.tx
            .rollback()
            .await
            .map_err(|e| OutboxError::sqlx("giving back a batch of the mirror's events", e))
    }

    /// Ends the batch: deletes the `published` rows (the broker has them), backs off the
    /// `unpublished` ones (their attempt counted, `last_error` kept), and commits. Ids that are
    /// not the batch's are ignored. Returns how many rows were deleted.
    pub async fn finish(mut self, published: &[RowId], unpublished: &[Unpublished]) -> Result<u64> {
        const STEP: &str = "ending a batch of the mirror's events";
        let db = |e| OutboxError::sqlx(STEP, e);
        // Only the batch's own rows, filtered here: two `= ANY` on one column would have the index
        // scan probe every pair of their elements (PostgreSQL before 17).
        let taken: HashSet<RowId> = self.events.iter().map(|e| e.id).collect();
        let published: Vec<i64> = published
            .iter()
            .filter(|id| taken.contains(id))
            .filter_map(|id| id.serial())
            .collect();
        let unpublished: Vec<&Unpublished> = unpublished
            .iter()
            .filter(|u| taken.contains(&u.id))
            .collect();
        let deleted = if published.is_empty() {
            0
        } else {
            sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
                .bind(&published)
                .execute(&mut *self.tx)
                .await
                .map_err(db)?
                .rows_affected()
        };
        if !unpublished.is_empty() {
            let ids: Vec<i64> = unpublished.iter().filter_map(|u| u.id.serial()).collect();
            let errors: Vec<String> = unpublished
                .iter()
                .map(|u| contract::redact(&u.error))
                .collect();
            let retry_us: Vec<i64> = unpublished
                .iter()
                .map(|u| interval(u.retry_after).microseconds)
                .collect();
            sqlx::query(
                "UPDATE outbox o
                 SET attempts = o.attempts + 1, last_error = f.error,
                     next_attempt_at = now() + f.retry_us * interval '1 microsecond'
                 FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(id, error, retry_us)
                 WHERE o.id = f.id",
            )
            .bind(&ids)
            .bind(&errors)
            .bind(&retry_us)
            .execute(&mut *self.tx)
            .await
            .map_err(db)?;
        }
        self.tx.commit().await.map_err(db)?;
        Ok(deleted)
    }
}
