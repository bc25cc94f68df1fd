//! A stateful in-memory job store shared by every simulated replica. It mirrors what the
//! PostgreSQL store (`outbox`'s `jobs.rs`, `terminal.rs`, `control.rs`) does around the
//! lifecycle machine — leases, the claim holder, the outbox rows of the events — and asks
//! [`lifecycle::step`] for every state it writes: it has no rules of its own about statuses.
//! Every write is logged as (state before, step, state after) for the invariants to replay.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use contract::event::Operation;
use contract::lifecycle::{self, JobStatus, Refusal, Step, Then};
use outbox::{
    Claim, ClaimRequest, Controlled, EndCancel, ExecutionEvents, ExecutionReport, ExpiredJob,
    Lease, OutboxError, PendingEvent, Recorded, RecordedEvent, TerminalRecord,
};
use serde_json::Map;
use tokio::time::Instant;
use uuid::Uuid;

use super::chaos::Chaos;
use super::world::{lapsed, new_row, pending, wall, Logged, World};
use crate::job::ports::JobStore;

/// The store; `chaos` adds latency and lost answers.
pub struct SimStore {
    world: Mutex<World>,
    chaos: Arc<Chaos>,
}

/// The database is away (retriable).
fn down(step: &'static str) -> OutboxError {
    OutboxError::Unavailable {
        step,
        detail: "simulated outage".into(),
    }
}

impl SimStore {
    pub fn new(chaos: Arc<Chaos>) -> SimStore {
        SimStore {
            world: Mutex::new(World::default()),
            chaos,
        }
    }

    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().expect("world")
    }

    /// Before a call reaches the database: latency, and sometimes an outage.
    async fn enter(&self, step: &'static str) -> Result<(), OutboxError> {
        self.chaos.pause().await;
        if self.chaos.database_down() || self.chaos.fault(40) {
            return Err(down(step));
        }
        Ok(())
    }

    /// After a commit: latency, and sometimes the answer is lost (the commit stands).
    async fn leave<T>(&self, step: &'static str, answer: T) -> Result<T, OutboxError> {
        self.chaos.pause().await;
        if self.chaos.fault(40) {
            return Err(down(step));
        }
        Ok(answer)
    }

    /// `cancel`/`delete` of the control API (`Store::control`).
    pub async fn control(
        &self,
        job_id: Uuid,
        step: Step,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled, OutboxError> {
        self.enter("control").await?;
        let answer = {
            let mut world = self.world();
            let from = world.jobs.get(&job_id).map(|row| row.state);
            match lifecycle::step(from, step) {
                Err(refusal) => Controlled::Refused(refusal),
                Ok(transition) => {
                    if from.is_none() {
                        world.jobs.insert(job_id, new_row(transition.to));
                    }
                    world.commit(job_id, from, step, transition, source, publisher, lease)
                }
            }
        };
        self.leave("control", answer).await
    }
}

#[async_trait]
impl JobStore for SimStore {
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim, OutboxError> {
        self.enter("claim").await?;
        let answer = {
            let mut world = self.world();
            let now = Instant::now();
            let row = world.jobs.get(&request.job_id).cloned();
            let from = row.as_ref().map(|row| row.state);
            let judged = lifecycle::step(from, Step::Claim);
            // The upsert takes a row that is new, pending, or processing under a lapsed lease,
            // when the machine says a claim runs it.
            let takes = match &row {
                None => true,
                Some(row) => {
                    row.state.status == JobStatus::Pending
                        || (row.state.status == JobStatus::Processing && lapsed(row))
                }
            };
            match judged {
                Ok(transition) if takes && transition.then == Then::Run => {
                    let mut taken = row.unwrap_or_else(|| new_row(transition.to));
                    taken.state = transition.to;
                    taken.owner = Some(request.owner.to_owned());
                    taken.lease = Some(now + request.lease);
                    taken.attempts += 1;
                    taken.updated = now;
                    let first = *taken.first_started.get_or_insert(now);
                    taken.digest = taken.digest.or(request.message_sha256.copied());
                    let attempt = taken.attempts;
                    world.jobs.insert(request.job_id, taken);
                    world.log.push(Logged {
                        job_id: request.job_id,
                        from,
                        step: Step::Claim,
                        to: transition.to,
                        events: transition.events,
                        at: now,
                    });
                    Claim::Acquired {
                        attempt,
                        running_for: now - first,
                    }
                }
                _ => {
                    let row = row.expect("a new row is always taken");
                    let status = row.state.status;
                    match status {
                        JobStatus::Completed
                        | JobStatus::Failed
                        | JobStatus::Canceled
                        | JobStatus::DeletionInProgress
                        | JobStatus::Deleted => Claim::Terminal {
                            status,
                            event_published: !world
                                .outbox
                                .iter()
                                .any(|o| o.job_id == request.job_id && !o.published),
                        },
                        JobStatus::Pending if row.state.cancel_requested => Claim::CancelRequested,
                        JobStatus::CancellationInProgress if lapsed(&row) => Claim::CancelRequested,
                        JobStatus::Pending
                        | JobStatus::Processing
                        | JobStatus::CancellationInProgress => match row.lease {
                            // The waiter sleeps until this wall-clock time: its distance
                            // from `Utc::now()` would jitter with the machine's load, so
                            // it is in the past and the waiter polls every 250 ms of the
                            // paused clock (BUSY_WAIT_LIMIT still counts that clock).
                            Some(_) => Claim::Busy {
                                lease_expires_at: Utc::now() - chrono::Duration::hours(1),
                            },
                            None => {
                                return Err(OutboxError::Corrupt {
                                    step: "claim",
                                    detail: format!("job in state {status} without a lease"),
                                })
                            }
                        },
                    }
                }
            }
        };
        self.leave("claim", answer).await
    }

