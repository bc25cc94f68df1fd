//! The one way a job ends, whoever ends it (a claimed run, a delivery that cannot run, the
//! sweeper of lost jobs): build the event of its outcome, record the terminal state with it in
//! one transaction, publish it, and delete an object that no completed job owns.
//!
//! A job's object has one key (contract §7), so every run of a job writes the same object.
//! Whoever ends a job `failed` after an earlier run may have stored it deletes it; an ending
//! whose commit went unanswered asks the database whether it happened before deleting anything.

use std::time::Duration;

use chrono::Utc;
use contract::event::{OutboundEvent, TerminalStatus};
use contract::lifecycle::JobStatus;
use contract::Redacted;
use outbox::{
    Close, ExecutionReport, PendingEvent, Recorded, RecordedEvent, RowId, TerminalOutcome,
    TerminalRecord,
};
use tokio::time::Instant;
use tracing::Instrument as _;
use uuid::Uuid;

use super::after_commit::{after_commit, delete_quietly, discard_object, Committed};
use super::cancel::CancelEnd;
use super::core::{JobCore, Requeue};
use super::events::EventContext;
use super::spans::stage;
use crate::metrics;

/// A job's end, as whoever ends it knows it.
pub(super) struct Ending<'a> {
    /// The job, and where its event goes.
    pub events: EventContext<'a>,
    /// The claim the caller holds; `None` ends the job without one (see [`TerminalRecord`]).
    pub claim: Option<&'a str>,
    /// Who publishes the event right after the commit (its outbox row is leased to it).
    pub publisher: &'a str,
    pub outcome: TerminalOutcome,
    /// The key of the object this caller stored, if it stored one.
    pub stored: Option<String>,
    /// An earlier run of the job may have stored its object: the key is deleted if the job
    /// ends `failed`.
    pub earlier_object: bool,
    /// When the job's run began (its duration is reported); `None` for a job ended unrun.
    pub started: Option<Instant>,
    /// The run's last reports of its executions (none for a job ended unrun).
    pub executions: &'a [ExecutionReport],
    /// How the executions the run left open end; `None` for a job that never ran (it has none).
    pub close: Option<Close<'a>>,
}

impl<'a> Ending<'a> {
    /// A job ended `failed` without a claim, unrun (the sweeper sets `close` for a lost run).
    pub(super) fn failed(
        events: EventContext<'a>,
        publisher: &'a str,
        error: Redacted,
    ) -> Ending<'a> {
        Ending {
            events,
            claim: None,
            publisher,
            outcome: TerminalOutcome::Failed { error },
            stored: None,
            earlier_object: false,
            started: None,
            executions: &[],
            close: None,
        }
    }

    fn took(&self) -> Duration {
        self.started.map(|at| at.elapsed()).unwrap_or_default()
    }
}

/// What ending a job came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Finished {
    /// The terminal state is committed by this ending (or its lost commit is confirmed); its
    /// event was handed to the sink, or is left to the repairer.
    Recorded,
    /// Nothing written: the job had already ended.
    AlreadyTerminal,
    /// Nothing written: another claim holds the job (or took it over from the caller's).
    NotOurs,
    /// Nothing written: without a claim, the job is another tenant's.
    OtherTenant,
    /// Nothing is known to be written (a dependency was unreachable, for this cause); try again
    /// later.
    NotRecorded(Requeue, String),
}

/// Ends the job as `ending` says; see the module's docs.
pub(super) async fn finish(core: &JobCore, ending: Ending<'_>) -> Finished {
    let job_id = ending.events.job_id;
    let tenant = ending.events.tenant;
    let (outcome, event) = match event_of(core, &ending).await {
        Ok(built) => built,
        Err(reason) => return Finished::NotRecorded(Requeue::Internal, reason),
    };
    let status = outcome.status();
    let outcome_error = match &outcome {
        TerminalOutcome::Failed { error } => Some(error.clone()),
        TerminalOutcome::Completed { .. } => None,
    };
    let record = TerminalRecord {
        job_id,
        owner: ending.claim,
        tenant,
        outcome,
        event: &event,
        metadata: ending.events.metadata,
        leaves_object: ending.earlier_object || ending.stored.is_some(),
        publisher: ending.publisher,
        lease: core.settings.lease,
        executions: ending.executions,
        close: ending.close,
    };
    let recording = Instant::now();
    let recorded = core
        .ports
        .jobs
        .record_terminal(&record)
        .instrument(stage!("record"))
        .await;
    metrics::stage("record", recording.elapsed());
    let stored = if status == TerminalStatus::Completed {
        ending.stored.as_deref()
    } else {
        None
    };
    match recorded {
        Ok(Recorded::Inserted {
            outbox_id,
            executions,
        }) => {
            metrics::job_finished(status.as_str(), ending.took());
            log_finished(job_id, tenant, outcome_error.as_ref(), false);
            // Marked left with the end: deleted now, or by the sweeper.
            if status == TerminalStatus::Failed
                && (ending.earlier_object || ending.stored.is_some())
            {
                discard_object(core, tenant, job_id).await;
            }
            publish(core, executions, outbox_id, job_id, event, ending.publisher)
                .instrument(stage!("publish"))
                .await;
            Finished::Recorded
        }
        Ok(Recorded::AlreadyTerminal { status }) => {
            // Another run ended the job; an object this run stored belongs to no completed job.
            if status != JobStatus::Completed && stored.is_some() {
                if let Err(error) = core.ports.jobs.mark_object_left(job_id).await {
                    tracing::debug!(%job_id, %error, "Could not mark the object left.");
                }
                discard_object(core, tenant, job_id).await;
            }
            Finished::AlreadyTerminal
        }
        // The job's cancel won, and was ended instead: it came while the run worked (its
        // object is discarded), or before the message of a job that fails unrun (both cancel
        // events are recorded).
        Ok(Recorded::Canceled {
            transition,
            events,
            canceled,
        }) => {
            let committed = Committed {
                transition,
                events,
                canceled,
            };
            after_commit(core, job_id, tenant, ending.publisher, committed).await;
            Finished::Recorded
        }
        // `OtherTenant` comes only without a claim; a claim already checked the tenant.
        Ok(Recorded::LostClaim) => Finished::NotOurs,
        Ok(Recorded::OtherTenant) if ending.claim.is_some() => Finished::NotOurs,
        Ok(Recorded::OtherTenant) => Finished::OtherTenant,
        Ok(Recorded::DuplicateEvent { ce_id }) => {
            tracing::error!(%job_id, %ce_id, "The job's event already exists for a job that had not ended; the state database was edited by hand.");
            Finished::NotOurs
        }
        Err(error) => match commit_check(core, event.ce_id()).await {
            CommitCheck::Committed(RecordedEvent {
                outbox_id,
                leased_by,
            }) => {
                log_finished(job_id, tenant, outcome_error.as_ref(), true);
                if leased_by.as_deref() == Some(ending.publisher) {
                    metrics::job_finished(status.as_str(), ending.took());
                    publish(core, Vec::new(), outbox_id, job_id, event, ending.publisher).await;
                }
                Finished::Recorded
            }
            CommitCheck::NotCommitted => {
                // The job is not completed, so its object must not stay.
                if let Some(key) = stored {
                    delete_quietly(core, key).await;
                }
                Finished::NotRecorded(Requeue::StateDatabase, error.to_string())
            }
            // The object stays. The message's next run finds the job ended (the commit
            // happened) or runs it again: it overwrites the object, or deletes it if it fails.
            CommitCheck::Unknown => {
                Finished::NotRecorded(Requeue::StateDatabase, error.to_string())
            }
        },
    }
}

