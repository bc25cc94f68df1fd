//! A claimed run: produce the result while a heartbeat keeps the claim, then end the job.
//! Fail-fast: any failure ends the job `failed` (without a stored object), except transient
//! ones, which leave it unrecorded for the message to be retried.

use std::sync::Arc;
use std::time::Duration;

use engine::Watch;
use outbox::{Close, Lease, TerminalOutcome};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::cancel::{end_cancel, Canceled};
use super::claimed::ClaimedRun;
use super::core::JobCore;
use super::events::EventContext;
use super::executions::{Ledger, Recorder};
use super::finish::{cancel_ended, finish, Ending, Finished};
use super::ports::JobStore;
use super::produce::{produce, Failure};
use super::slots::SlotGate;

impl ClaimedRun<'_> {
    /// Runs the job to its end. [`Finished::NotOurs`] when the claim was taken over (the new
    /// owner finishes the job); [`Finished::NotRecorded`] when a dependency was unreachable.
    pub(super) async fn run(&self, core: &JobCore) -> Finished {
        let job_id = self.job.job_id;
        let started = Instant::now();
        let lost = CancellationToken::new();
        let forced = CancellationToken::new();
        let graceful = CancellationToken::new();
        let registered = core.wakeups.register(job_id);
        // The claim is kept until the job's end is recorded: the heartbeat runs beside the run,
        // in its task (a task of its own, spawned and aborted per job, cost two wake-ups of
        // the runtime per job), and ends with it.
        let heartbeat = heartbeat(
            core.ports.jobs.clone(),
            job_id,
            self.owner.to_owned(),
            core.settings.lease,
            Signals {
                lost: lost.clone(),
                forced: forced.clone(),
                graceful: graceful.clone(),
                woken: registered.notify.clone(),
            },
        );
        // `biased`: the run is polled first; the heartbeat's timer and wake-up are checked
        // each time the task wakes, and it renews while the run awaits.
        tokio::select! {
            biased;
            finished = self.held(core, started, &lost, &forced, graceful) => finished,
            never = held_until_dropped(heartbeat) => match never {},
        }
    }

    /// The run while its claim is held: produce the result, then end the job.
    async fn held(
        &self,
        core: &JobCore,
        started: Instant,
        lost: &CancellationToken,
        forced: &CancellationToken,
        graceful: CancellationToken,
    ) -> Finished {
        let job_id = self.job.job_id;
        // The executions are written as they move, while the run lasts.
        let ledger = Ledger::new(&self.job.mapped_fields);
        let recorder = Recorder {
            core,
            job_id,
            owner: self.owner,
            tenant: self.tenant,
            request_id: self.request_id,
        };
        let recording = recorder.record(ledger.clone());
        let watch = Watch {
            observer: ledger.clone(),
            graceful,
            admission: self.admission(core),
        };
        // A forced cancel drops the extraction at once, which stops its statements on the
        // source servers.
        // `biased`: in this order (tokio's random pick among ready branches made the job core
        // simulation's seeds run two ways; which of several ready branches wins was arbitrary).
        let produced = tokio::select! {
            biased;
            produced = produce(core, self, started, watch) => produced,
            _ = lost.cancelled() => return Finished::NotOurs,
            _ = forced.cancelled() => Err(Failure::Canceled),
            never = recording => match never {},
        };
        let executions = ledger.reports();
        let timed_out;
        let mut close = Close::CANCELED;
        let (outcome, stored) = match produced {
            Ok((result, key)) => (TerminalOutcome::Completed { result }, Some(key)),
            Err(Failure::Job(error)) => (TerminalOutcome::Failed { error }, None),
            Err(Failure::TimedOut(error)) => {
                // The datasources still running when the timeout fired timed out.
                timed_out = error;
                close = Close {
                    running: contract::lifecycle::ExecutionStatus::TimedOut,
                    error: Some(timed_out.as_str()),
                };
                (
                    TerminalOutcome::Failed {
                        error: timed_out.clone(),
                    },
                    None,
                )
            }
            Err(Failure::Transient(cause, reason)) => return Finished::NotRecorded(cause, reason),
            Err(Failure::LostClaim) => {
                tracing::warn!(%job_id, "The job's claim was taken over during extraction; abandoning this run before storing.");
                return Finished::NotOurs;
            }
            Err(Failure::Canceled) => {
                tracing::info!(%job_id, "The job was canceled during its run; nothing is stored.");
                let canceled = Canceled {
                    job_id,
                    tenant: self.tenant,
                    metadata: &self.job.metadata,
                    request_id: self.request_id,
                    owner: Some(self.owner),
                    executions: &executions,
                };
                return cancel_ended(end_cancel(core, &canceled).await);
            }
        };
        let ending = Ending {
            events: EventContext {
                job_id,
                tenant: self.tenant,
                request_id: self.request_id,
                metadata: &self.job.metadata,
                source: &core.settings.source,
            },
            claim: Some(self.owner),
            publisher: self.owner,
            outcome,
            stored,
            earlier_object: self.attempt > 1,
            started: Some(started),
            executions: &executions,
            close: Some(close),
        };
        finish(core, ending).await
    }
}

