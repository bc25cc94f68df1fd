//! What the sweeper and a run's progress need of the Manager's documents beyond claims and
//! ends: objects left behind by failed jobs, deletions in progress, and the executions with
//! their events.
//!
//! - Executions' events (`job.execution.*`) go to this Worker's own outbox
//!   (`worker_outbox`): a Go relay would refuse them in `streaming_outbox_events`.
//! - Deletions the control API started (`control.rs`) whose object could not be deleted then
//!   are listed by [`ManagerStore::deletions_in_progress`] for the sweeper.

use std::time::Duration;

use chrono::Utc;
use mongodb::bson::{doc, Bson, Document};
use outbox::{ExecutionEvents, ExecutionReport, OutboxError, PendingEvent};
use uuid::Uuid;

use crate::binary_id;
use crate::claims::chrono_duration;
use crate::executions;
use crate::jobs::{bson_time, WORKER_FIELD};
use crate::manager_store::{
    field, transaction, unavailable, worker_key, Fail, ManagerStore, Seen, Txn, VERSION,
};
use crate::worker_outbox;

impl ManagerStore {
    /// Marks the job's object left: a run stored it after the job ended failed.
    pub async fn mark_object_left(&self, job_id: Uuid) -> Result<(), OutboxError> {
        self.set_object_left(job_id, true, "marking a job's object left")
            .await
    }

    /// The job's object is gone: no longer left.
    pub async fn object_discarded(&self, job_id: Uuid) -> Result<(), OutboxError> {
        self.set_object_left(job_id, false, "marking a job's object discarded")
            .await
    }

    async fn set_object_left(
        &self,
        job_id: Uuid,
        left: bool,
        step: &'static str,
    ) -> Result<(), OutboxError> {
        self.store()
            .jobs()
            .update_one(
                doc! {"_id": binary_id(job_id)},
                doc! {"$set": {worker_key(field::OBJECT_LEFT): left}, "$inc": {VERSION: 1_i64}},
            )
            .await
            .map_err(|e| unavailable(step, &e))?;
        Ok(())
    }

    /// Jobs whose object is marked left, ended more than `grace` ago, at most `limit`.
    pub async fn objects_left(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        self.listed(
            doc! {
                worker_key(field::OBJECT_LEFT): true,
                worker_key(field::FINISHED_AT): {"$lte": bson_time(Utc::now() - chrono_duration(grace))},
            },
            worker_key(field::FINISHED_AT),
            limit,
            "listing objects left",
        )
        .await
    }

    /// Jobs left `deletion_in_progress` for more than `grace` (their object could not be
    /// deleted then), oldest first, with their tenant: the repair pass deletes them again.
    pub async fn deletions_in_progress(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        self.listed(
            doc! {
                worker_key(field::STATE): "deletion_in_progress",
                worker_key(field::DELETION_STARTED_AT): {"$lte": bson_time(Utc::now() - chrono_duration(grace))},
            },
            worker_key(field::DELETION_STARTED_AT),
            limit,
            "listing deletions in progress",
        )
        .await
    }

    async fn listed(
        &self,
        filter: Document,
        by: String,
        limit: i64,
        step: &'static str,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        let mut cursor = self
            .store()
            .jobs()
            .find(filter)
            .projection(doc! {"_id": 1, worker_key(field::TENANT): 1})
            .sort(doc! {by: 1})
            .limit(limit)
            .await
            .map_err(|e| unavailable(step, &e))?;
        let mut jobs = Vec::new();
        while cursor.advance().await.map_err(|e| unavailable(step, &e))? {
            let document: Document = cursor
                .deserialize_current()
                .map_err(|e| unavailable(step, &e))?;
            let Some(Bson::Binary(id)) = document.get("_id") else {
                continue;
            };
            let Ok(id) = Uuid::from_slice(&id.bytes) else {
                continue;
            };
            let tenant = document
                .get_document(WORKER_FIELD)
                .ok()
                .and_then(|w| w.get_str(field::TENANT).ok())
                .map(str::to_owned);
            jobs.push((id, tenant));
        }
        Ok(jobs)
    }

    /// Writes the run's reports of its executions while `owner` holds the job (an execution
    /// that ended is not changed again), with the event of each one that ended, leased to
    /// `events.publisher`, in one transaction; nothing once `owner` lost the job.
    pub async fn record_executions(
        &self,
        job_id: Uuid,
        owner: &str,
        reports: &[ExecutionReport],
        events: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        const STEP: &str = "recording a job's executions";
        transaction!(self, STEP, |session| {
            let Some(job) = self.read_job(session, job_id).await? else {
                return Ok(Txn::Abort(Vec::new()));
            };
            let seen = Seen::of(job)?;
            // A run being canceled gracefully still reports its running datasources.
            if seen.owner.as_deref() != Some(owner)
                || !matches!(
                    seen.state.status,
                    contract::lifecycle::JobStatus::Processing
                        | contract::lifecycle::JobStatus::CancellationInProgress
                )
            {
                return Ok(Txn::Abort(Vec::new()));
            }
            let mut executions = executions::stored(&seen.worker());
            let ended = executions::apply(&mut executions, reports);
            let done = self
                .store()
                .jobs()
                .update_one(
                    seen.unchanged(),
                    doc! {
                        "$set": {worker_key(field::EXECUTIONS): executions},
                        "$inc": {VERSION: 1_i64},
                    },
                )
                .session(&mut *session)
                .await?;
            if done.matched_count != 1 {
                return Err(Fail::Conflict);
            }
            let written = self
                .execution_events(session, job_id, &ended, events)
                .await?;
            Ok(Txn::Commit(written))
        })
        .await
    }

    /// The events of `ended` executions, each inserted in this Worker's outbox (leased to
    /// `events.publisher`) unless recorded already.
    pub(crate) async fn execution_events(
        &self,
        session: &mut mongodb::ClientSession,
        job_id: Uuid,
        ended: &[Document],
        events: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, Fail> {
        let mut written = Vec::new();
        for execution in ended {
            let Some(event) = executions::ended_event(job_id, execution, events)? else {
                continue;
            };
            if let Some(pending) = worker_outbox::insert_leased(
                self.store(),
                session,
                job_id,
                event,
                events.publisher,
                events.lease,
                self.mirror(),
            )
            .await?
            {
                written.push(pending);
            }
        }
        Ok(written)
    }
}
