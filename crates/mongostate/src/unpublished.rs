//! What a caller learns after a terminal record: whether it committed (`recorded_event`, for a
//! commit whose answer was lost), and a redelivery's republish of a terminal job's events
//! (`lease_unpublished`): the event a marker holds, this Worker's row of it, its executions'.

use std::collections::HashMap;

use chrono::Utc;
use mongodb::bson::{doc, Document};
use outbox::{OutboxError, PendingEvent, RecordedEvent, RowId};
use uuid::Uuid;

use crate::binary_id;
use crate::jobs::bson_time;
use crate::manager_store::{
    field, to_outbox, transaction, unavailable, worker_key, ManagerStore, Seen, Txn,
};
use crate::outbox::{OutboxRow, RowStatus};
use crate::outbox_event::pending_event;

impl ManagerStore {
    /// The request ids (`X-Request-Id`) this Worker kept with `jobs`, for the events a relay
    /// rebuilds from their rows (a row carries none); jobs without one are left out.
    pub async fn request_ids(&self, jobs: &[Uuid]) -> Result<HashMap<Uuid, String>, OutboxError> {
        const STEP: &str = "reading jobs' request ids";
        if jobs.is_empty() {
            return Ok(HashMap::new());
        }
        let ids: Vec<_> = jobs.iter().map(|id| binary_id(*id)).collect();
        let key = worker_key(field::REQUEST_ID);
        let mut cursor = self
            .store()
            .jobs()
            .find(doc! {"_id": {"$in": ids}, &key: {"$type": "string"}})
            .projection(doc! {&key: 1})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let mut found = HashMap::new();
        while cursor.advance().await.map_err(|e| unavailable(STEP, &e))? {
            let job: Document = cursor
                .deserialize_current()
                .map_err(|e| unavailable(STEP, &e))?;
            let Some(mongodb::bson::Bson::Binary(id)) = job.get("_id") else {
                continue;
            };
            let request_id = job
                .get_document(crate::jobs::WORKER_FIELD)
                .ok()
                .and_then(|w| w.get_str(field::REQUEST_ID).ok());
            if let (Ok(id), Some(request_id)) = (Uuid::from_slice(&id.bytes), request_id) {
                found.insert(id, request_id.to_owned());
            }
        }
        Ok(found)
    }

    /// The outbox row of the event `ce_id` (a job's terminal event) and who holds it, when its
    /// record committed: the job's `fetcher_worker.terminal_event` names it exactly then.
    pub async fn recorded_event(&self, ce_id: &str) -> Result<Option<RecordedEvent>, OutboxError> {
        const STEP: &str = "looking up a recorded event";
        let Some(job_id) = job_of(ce_id) else {
            return Ok(None);
        };
        let found = self
            .store()
            .jobs()
            .find_one(doc! {
                "_id": binary_id(job_id),
                worker_key(&format!("{}.ce_id", field::TERMINAL_EVENT)): ce_id,
            })
            .projection(doc! {crate::jobs::WORKER_FIELD: 1})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let Some(event) = found.as_ref().and_then(terminal_event) else {
            return Ok(None);
        };
        let (Ok(id), Ok(tenant)) = (event.get_str("outbox_id"), event.get_str("tenant_id")) else {
            return Ok(None);
        };
        let outbox_id = Uuid::parse_str(id).map_err(|_| OutboxError::Corrupt {
            step: STEP,
            detail: "fetcher_worker.terminal_event.outbox_id is not a UUID".to_owned(),
        })?;
        let row = self
            .store()
            .outbox_rows()
            .find_one(doc! {"id": id, "tenant_id": tenant})
            .projection(doc! {"status": 1, "claim_token": 1})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let leased_by = row
            .filter(|row| row.get_str("status").ok() == Some(RowStatus::Processing.as_str()))
            .and_then(|row| row.get_str("claim_token").ok().map(str::to_owned));
        Ok(Some(RecordedEvent {
            outbox_id: RowId::Uuid(outbox_id),
            leased_by,
        }))
    }

