//! The simulated state database's tables — job rows, outbox rows, and the log of every write —
//! and the writes the machine judged: a control step's commit and a terminal record (what
//! `outbox`'s `control.rs` and `terminal.rs` do around [`lifecycle::step`]).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, TerminalStatus};
use contract::lifecycle::{self, Event, JobState, JobStatus, Refusal, Step, Then, Transition};
use outbox::{Controlled, EndCancel, PendingEvent, Recorded, TerminalRecord};
use tokio::time::Instant;
use uuid::Uuid;

/// A job row.
#[derive(Debug, Clone)]
pub struct Row {
    pub state: JobState,
    pub owner: Option<String>,
    /// `lease_expires_at` (paused clock); `None` once the job ended.
    pub lease: Option<Instant>,
    pub attempts: u32,
    pub first_started: Option<Instant>,
    pub updated: Instant,
    pub digest: Option<[u8; 32]>,
    /// The terminal status a deletion started from (`status_before_deletion`).
    pub before_deletion: Option<JobStatus>,
    /// `object_left`: an object may be under the key of a job that did not keep it.
    pub object_left: bool,
}

/// An outbox row.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub id: i64,
    pub job_id: Uuid,
    pub event: OutboundEvent,
    pub leased_by: Option<String>,
    pub lease_until: Instant,
    pub attempts: u32,
    pub published: bool,
}

/// One persisted transition: the state before (`None`: no row), the step the machine judged,
/// the state after.
#[derive(Debug, Clone)]
pub struct Logged {
    pub job_id: Uuid,
    pub from: Option<JobState>,
    pub step: Step,
    pub to: JobState,
    pub events: Vec<Event>,
    /// When (paused clock).
    pub at: Instant,
}

#[derive(Default)]
pub struct World {
    pub jobs: BTreeMap<Uuid, Row>,
    pub outbox: Vec<OutboxRow>,
    pub log: Vec<Logged>,
}

/// The wall-clock `lease_expires_at` the core compares with `Utc::now()`.
pub(super) fn wall(at: Instant) -> chrono::DateTime<Utc> {
    let now = Instant::now();
    let ahead = at.saturating_duration_since(now);
    let behind = now.saturating_duration_since(at);
    Utc::now() + chrono::Duration::from_std(ahead).unwrap_or_default()
        - chrono::Duration::from_std(behind).unwrap_or_default()
}

pub(super) fn lapsed(row: &Row) -> bool {
    row.lease.is_some_and(|at| at <= Instant::now())
}

pub(super) fn new_row(state: JobState) -> Row {
    Row {
        state,
        owner: None,
        lease: None,
        attempts: 0,
        first_started: None,
        updated: Instant::now(),
        digest: None,
        before_deletion: None,
        object_left: false,
    }
}

impl World {
    /// Writes a transition the machine gave (`write` and `commit` of `control.rs`) with the
    /// outbox rows of its events, leased to `publisher`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit(
        &mut self,
        job_id: Uuid,
        from: Option<JobState>,
        step: Step,
        transition: Transition,
        source: &str,
        publisher: &str,
        lease: Duration,
    ) -> Controlled {
        let to = transition.to;
        let row = self.jobs.get_mut(&job_id).expect("a row to commit to");
        if matches!(
            to.status,
            JobStatus::DeletionInProgress | JobStatus::Deleted
        ) && row.before_deletion.is_none()
        {
            row.before_deletion = if transition.events.contains(&Event::Canceled) {
                Some(JobStatus::Canceled)
            } else if row.state.status.is_terminal() {
                Some(row.state.status)
            } else {
                None
            };
        }
        row.state = to;
        row.updated = Instant::now();
        if transition.then == Then::DiscardObject {
            row.object_left = true;
        } else if to.status == JobStatus::Deleted {
            row.object_left = false;
        }
        if matches!(
            to.status,
            JobStatus::Canceled | JobStatus::DeletionInProgress | JobStatus::Deleted
        ) {
            row.lease = None;
        }
        self.log.push(Logged {
            job_id,
            from,
            step,
            to,
            events: transition.events.clone(),
            at: Instant::now(),
        });
        let mut pending = Vec::new();
        for event in &transition.events {
            let outbound = OutboundEvent {
                attributes: CloudEventAttributes::new(*event, job_id, source, None, Utc::now()),
                request_id: None,
                body: b"{}".to_vec(),
            };
            if let Some(row) = self.insert_leased(job_id, outbound, publisher, lease) {
                pending.push(row);
            }
        }
        Controlled::Done {
            transition,
            events: pending,
            canceled: None,
        }
    }

    /// `insert_leased`: a ce-id already recorded is not recorded again.
    fn insert_leased(
        &mut self,
        job_id: Uuid,
        event: OutboundEvent,
        publisher: &str,
        lease: Duration,
    ) -> Option<PendingEvent> {
        if self
            .outbox
            .iter()
            .any(|row| row.event.ce_id() == event.ce_id())
        {
            return None;
        }
        let id = self.outbox.len() as i64 + 1;
        self.outbox.push(OutboxRow {
            id,
            job_id,
            event: event.clone(),
            leased_by: Some(publisher.to_owned()),
            lease_until: Instant::now() + lease,
            attempts: 1,
            published: false,
        });
        Some(pending(id, job_id, event, 1))
    }
}

