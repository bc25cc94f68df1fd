//! The outbox relay's side of the table: leasing unpublished events, marking them, retention.

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::event::{CloudEventAttributes, OutboundEvent};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::sink::Sink;
use crate::store::{in_batches, interval, Store};

/// An outbox row's identity in the state backend that wrote it: the PostgreSQL outbox's
/// serial, or the UUIDv7 `id` of a row in the Manager's `streaming_outbox_events` (the MongoDB
/// backend, issue 35). A row is only ever marked by the backend that leased it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowId {
    Serial(i64),
    Uuid(Uuid),
}

impl RowId {
    /// The PostgreSQL outbox's id; `None` for another backend's row.
    pub fn serial(self) -> Option<i64> {
        match self {
            RowId::Serial(id) => Some(id),
            RowId::Uuid(_) => None,
        }
    }
}

impl std::fmt::Display for RowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowId::Serial(id) => write!(f, "{id}"),
            RowId::Uuid(id) => write!(f, "{id}"),
        }
    }
}

/// An unpublished event, leased to the caller until its lease ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// The outbox row, for [`Store::mark_published`] and [`Store::mark_failed`].
    pub id: RowId,
    pub job_id: Uuid,
    /// Where the row goes.
    pub sink: Sink,
    /// The MQTT row's topic, as recorded (`None` for an AMQP row).
    pub topic: Option<String>,
    /// Body bytes exactly as recorded (an MQTT row's payload), attributes as recorded (an MQTT
    /// row's are the AMQP event's it mirrors).
    pub event: OutboundEvent,
    /// Leases taken on the row so far, this one included (1: the publish right after the
    /// terminal state was recorded); what [`crate::backoff()`] takes after a failure.
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
}

/// An event's outbox row, as [`Store::recorded_event`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEvent {
    pub outbox_id: RowId,
    /// Who holds the row's lease, if anyone (the publisher named in its record, until it ends).
    pub leased_by: Option<String>,
}

/// The columns [`pending_event`] reads.
const RETURNED: &str =
    "o.id, o.job_id, o.sink, o.topic, o.body, o.attributes, o.request_id, o.attempts, o.created_at";

impl Store {
    /// Leases up to `limit` unpublished AMQP rows to `owner` for `lease`: rows recorded at least
    /// `grace` ago (younger ones are being published by the Worker that recorded them), due
    /// (`next_attempt_at` passed), and not leased or leased under an expired lease. Each leased
    /// row's `attempts` goes up by one. Oldest due first.
    ///
    /// One statement: the rows are chosen `FOR UPDATE SKIP LOCKED`, so concurrent callers never
    /// wait on each other nor get the same row, and the lease is committed at once. No
    /// transaction stays open while publishing; a caller that dies leaves rows that another
    /// takes when the lease ends. (The mirror's MQTT rows are taken otherwise:
    /// [`Store::take_mirror_batch`].)
    ///
    /// A row whose attributes no longer decode is left leased, logged, and not returned, so the
    /// others are still published.
    pub async fn claim_unpublished(
        &self,
        owner: &str,
        grace: Duration,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<PendingEvent>> {
        const STEP: &str = "leasing unpublished events";
        let rows = sqlx::query(&format!(
            "UPDATE outbox o
             SET leased_by = $1, lease_until = now() + $2, attempts = o.attempts + 1
             FROM (SELECT id FROM outbox
                   WHERE published_at IS NULL AND sink = 'amqp'
                     AND created_at <= now() - $3
                     AND next_attempt_at <= now()
                     AND (lease_until IS NULL OR lease_until <= now())
                   ORDER BY next_attempt_at, id
                   LIMIT $4
                   FOR UPDATE SKIP LOCKED) due
             WHERE o.id = due.id
             RETURNING {RETURNED}"
        ))
        .bind(owner)
        .bind(interval(lease))
        .bind(interval(grace))
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx(STEP, e))?;
        Ok(decode_all(STEP, &rows))
    }

