//! The MQTT mirror's rows (lifecycle §5): each event recorded in a transaction gets, when the
//! mirror is on, a second row with its MQTT topic and payload, in the same transaction.
//!
//! The payload is built by `contract::event::mirror` from the AMQP event and the job's facts as
//! this transaction leaves them (its executions closed, its state written), so it never
//! contradicts the state row committed with it. MQTT rows are recorded unleased: the mirror's
//! relay takes them at once.

use contract::event::mirror::{JobFacts, MirrorMessage};
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::executions;
use crate::outbox::PendingEvent;

const STEP: &str = "recording the MQTT mirror's events";

/// Records the MQTT rows of `events` (the AMQP rows this transaction recorded for `job_id`)
/// under the topic prefix `mirror`; nothing when the mirror is off or there are none.
pub(crate) async fn record(
    tx: &mut Transaction<'static, Postgres>,
    mirror: Option<&str>,
    job_id: Uuid,
    events: &[PendingEvent],
) -> Result<()> {
    let Some(prefix) = mirror else {
        return Ok(());
    };
    if events.is_empty() {
        return Ok(());
    }
    let facts = if events.iter().any(|e| !e.event.attributes.is_execution()) {
        facts(tx, job_id).await?
    } else {
        // An execution's payload needs nothing of its job's row.
        JobFacts::default()
    };
    let mut ce_ids = Vec::with_capacity(events.len());
    let mut payloads = Vec::with_capacity(events.len());
    let mut attributes = Vec::with_capacity(events.len());
    let mut request_ids = Vec::with_capacity(events.len());
    let mut topics = Vec::with_capacity(events.len());
    for pending in events {
        let message = MirrorMessage::of(prefix, &pending.event, &facts)
            .map_err(|e| OutboxError::invalid(STEP, e.to_string()))?;
        ce_ids.push(pending.event.ce_id());
        payloads.push(message.payload);
        attributes.push(Json(&pending.event.attributes));
        request_ids.push(pending.event.request_id.as_deref());
        topics.push(message.topic);
    }
    sqlx::query(
        "INSERT INTO outbox (ce_id, job_id, body, attributes, request_id, sink, topic)
         SELECT ce_id, $2, body, attributes, request_id, 'mqtt', topic
         FROM unnest($1::text[], $3::bytea[], $4::jsonb[], $5::text[], $6::text[])
              AS t(ce_id, body, attributes, request_id, topic)
         ON CONFLICT (ce_id, sink) DO NOTHING",
    )
    .bind(&ce_ids)
    .bind(job_id)
    .bind(&payloads)
    .bind(&attributes)
    .bind(&request_ids)
    .bind(&topics)
    .execute(&mut **tx)
    .await
    .map_err(|e| OutboxError::sqlx(STEP, e))?;
    Ok(())
}

/// The job's facts as this transaction sees them: its datasources in the order the claim queues
/// them (byte order), `metadata.source` when it is a string, its times and its executions'
/// statuses counted.
async fn facts(tx: &mut Transaction<'static, Postgres>, job_id: Uuid) -> Result<JobFacts> {
    let db = |e| OutboxError::sqlx(STEP, e);
    let row = sqlx::query(
        "SELECT CASE WHEN jsonb_typeof(j.metadata -> 'source') = 'string'
                     THEN j.metadata ->> 'source' END AS description,
                j.created_at, j.updated_at, j.finished_at,
                ARRAY(SELECT k FROM jsonb_object_keys(
                          CASE WHEN jsonb_typeof(j.spec -> 'mappedFields') = 'object'
                               THEN j.spec -> 'mappedFields' ELSE '{}'::jsonb END) AS k
                      ORDER BY k COLLATE \"C\") AS datasources,
                ARRAY(SELECT e.status FROM job_executions e WHERE e.job_id = j.job_id)
                    AS statuses
         FROM jobs j WHERE j.job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(db)?;
    let statuses: Vec<String> = row.try_get("statuses").map_err(db)?;
    Ok(JobFacts {
        datasources: row.try_get("datasources").map_err(db)?,
        description: row.try_get("description").map_err(db)?,
        created_at: row.try_get("created_at").map_err(db)?,
        last_updated_at: row.try_get("updated_at").map_err(db)?,
        finished_at: row.try_get("finished_at").map_err(db)?,
        details: executions::counted(STEP, &statuses)?,
    })
}