impl ClaimedRun<'_> {
    /// What the run's datasources wait on: a slot of each capped one, held by the run's claim.
    fn admission(&self, core: &JobCore) -> Arc<dyn engine::Admission> {
        match &core.ports.slots {
            Some(slots) if !core.settings.datasource_caps.is_empty() => Arc::new(SlotGate {
                slots: slots.clone(),
                caps: core.settings.datasource_caps.clone(),
                owner: self.owner.to_owned(),
                job_id: self.job.job_id,
                lease: core.settings.lease,
            }),
            // Both state backends keep slots: only the core's tests run without.
            _ => Arc::new(engine::Unlimited),
        }
    }
}

/// What the heartbeat tells the run.
struct Signals {
    /// The claim is gone.
    lost: CancellationToken,
    /// A forced cancel came: stop now.
    forced: CancellationToken,
    /// A graceful cancel came: start no more datasources, let the running ones end.
    graceful: CancellationToken,
    /// A cancel was announced: renew (and learn of it) now rather than at the next tick.
    woken: std::sync::Arc<tokio::sync::Notify>,
}

/// Renews the claim every third of the lease; signals a lost claim and a cancel (a forced one
/// stops the run, a graceful one its datasources not started yet).
async fn heartbeat(
    jobs: std::sync::Arc<dyn JobStore>,
    job_id: Uuid,
    owner: String,
    lease: Duration,
    signals: Signals,
) {
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.tick().await;
    loop {
        tokio::select! {
            biased;
            _ = ticks.tick() => {}
            _ = signals.woken.notified() => {}
        }
        match jobs.renew_lease(job_id, &owner, lease).await {
            Ok(Lease::Held) => {}
            Ok(Lease::Canceling { force: false }) => {
                if !signals.graceful.is_cancelled() {
                    tracing::info!(%job_id, "The job was canceled; its running statements are left to end.");
                    signals.graceful.cancel();
                }
            }
            Ok(Lease::Canceling { force: true }) => {
                if !signals.forced.is_cancelled() {
                    tracing::info!(%job_id, "The job was force-canceled; stopping its statements.");
                    signals.forced.cancel();
                }
            }
            Ok(Lease::Lost) => {
                tracing::warn!(%job_id, "The job's claim was taken over; abandoning this run.");
                signals.lost.cancel();
                return;
            }
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not renew the job's claim; retrying.")
            }
        }
    }
}

/// The heartbeat, then nothing until dropped: once the claim is lost the run learns it from
/// `lost`, and its end is fenced by the claim anyway.
async fn held_until_dropped(
    heartbeat: impl std::future::Future<Output = ()>,
) -> std::convert::Infallible {
    heartbeat.await;
    std::future::pending().await
}