    /// Leases `job_id`'s unpublished AMQP events to `owner` for `lease`, whatever their age or
    /// backoff: a redelivered message of a terminal job whose event was never published asks
    /// for it now (contract §4). Rows another publisher holds under a live lease are left to
    /// it. Publish them, then [`Store::mark_published`] as for [`Store::claim_unpublished`].
    /// The job's MQTT rows are the mirror relay's, which takes them without being asked.
    pub async fn claim_for_job(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<PendingEvent>> {
        const STEP: &str = "leasing a job's unpublished events";
        let rows = sqlx::query(&format!(
            "UPDATE outbox o
             SET leased_by = $2, lease_until = now() + $3, attempts = o.attempts + 1
             FROM (SELECT id FROM outbox
                   WHERE job_id = $1 AND sink = 'amqp'
                     AND published_at IS NULL
                     AND (lease_until IS NULL OR lease_until <= now())
                   FOR UPDATE SKIP LOCKED) due
             WHERE o.id = due.id
             RETURNING {RETURNED}"
        ))
        .bind(job_id)
        .bind(owner)
        .bind(interval(lease))
        .fetch_all(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx(STEP, e))?;
        Ok(decode_all(STEP, &rows))
    }

    /// The AMQP row of the event `ce_id` and who holds its lease, if the event was recorded.
    /// How a caller whose commit went unanswered (the connection broke after the `COMMIT` left)
    /// learns whether the terminal state and its event were committed: they are, together,
    /// exactly when the row exists.
    pub async fn recorded_event(&self, ce_id: &str) -> Result<Option<RecordedEvent>> {
        let row: Option<(i64, Option<String>)> =
            sqlx::query_as("SELECT id, leased_by FROM outbox WHERE ce_id = $1 AND sink = 'amqp'")
                .bind(ce_id)
                .fetch_optional(self.pool())
                .await
                .map_err(|e| OutboxError::sqlx("looking up a recorded event", e))?;
        Ok(row.map(|(outbox_id, leased_by)| RecordedEvent {
            outbox_id: RowId::Serial(outbox_id),
            leased_by,
        }))
    }

    /// Marks the rows published (the broker confirmed them) and clears their lease. Only rows
    /// still leased to `owner`, or not leased at all, are marked: a row whose lease ended and
    /// that another publisher took is left to it. Returns how many rows were marked.
    pub async fn mark_published(&self, ids: &[i64], owner: &str) -> Result<u64> {
        // The rows are locked in id order first: two publishers marking overlapping batches
        // (a lease lapsed and the other took the row) then wait for each other instead of
        // deadlocking. On a kept connection: the job path's last statement.
        const STEP: &str = "marking events published";
        let mut conn = self.lend(STEP).await?;
        let marked = sqlx::query(
            "WITH locked AS (
                 SELECT id FROM outbox
                 WHERE id = ANY($1) AND published_at IS NULL
                   AND (leased_by = $2 OR leased_by IS NULL)
                 ORDER BY id
                 FOR UPDATE
             )
             UPDATE outbox o
             SET published_at = now(), leased_by = NULL, lease_until = NULL
             FROM locked
             WHERE o.id = locked.id",
        )
        .bind(ids)
        .bind(owner)
        .execute(&mut *conn)
        .await;
        conn.finish(marked.is_ok());
        Ok(marked
            .map_err(|e| OutboxError::sqlx(STEP, e))?
            .rows_affected())
    }

    /// [`Store::mark_published`] for rows of several owners in one statement: each `(id, owner)`
    /// is marked only if the row is still leased to that owner, or not leased at all, exactly
    /// as `mark_published` would mark it. What a batcher of several jobs' marks sends
    /// (`repairer::Marks`). Returns how many rows were marked.
    pub async fn mark_published_by(&self, rows: &[(i64, &str)]) -> Result<u64> {
        if rows.is_empty() {
            return Ok(0);
        }
        let (ids, owners): (Vec<i64>, Vec<&str>) = rows.iter().copied().unzip();
        // Locked in id order first, as `mark_published` does, so that two markers of
        // overlapping rows wait for each other instead of deadlocking. On a kept connection,
        // as `mark_published`: under load the batcher flushes every few milliseconds.
        // Its commit does not wait for the WAL flush: a mark lost in a crash of the database
        // leaves its events to the repairer, published again with their stable ids (at least
        // once), and nothing else waits on it (the delivery was settled on the broker's
        // confirm).
        const STEP: &str = "marking several owners' events published";
        let mut conn = self.lend(STEP).await?;
        let marked = sqlx::query(
            "WITH locked AS (
                 SELECT o.id FROM outbox o
                 JOIN unnest($1::bigint[], $2::text[]) AS m(id, owner) ON o.id = m.id
                 WHERE o.published_at IS NULL
                   AND (o.leased_by = m.owner OR o.leased_by IS NULL)
                 ORDER BY o.id
                 FOR UPDATE OF o
             ),
             -- For this statement's transaction alone; volatile, so evaluated once.
             unflushed AS (SELECT set_config('synchronous_commit', 'off', true))
             UPDATE outbox o
             SET published_at = now(), leased_by = NULL, lease_until = NULL
             FROM locked, unflushed
             WHERE o.id = locked.id",
        )
        .bind(&ids)
        .bind(&owners)
        .execute(&mut *conn)
        .await;
        conn.finish(marked.is_ok());
        Ok(marked
            .map_err(|e| OutboxError::sqlx(STEP, e))?
            .rows_affected())
    }

    /// Gives a row back after a failed publish: lease cleared, not due again before
    /// `retry_after` from now (see [`crate::backoff()`]), `error` kept (redacted) as `last_error`.
    /// False when `owner` no longer held the row (or it was published meanwhile).
    pub async fn mark_failed(
        &self,
        id: i64,
        owner: &str,
        error: &str,
        retry_after: Duration,
    ) -> Result<bool> {
        let marked = sqlx::query(
            "UPDATE outbox
             SET leased_by = NULL, lease_until = NULL, next_attempt_at = now() + $3,
                 last_error = $4
             WHERE id = $1 AND published_at IS NULL
               AND (leased_by = $2 OR leased_by IS NULL)",
        )
        .bind(id)
        .bind(owner)
        .bind(interval(retry_after))
        .bind(contract::redact(error))
        .execute(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("marking an event failed", e))?;
        Ok(marked.rows_affected() == 1)
    }

    /// Deletes rows published more than `older_than` ago, `batch` rows per statement, until a
    /// statement deletes fewer than `batch`: short statements and locks, however large the
    /// backlog. Unpublished rows are never deleted. Returns how many rows were deleted.
    pub async fn purge_published(&self, older_than: Duration, batch: i64) -> Result<u64> {
        const STEP: &str = "purging published events";
        in_batches(STEP, batch, || async {
            Ok(sqlx::query(
                "DELETE FROM outbox WHERE id IN (
                     SELECT id FROM outbox
                     WHERE published_at IS NOT NULL AND published_at < now() - $1
                     ORDER BY published_at
                     LIMIT $2)",
            )
            .bind(interval(older_than))
            .bind(batch)
            .execute(self.pool())
            .await
            .map_err(|e| OutboxError::sqlx(STEP, e))?
            .rows_affected())
        })
        .await
    }
}