/// The line a person reads first about a job's end: a completed job at INFO, a failed one
/// (a timed-out one too) at WARN with its redacted reason, the one its failed event carries.
/// `late`: the commit's answer was lost and the commit is confirmed.
fn log_finished(job_id: Uuid, tenant: Option<&str>, error: Option<&Redacted>, late: bool) {
    let tenant = tenant.unwrap_or("");
    let lost = if late {
        " (the commit's answer was lost; the commit is confirmed)"
    } else {
        ""
    };
    match error {
        None => tracing::info!(%job_id, tenant, status = "completed", "Job finished{lost}."),
        Some(reason) => {
            tracing::warn!(%job_id, tenant, status = "failed", %reason, "Job failed{lost}.")
        }
    }
}

/// What a run's end of its own cancel means for the run.
pub(super) fn cancel_ended(end: CancelEnd) -> Finished {
    match end {
        CancelEnd::Ended => Finished::Recorded,
        CancelEnd::MovedOn | CancelEnd::OtherTenant => Finished::NotOurs,
        CancelEnd::NotRecorded(reason) => Finished::NotRecorded(Requeue::StateDatabase, reason),
    }
}

/// The outcome to record and its event. A completed job whose event cannot be built fails
/// instead, its object deleted.
async fn event_of(
    core: &JobCore,
    ending: &Ending<'_>,
) -> Result<(TerminalOutcome, OutboundEvent), String> {
    let events = &ending.events;
    let error = match &ending.outcome {
        TerminalOutcome::Completed { result } => {
            let took_ms = u64::try_from(ending.took().as_millis()).unwrap_or(u64::MAX);
            match events.completed(result, took_ms.max(1), Utc::now()) {
                Ok(event) => return Ok((ending.outcome.clone(), event)),
                Err(error) => {
                    if let Some(key) = &ending.stored {
                        delete_quietly(core, key).await;
                    }
                    Redacted::new(&format!("failed to build the job event: {error}"))
                }
            }
        }
        TerminalOutcome::Failed { error } => error.clone(),
    };
    let event = events
        .failed(&error, Utc::now())
        .map_err(|e| e.to_string())?;
    Ok((TerminalOutcome::Failed { error }, event))
}

/// Whether a terminal transaction whose answer was lost was committed anyway (the connection
/// can break after the `COMMIT` left).
#[derive(Debug, Clone, PartialEq, Eq)]
enum CommitCheck {
    /// It was: the event's outbox row.
    Committed(RecordedEvent),
    /// It was not: nothing of it exists.
    NotCommitted,
    /// The database did not answer within a few seconds.
    Unknown,
}

/// Asks the database, a few times, whether the event `ce_id` was recorded.
async fn commit_check(core: &JobCore, ce_id: &str) -> CommitCheck {
    let mut wait = Duration::from_millis(250);
    for _ in 0..5 {
        match core.ports.jobs.recorded_event(ce_id).await {
            Ok(Some(recorded)) => return CommitCheck::Committed(recorded),
            Ok(None) => return CommitCheck::NotCommitted,
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    CommitCheck::Unknown
}

/// Publishes a just-recorded terminal event after the events of the executions its record
/// ended (their outbox rows leased to `publisher`); the repairer retries what does not land.
async fn publish(
    core: &JobCore,
    executions: Vec<PendingEvent>,
    outbox_id: RowId,
    job_id: Uuid,
    event: OutboundEvent,
    publisher: &str,
) {
    let publishing = Instant::now();
    let mut pending = executions;
    pending.push(PendingEvent {
        id: outbox_id,
        job_id,
        sink: outbox::Sink::Amqp,
        topic: None,
        event,
        attempts: 1,
        created_at: Utc::now(),
    });
    core.publish(publisher, &pending).await;
    metrics::stage("publish", publishing.elapsed());
}