    async fn renew_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError> {
        self.enter("renew").await?;
        let answer = {
            let mut world = self.world();
            match world.jobs.get_mut(&job_id) {
                Some(row)
                    if row.owner.as_deref() == Some(owner)
                        && matches!(
                            row.state.status,
                            JobStatus::Processing | JobStatus::CancellationInProgress
                        ) =>
                {
                    row.lease = Some(Instant::now() + lease);
                    row.updated = Instant::now();
                    if row.state.status == JobStatus::CancellationInProgress {
                        Lease::Canceling {
                            force: row.state.force,
                        }
                    } else {
                        Lease::Held
                    }
                }
                _ => Lease::Lost,
            }
        };
        self.leave("renew", answer).await
    }

    async fn release(&self, job_id: Uuid, owner: &str) -> Result<bool, OutboxError> {
        self.enter("release").await?;
        let answer = {
            let mut world = self.world();
            match world.jobs.get_mut(&job_id) {
                Some(row)
                    if row.owner.as_deref() == Some(owner)
                        && row.state.status == JobStatus::Processing =>
                {
                    row.lease = Some(Instant::now());
                    true
                }
                _ => false,
            }
        };
        self.leave("release", answer).await
    }

    async fn record_terminal(&self, record: &TerminalRecord<'_>) -> Result<Recorded, OutboxError> {
        let status = record.outcome.status();
        let attributes = &record.event.attributes;
        if attributes.status != Operation::from(status)
            || attributes.subject != record.job_id.as_hyphenated().to_string()
        {
            return Err(OutboxError::InvalidArgument {
                step: "record",
                detail: "the event is not the outcome's".into(),
            });
        }
        self.enter("record").await?;
        let answer = {
            let mut world = self.world();
            world.record_terminal(record)
        };
        self.leave("record", answer).await
    }

    async fn record_executions(
        &self,
        _: Uuid,
        _: &str,
        _: &[ExecutionReport],
        _: &ExecutionEvents<'_>,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        // The executions are not simulated: the job's own lifecycle is.
        self.chaos.pause().await;
        Ok(Vec::new())
    }

    async fn recorded_event(&self, ce_id: &str) -> Result<Option<RecordedEvent>, OutboxError> {
        self.enter("lookup").await?;
        let answer = self
            .world()
            .outbox
            .iter()
            .find(|row| row.event.ce_id() == ce_id)
            .map(|row| RecordedEvent {
                outbox_id: outbox::RowId::Serial(row.id),
                leased_by: row.leased_by.clone(),
            });
        Ok(answer)
    }

    async fn accepted_message_digest(
        &self,
        job_id: Uuid,
        _: Option<&str>,
    ) -> Result<Option<[u8; 32]>, OutboxError> {
        self.enter("digest").await?;
        Ok(self.world().jobs.get(&job_id).and_then(|row| row.digest))
    }