/// Decodes leased rows, leaving out (and logging) those that no longer decode.
pub(crate) fn decode_all(step: &'static str, rows: &[PgRow]) -> Vec<PendingEvent> {
    let mut events: Vec<PendingEvent> = rows
        .iter()
        .filter_map(|row| match pending_event(row) {
            Ok(event) => Some(event),
            Err(error) => {
                let error = OutboxError::sqlx(step, error);
                let id = row.try_get::<i64, _>("id").ok();
                tracing::error!(
                    outbox.id = ?id,
                    %error,
                    "Outbox row is unreadable; it stays unpublished until it is repaired."
                );
                None
            }
        })
        .collect();
    // `UPDATE ... RETURNING` has no order of its own (nor does `FOR UPDATE SKIP LOCKED`, when it
    // skips).
    events.sort_by_key(|event| event.id);
    events
}

fn pending_event(row: &PgRow) -> Result<PendingEvent, sqlx::Error> {
    let Json(attributes): Json<CloudEventAttributes> = row.try_get("attributes")?;
    let sink: String = row.try_get("sink")?;
    let sink =
        Sink::parse(&sink).ok_or_else(|| sqlx::Error::Decode(format!("sink `{sink}`").into()))?;
    Ok(PendingEvent {
        id: RowId::Serial(row.try_get("id")?),
        job_id: row.try_get("job_id")?,
        sink,
        topic: row.try_get("topic")?,
        event: OutboundEvent {
            attributes,
            request_id: row.try_get("request_id")?,
            body: row.try_get("body")?,
        },
        // Never negative: the schema checks `attempts >= 0`.
        attempts: row.try_get::<i32, _>("attempts")?.unsigned_abs(),
        created_at: row.try_get("created_at")?,
    })
}

/// Records `event`'s AMQP row as `job_id`'s, in the caller's transaction, leased to `publisher` for
/// `lease` (it publishes right after the commit). `None` when an event with its ce-id is
/// recorded already: an event is recorded once, its bytes frozen.
pub(crate) async fn insert_leased(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    job_id: Uuid,
    event: OutboundEvent,
    publisher: &str,
    lease: Duration,
) -> Result<Option<PendingEvent>, sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO outbox (ce_id, job_id, body, attributes, request_id, attempts,
                             leased_by, lease_until)
         VALUES ($1, $2, $3, $4, $5, 1, $6, now() + $7)
         ON CONFLICT (ce_id, sink) DO NOTHING
         RETURNING id, created_at",
    )
    .bind(event.ce_id())
    .bind(job_id)
    .bind(event.body.as_slice())
    .bind(Json(&event.attributes))
    .bind(event.request_id.as_deref())
    .bind(publisher)
    .bind(interval(lease))
    .fetch_optional(&mut **tx)
    .await?;
    inserted
        .map(|row| leased_event(&row, job_id, event))
        .transpose()
}

/// The AMQP row just inserted and leased (`RETURNING id, created_at`) as its publisher sends it.
pub(crate) fn leased_event(
    row: &PgRow,
    job_id: Uuid,
    event: OutboundEvent,
) -> Result<PendingEvent, sqlx::Error> {
    Ok(PendingEvent {
        id: RowId::Serial(row.try_get("id")?),
        job_id,
        sink: Sink::Amqp,
        topic: None,
        event,
        attempts: 1,
        created_at: row.try_get("created_at")?,
    })
}