    /// Leases the terminal job's unpublished event to `owner`: the event a marker holds (Go's or
    /// a crashed write's), written as a new row leased to `owner` with the marker cleared, in one
    /// transaction; else this Worker's row of it when it is pending, failed, or stuck under a
    /// claim for the store's claim timeout (lib-commons' takeover, 10 minutes unless set;
    /// `lease` cannot shorten what Go relays wait). A row a relay holds is left to it.
    pub async fn lease_unpublished(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: std::time::Duration,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        const STEP: &str = "leasing a job's unpublished events";
        // This Worker's own rows of the job (its executions' events) first, in their order.
        let mut leased = crate::worker_outbox::claim_for_job(self.store(), job_id, owner, lease)
            .await
            .map_err(|e| to_outbox(STEP, e))?;
        let terminal = transaction!(self, STEP, |session| {
            let Some(job) = self.read_job(session, job_id).await? else {
                return Ok(Txn::Abort(Vec::new()));
            };
            let seen = Seen::of(job)?;
            let worker = seen.worker();
            let request_id = worker.get_str(field::REQUEST_ID).ok().map(str::to_owned);
            if seen.job.event_to_repair().is_ok() {
                let row = self.re_emit(session, &seen, Some(owner)).await?;
                let mut event = pending_event(&row, request_id)?;
                event.attempts = 1;
                return Ok(Txn::Commit(vec![event]));
            }
            let Ok(event) = worker.get_document(field::TERMINAL_EVENT) else {
                return Ok(Txn::Abort(Vec::new()));
            };
            let (Ok(id), Ok(tenant)) = (event.get_str("outbox_id"), event.get_str("tenant_id"))
            else {
                return Ok(Txn::Abort(Vec::new()));
            };
            let found = self
                .store()
                .outbox_rows()
                .find_one(doc! {"id": id, "tenant_id": tenant})
                .session(&mut *session)
                .await?;
            let Some(found) = found else {
                return Ok(Txn::Abort(Vec::new()));
            };
            let row = OutboxRow::from_document(&found)?;
            let now = Utc::now();
            let takeable = match row.status {
                RowStatus::Pending | RowStatus::Failed => true,
                RowStatus::Processing => row.updated_at <= self.windows().stuck_before(now),
                RowStatus::Published | RowStatus::Invalid => false,
            };
            if !takeable {
                return Ok(Txn::Abort(Vec::new()));
            }
            let done = self
                .store()
                .outbox_rows()
                .update_one(
                    doc! {
                        "id": &row.id,
                        "tenant_id": &row.tenant_id,
                        "status": row.status.as_str(),
                        "attempts": row.attempts,
                        "updated_at": bson_time(row.updated_at),
                    },
                    doc! {"$set": {
                        "status": RowStatus::Processing.as_str(),
                        "updated_at": bson_time(now),
                        "claim_token": owner,
                    }},
                )
                .session(&mut *session)
                .await?;
            if done.modified_count != 1 {
                return Ok(Txn::Abort(Vec::new()));
            }
            Ok(Txn::Commit(vec![pending_event(&row, request_id)?]))
        })
        .await?;
        leased.extend(terminal);
        Ok(leased)
    }
}

/// `fetcher_worker.terminal_event` of a job document (or of its projection).
fn terminal_event(document: &Document) -> Option<&Document> {
    document
        .get_document(crate::jobs::WORKER_FIELD)
        .ok()?
        .get_document(field::TERMINAL_EVENT)
        .ok()
}

/// The job of a job event's ce-id, `fetcher.job.<operation>.<jobId>`.
fn job_of(ce_id: &str) -> Option<Uuid> {
    let rest = ce_id.strip_prefix("fetcher.job.")?;
    let (_, id) = rest.rsplit_once('.')?;
    Uuid::parse_str(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_events_ce_id_names_its_job() {
        let id = Uuid::now_v7();
        assert_eq!(
            job_of(&contract::event::ce_id(
                contract::event::TerminalStatus::Failed,
                id
            )),
            Some(id)
        );
        assert_eq!(job_of("fetcher.job.execution.completed.x.ds"), None);
        assert_eq!(job_of("other"), None);
    }
}