    async fn lease_unpublished(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Vec<PendingEvent>, OutboxError> {
        self.enter("lease").await?;
        let answer = {
            let mut world = self.world();
            let now = Instant::now();
            world
                .outbox
                .iter_mut()
                .filter(|row| row.job_id == job_id && !row.published && row.lease_until <= now)
                .map(|row| {
                    row.leased_by = Some(owner.to_owned());
                    row.lease_until = now + lease;
                    row.attempts += 1;
                    pending(row.id, row.job_id, row.event.clone(), row.attempts)
                })
                .collect()
        };
        self.leave("lease", answer).await
    }

    async fn end_cancel(&self, request: &EndCancel<'_>) -> Result<Controlled, OutboxError> {
        self.enter("end_cancel").await?;
        let answer = self.world().end_cancel(request);
        self.leave("end_cancel", answer).await
    }

    async fn object_deleted(
        &self,
        job_id: Uuid,
        _: bool,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Result<Controlled, OutboxError> {
        self.enter("object_deleted").await?;
        let answer = {
            let mut world = self.world();
            match world.jobs.get(&job_id).map(|row| row.state) {
                None => Controlled::Refused(Refusal::Unknown),
                Some(state) => match lifecycle::step(Some(state), Step::ObjectDeleted) {
                    Err(refusal) => Controlled::Refused(refusal),
                    Ok(transition) => world.commit(
                        job_id,
                        Some(state),
                        Step::ObjectDeleted,
                        transition,
                        source,
                        publisher,
                        lease,
                    ),
                },
            }
        };
        self.leave("object_deleted", answer).await
    }

    async fn deletions_in_progress(
        &self,
        grace: Duration,
        _: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        self.enter("deletions").await?;
        let now = Instant::now();
        Ok(self
            .world()
            .jobs
            .iter()
            .filter(|(_, row)| {
                row.state.status == JobStatus::DeletionInProgress && row.updated + grace <= now
            })
            .map(|(job_id, _)| (*job_id, None))
            .collect())
    }

    async fn expired_jobs(&self, grace: Duration, _: i64) -> Result<Vec<ExpiredJob>, OutboxError> {
        self.enter("expired").await?;
        let now = Instant::now();
        let world = self.world();
        let mut expired: Vec<_> = world
            .jobs
            .iter()
            .filter(|(_, row)| {
                matches!(
                    row.state.status,
                    JobStatus::Processing | JobStatus::CancellationInProgress
                ) && row.lease.is_some_and(|at| at + grace <= now)
            })
            .map(|(job_id, row)| {
                (
                    row.lease,
                    ExpiredJob {
                        job_id: *job_id,
                        tenant_id: None,
                        request_id: None,
                        metadata: Map::new(),
                        owner: row.owner.clone(),
                        attempts: row.attempts as i32,
                        lease_expires_at: wall(row.lease.expect("filtered")),
                        canceling: row.state.status == JobStatus::CancellationInProgress,
                    },
                )
            })
            .collect();
        expired.sort_by_key(|(lease, job)| (*lease, job.job_id));
        Ok(expired.into_iter().map(|(_, job)| job).collect())
    }

    async fn objects_left(
        &self,
        grace: Duration,
        _: i64,
    ) -> Result<Vec<(Uuid, Option<String>)>, OutboxError> {
        self.enter("objects_left").await?;
        let now = Instant::now();
        let world = self.world();
        let mut left: Vec<_> = world
            .jobs
            .iter()
            .filter(|(_, row)| row.object_left && row.updated + grace <= now)
            .map(|(job_id, row)| (row.updated, *job_id))
            .collect();
        left.sort();
        Ok(left.into_iter().map(|(_, job_id)| (job_id, None)).collect())
    }

    async fn mark_object_left(&self, job_id: Uuid) -> Result<(), OutboxError> {
        self.enter("mark_object_left").await?;
        if let Some(row) = self.world().jobs.get_mut(&job_id) {
            if matches!(
                row.state.status,
                JobStatus::Failed | JobStatus::Canceled | JobStatus::Deleted
            ) {
                row.object_left = true;
            }
        }
        Ok(())
    }

    async fn object_discarded(&self, job_id: Uuid) -> Result<(), OutboxError> {
        self.enter("object_discarded").await?;
        if let Some(row) = self.world().jobs.get_mut(&job_id) {
            row.object_left = false;
        }
        Ok(())
    }
}