pub fn pending(id: i64, job_id: Uuid, event: OutboundEvent, attempts: u32) -> PendingEvent {
    PendingEvent {
        id: outbox::RowId::Serial(id),
        job_id,
        sink: outbox::Sink::Amqp,
        topic: None,
        event,
        attempts,
        created_at: Utc::now(),
    }
}

impl World {
    /// `record_terminal` and its `refusal` (`terminal.rs`): the machine decides what the
    /// outcome does, once the caller is known to be entitled to end the job.
    pub(super) fn record_terminal(&mut self, record: &TerminalRecord<'_>) -> Recorded {
        let status = record.outcome.status();
        let step = match status {
            TerminalStatus::Completed => Step::Completed,
            TerminalStatus::Failed => Step::Failed,
        };
        let existing = self.jobs.get(&record.job_id).cloned();
        let (row, from) = match (existing, record.owner) {
            (Some(row), _) => {
                let state = row.state;
                (row, Some(state))
            }
            (None, Some(_)) => return Recorded::LostClaim,
            // A job failed before it was ever claimed: its row is created pending.
            (None, None) => (new_row(JobState::new(JobStatus::Pending)), None),
        };
        let state = row.state;
        let entitled = match record.owner {
            Some(owner) => {
                row.owner.as_deref() == Some(owner)
                    && matches!(
                        state.status,
                        JobStatus::Processing | JobStatus::CancellationInProgress
                    )
            }
            None => state.status == JobStatus::Pending || lapsed(&row),
        };
        let ongoing = matches!(
            state.status,
            JobStatus::Pending | JobStatus::Processing | JobStatus::CancellationInProgress
        );
        let transition = match lifecycle::step(Some(state), step) {
            Err(Refusal::InvalidTransition { from }) if !ongoing => {
                return Recorded::AlreadyTerminal { status: from }
            }
            Err(_) => return Recorded::LostClaim,
            Ok(_) if !entitled => return Recorded::LostClaim,
            // The cancel is ended instead, under the same lock (`cancel_instead`).
            Ok(transition) if transition.events.contains(&Event::Canceled) => {
                return self.cancel_instead(record);
            }
            Ok(transition) => transition,
        };
        assert_eq!(
            transition.to.status.as_str(),
            status.as_str(),
            "the machine ends a {status} outcome of a {} job otherwise",
            state.status
        );
        if self
            .outbox
            .iter()
            .any(|o| o.event.ce_id() == record.event.ce_id())
        {
            return Recorded::DuplicateEvent {
                ce_id: record.event.ce_id().to_owned(),
            };
        }
        let mut row = row;
        row.state = transition.to;
        row.lease = None;
        row.object_left = record.leaves_object && status == TerminalStatus::Failed;
        row.updated = Instant::now();
        self.jobs.insert(record.job_id, row);
        self.log.push(Logged {
            job_id: record.job_id,
            from,
            step,
            to: transition.to,
            events: transition.events,
            at: Instant::now(),
        });
        let inserted = self
            .insert_leased(
                record.job_id,
                record.event.clone(),
                record.publisher,
                record.lease,
            )
            .expect("checked above");
        Recorded::Inserted {
            outbox_id: inserted.id,
            executions: Vec::new(),
        }
    }
}

impl World {
    /// `end_cancel_in` (`control.rs`): ends a cancel that waits for the job's message, whose
    /// owner is gone, or (with `owner`) that the owner's run ends itself.
    pub(super) fn end_cancel(&mut self, request: &EndCancel<'_>) -> Controlled {
        match self.jobs.get(&request.job_id).cloned() {
            None => Controlled::Refused(Refusal::Unknown),
            Some(row) => {
                let state = row.state;
                let waiting = state.status == JobStatus::Pending && state.cancel_requested;
                let canceling = state.status == JobStatus::CancellationInProgress;
                let orphaned = canceling && lapsed(&row);
                let own =
                    canceling && request.owner.is_some() && row.owner.as_deref() == request.owner;
                let step = if own { Step::Stopped } else { Step::Claim };
                match lifecycle::step(Some(state), step) {
                    _ if !(waiting || orphaned || own) => {
                        Controlled::Refused(Refusal::InvalidTransition { from: state.status })
                    }
                    Err(refusal) => Controlled::Refused(refusal),
                    Ok(transition) => self.commit(
                        request.job_id,
                        Some(state),
                        step,
                        transition,
                        request.source,
                        request.publisher,
                        request.lease,
                    ),
                }
            }
        }
    }

    /// `cancel_instead` (`terminal.rs`): a terminal record the job's cancel wins ends the
    /// cancel instead, in the same transaction.
    fn cancel_instead(&mut self, record: &TerminalRecord<'_>) -> Recorded {
        let request = EndCancel {
            job_id: record.job_id,
            tenant: record.tenant,
            metadata: record.metadata,
            request_id: record.event.request_id.as_deref(),
            source: &record.event.attributes.source,
            publisher: record.publisher,
            lease: record.lease,
            owner: record.owner,
            executions: record.executions,
            traceparent: None,
        };
        match self.end_cancel(&request) {
            Controlled::Done {
                transition,
                events,
                canceled,
            } => Recorded::Canceled {
                transition,
                events,
                canceled,
            },
            Controlled::Refused(_) => Recorded::LostClaim,
        }
    }
}
