//! The terminal-event repairer of UPSTREAM-MANAGER §5 on this Worker's side: a job whose
//! terminal write left the `metadata.terminalEvent*` markers (a Go Worker, or one of either
//! implementation, that died before its outbox row was written) gets its stored event written
//! as a new row, with the same `ce-id` (`fetcher.job.<status>.<jobId>`) and the payload byte for
//! byte, and its markers cleared.
//!
//! Upstream's gaps and what is chosen here:
//! - Go inserts the row, then clears the markers: two writes, so a crash between them re-emits
//!   the event again later. Here both are one transaction, which re-reads the job first: of two
//!   repairers (or a repairer and a redelivery) seeing one marker, one writes the row.
//! - Go repairers still race this one (they take no lock): a duplicate row, whose event
//!   consumers drop by `ce-id`, as upstream's own repairers race each other.

use chrono::Utc;
use mongodb::bson::{doc, Document};
use mongodb::ClientSession;
use outbox::OutboxError;

use crate::binary_id;
use crate::jobs::{self, MARKER_PAYLOAD, MARKER_PENDING, MARKER_STATUS, REPAIR_BATCH};
use crate::manager_store::{
    field, to_outbox, transaction, worker_key, Fail, ManagerStore, Seen, Txn, VERSION,
};
use crate::outbox::{new_row, Emit, OutboxRow};
use crate::outbox_event::leased_row;

/// What one marker pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarkerRepair {
    /// The `ce-id`s written again as new rows, their markers cleared.
    pub re_emitted: Vec<String>,
    /// Marked jobs left as they are: a marker Go's repairer refuses too (logged), or one another
    /// repairer cleared first.
    pub left: usize,
}

impl ManagerStore {
    /// One pass over the marked terminal jobs (at most [`REPAIR_BATCH`], oldest completion
    /// first, Go's query): each usable marker's event written as a new `PENDING` row, for any
    /// relay to publish, and the marker cleared, in one transaction per job.
    pub async fn repair_markers(&self) -> Result<MarkerRepair, OutboxError> {
        const STEP: &str = "repairing terminal-event markers";
        let marked = jobs::marked_terminal(self.store(), REPAIR_BATCH)
            .await
            .map_err(|e| to_outbox(STEP, e))?;
        let mut pass = MarkerRepair::default();
        for job in marked {
            let job = match job {
                Ok(job) => job,
                Err(error) => {
                    tracing::warn!(%error, "Marked job is unreadable; its terminal event is not re-emitted.");
                    pass.left += 1;
                    continue;
                }
            };
            if let Err(reason) = job.event_to_repair() {
                tracing::warn!(job_id = %job.id, %reason, "Terminal-event marker left as it is.");
                pass.left += 1;
                continue;
            }
            let id = job.id;
            let written = transaction!(self, STEP, |session| {
                let Some(job) = self.read_job(session, id).await? else {
                    return Ok(Txn::Abort(None));
                };
                let seen = Seen::of(job)?;
                let Ok(event) = seen.job.event_to_repair() else {
                    return Ok(Txn::Abort(None));
                };
                let ce_id = contract::event::ce_id(event.status, id);
                self.re_emit(session, &seen, None).await?;
                Ok(Txn::Commit(Some(ce_id)))
            })
            .await?;
            match written {
                Some(ce_id) => {
                    tracing::info!(job_id = %id, ce_id = %ce_id, "Terminal event re-emitted from its marker.");
                    pass.re_emitted.push(ce_id);
                }
                None => pass.left += 1,
            }
        }
        Ok(pass)
    }

    /// In `session`'s transaction: writes the marker's event of `seen` (which must have a usable
    /// one) as a new row, leased to `owner` or `PENDING` for any relay, clears the markers and
    /// keeps the row under `fetcher_worker.terminal_event`. The row, as written.
    pub(crate) async fn re_emit(
        &self,
        session: &mut ClientSession,
        seen: &Seen,
        owner: Option<&str>,
    ) -> Result<OutboxRow, Fail> {
        let marked = seen.job.event_to_repair().map_err(|reason| {
            Fail::Outbox(OutboxError::Corrupt {
                step: "re-emitting a terminal event",
                detail: reason,
            })
        })?;
        let job_id = seen.job.id;
        let tenant = contract::event::event_tenant(seen.tenant.as_deref());
        let emit = Emit {
            tenant,
            job_id,
            status: marked.status,
            body: &marked.payload,
            exchange: &self.config().exchange,
            source: &self.config().source,
            at: Utc::now(),
        };
        let (row_id, row) = match owner {
            Some(owner) => leased_row(&emit, owner)?,
            None => new_row(&emit)?,
        };
        self.store()
            .outbox_rows()
            .insert_one(row.clone())
            .session(&mut *session)
            .await?;
        self.store()
            .jobs()
            .update_one(
                doc! {"_id": binary_id(job_id)},
                doc! {
                    "$unset": marker_keys(),
                    "$set": {worker_key(field::TERMINAL_EVENT): {
                        "ce_id": contract::event::ce_id(marked.status, job_id),
                        "outbox_id": row_id.hyphenated().to_string(),
                        "tenant_id": tenant,
                    }},
                    "$inc": {VERSION: 1_i64},
                },
            )
            .session(&mut *session)
            .await?;
        Ok(OutboxRow::from_document(&row)?)
    }
}

/// `$unset` of exactly the three marker keys (§9 item 6); `metadata.error` stays.
pub(crate) fn marker_keys() -> Document {
    doc! {
        format!("metadata.{MARKER_PENDING}"): "",
        format!("metadata.{MARKER_STATUS}"): "",
        format!("metadata.{MARKER_PAYLOAD}"): "",
    }
}
