//! The store's claims and terminal records against the lifecycle machine: every stored state
//! the machine can reach, and every step a delivery or a run takes on it (a claim, a
//! completed or failed outcome), give the store's answer the machine's ([`lifecycle::step`]).

use std::collections::{BTreeSet, HashSet};

use contract::lifecycle::{self, Event, JobState, JobStatus, Refusal, Step, Then, Transition};
use outbox::{Claim, Controlled, EndCancel, Recorded, Store};
use uuid::Uuid;

use crate::support::{claim_request, completed, failed, metadata, record, TestDb, LONG, SOURCE};

/// Every step there is (the control requests' both ways).
const STEPS: [Step; 9] = [
    Step::Cancel { force: false },
    Step::Cancel { force: true },
    Step::Delete { force: false },
    Step::Delete { force: true },
    Step::Claim,
    Step::Completed,
    Step::Failed,
    Step::Stopped,
    Step::ObjectDeleted,
];

/// The states the machine reaches from a job never seen, by any sequence of steps.
fn reachable() -> Vec<JobState> {
    let mut seen = HashSet::new();
    let mut next: Vec<JobState> = STEPS
        .iter()
        .filter_map(|step| lifecycle::step(None, *step).ok())
        .map(|transition| transition.to)
        .collect();
    while let Some(state) = next.pop() {
        if seen.insert(state) {
            next.extend(
                STEPS
                    .iter()
                    .filter_map(|step| lifecycle::step(Some(state), *step).ok())
                    .map(|transition| transition.to),
            );
        }
    }
    let mut states: Vec<_> = seen.into_iter().collect();
    states.sort_by_key(|s| format!("{s:?}"));
    states
}

/// Who takes a step on the stored job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// A delivery of the job's message; an earlier owner's lease lapsed.
    Delivery,
    /// The run that holds the job's claim (its lease live), ending with an outcome.
    Run,
    /// A delivery that fails the job unrun, or the sweeper, holding no claim; an earlier
    /// owner's lease lapsed.
    Unclaimed,
}

const RUN_OWNER: &str = "run";

/// Stores `state` as a row of a new job, as the caller finds it.
async fn store_state(store: &Store, state: JobState, caller: Caller) -> Uuid {
    use JobStatus as S;
    let job_id = Uuid::new_v4();
    let running = matches!(state.status, S::Processing | S::CancellationInProgress);
    let (owner, lease) = match (running, caller) {
        (false, _) => (None, None),
        (true, Caller::Run) => (Some(RUN_OWNER), Some("now() + interval '1 hour'")),
        (true, _) => (Some("gone"), Some("now() - interval '1 minute'")),
    };
    let ended = !matches!(
        state.status,
        S::Pending | S::Processing | S::CancellationInProgress
    );
    let completed = state.status == S::Completed;
    let deleting = matches!(state.status, S::DeletionInProgress | S::Deleted);
    let sql = format!(
        "INSERT INTO jobs (job_id, status, cancel_requested, force_canceled, delete_requested,
                           owner, lease_expires_at, finished_at, result_path, result_hmac,
                           status_before_deletion, deleted_at, attempts)
         VALUES ($1, $2, $3, $4, $5, $6, {lease}, {finished}, {path}, {path}, {before},
                 {deleted}, {attempts})",
        lease = lease.unwrap_or("NULL"),
        finished = if ended { "now()" } else { "NULL" },
        path = if completed { "'result'" } else { "NULL" },
        before = if deleting { "'canceled'" } else { "NULL" },
        deleted = if state.status == S::Deleted {
            "now()"
        } else {
            "NULL"
        },
        attempts = if state.status == S::Pending { 0 } else { 1 },
    );
    sqlx::query(&sql)
        .bind(job_id)
        .bind(state.status.as_str())
        .bind(state.cancel_requested)
        .bind(state.force)
        .bind(state.delete_requested)
        .bind(owner)
        .execute(store.pool())
        .await
        .unwrap_or_else(|e| panic!("storing {state:?}: {e}"));
    job_id
}

/// The job's stored state.
async fn stored(store: &Store, job_id: Uuid) -> Option<JobState> {
    let row: Option<(String, bool, bool, bool)> = sqlx::query_as(
        "SELECT status, cancel_requested, force_canceled, delete_requested
         FROM jobs WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_optional(store.pool())
    .await
    .expect("job row");
    row.map(
        |(status, cancel_requested, force, delete_requested)| JobState {
            status: status.parse().expect("a status"),
            cancel_requested,
            force,
            delete_requested,
        },
    )
}

/// A step's effect, as the store and the machine both can say it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// The job runs (the caller holds it), now in this state.
    Run(JobState),
    /// The outcome is recorded with its one event; the job is now in this state.
    Ended(JobState),
    /// The job's cancel wins: ended (by the terminal record itself, or through
    /// [`Store::end_cancel`] for a delivery) with this transition.
    Canceled(Transition),
    /// Nothing changes: the job had ended (or is deleting, or deleted).
    AlreadyEnded(JobStatus),
    /// Nothing changes: the caller may not take this step on this job.
    Refused,
}

/// The machine's answer.
fn machine(state: Option<JobState>, step: Step) -> Answer {
    let ongoing = |status| {
        matches!(
            status,
            JobStatus::Pending | JobStatus::Processing | JobStatus::CancellationInProgress
        )
    };
    match lifecycle::step(state, step) {
        Ok(transition) if transition.events.contains(&Event::Canceled) => {
            Answer::Canceled(transition)
        }
        Ok(transition) if transition.then == Then::Run => Answer::Run(transition.to),
        Ok(transition) => Answer::Ended(transition.to),
        Err(Refusal::InvalidTransition { from }) if !ongoing(from) => Answer::AlreadyEnded(from),
        Err(_) => Answer::Refused,
    }
}

/// The store's answer, a cancel that wins ended as the Worker ends it.
async fn store_answer(store: &Store, job_id: Uuid, caller: Caller, step: Step) -> Answer {
    let metadata = metadata();
    let owner = (caller == Caller::Run).then_some(RUN_OWNER);
    let canceling = match step {
        Step::Claim => {
            let claim = store
                .claim(&claim_request(job_id, "delivery", LONG, &metadata))
                .await
                .expect("claim");
            match claim {
                Claim::Acquired { .. } => {
                    return Answer::Run(stored(store, job_id).await.expect("claimed row"))
                }
                Claim::Terminal { status, .. } => return Answer::AlreadyEnded(status),
                Claim::CancelRequested => true,
                Claim::Busy { .. } | Claim::OtherTenant => return Answer::Refused,
                Claim::Unknown => panic!("the PostgreSQL store creates the job's row"),
            }
        }
        Step::Completed | Step::Failed => {
            let outcome = if step == Step::Completed {
                completed(job_id)
            } else {
                failed(job_id, "boom")
            };
            let expected = outcome.0.status();
            match record(store, job_id, owner, outcome, "publisher", LONG).await {
                Recorded::Inserted { .. } => {
                    let state = stored(store, job_id).await.expect("recorded row");
                    let events: Vec<String> = sqlx::query_scalar(
                        "SELECT attributes->>'status' FROM outbox WHERE job_id = $1 ORDER BY id",
                    )
                    .bind(job_id)
                    .fetch_all(store.pool())
                    .await
                    .expect("outbox rows");
                    assert_eq!(events, [expected.as_str()], "{step:?}: one event");
                    assert_eq!(state.status.as_str(), expected.as_str());
                    return Answer::Ended(state);
                }
                Recorded::AlreadyTerminal { status } => return Answer::AlreadyEnded(status),
                // The record ended the cancel instead, in its own transaction.
                Recorded::Canceled { transition, .. } => {
                    let state = stored(store, job_id).await.expect("canceled row");
                    assert_eq!(state, transition.to, "the stored state is the transition's");
                    return Answer::Canceled(transition);
                }
                Recorded::LostClaim | Recorded::OtherTenant | Recorded::DuplicateEvent { .. } => {
                    return Answer::Refused
                }
            }
        }
        other => unreachable!("not a step of claims and terminal records: {other:?}"),
    };
    assert!(canceling);
    let ended = store
        .end_cancel(&EndCancel {
            job_id,
            tenant: None,
            metadata: &metadata,
            request_id: Some("req-1"),
            source: SOURCE,
            publisher: "publisher",
            lease: LONG,
            owner,
            executions: &[],
            traceparent: None,
        })
        .await
        .expect("end cancel");
    match ended {
        Controlled::Done { transition, .. } => {
            let state = stored(store, job_id).await.expect("canceled row");
            assert_eq!(state, transition.to, "the stored state is the transition's");
            Answer::Canceled(transition)
        }
        Controlled::Refused(_) => Answer::Refused,
    }
}

#[tokio::test]
async fn claims_and_terminal_records_answer_as_the_machine_for_every_reachable_state() {
    let db = TestDb::migrated().await;
    let states = reachable();
    // Every status is reachable, some with more than one set of flags.
    let statuses: BTreeSet<_> = states.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(statuses.len(), JobStatus::ALL.len(), "{statuses:?}");

    let pairs = [
        (Caller::Delivery, Step::Claim),
        (Caller::Run, Step::Completed),
        (Caller::Run, Step::Failed),
        (Caller::Unclaimed, Step::Failed),
    ];
    let mut disagreements = Vec::new();
    let mut compared = 0;
    // A job never seen: no row, for the callers that may create one.
    for (caller, step) in [
        (Caller::Delivery, Step::Claim),
        (Caller::Unclaimed, Step::Failed),
    ] {
        let job_id = Uuid::new_v4();
        let expected = match machine(None, step) {
            // Its row is created by the step, with the machine's new state.
            answer @ (Answer::Run(_) | Answer::Ended(_)) => answer,
            other => panic!("{step:?} of an unseen job: {other:?}"),
        };
        let got = store_answer(&db.store, job_id, caller, step).await;
        compared += 1;
        if got != expected {
            disagreements.push(format!(
                "unseen, {caller:?} {step:?}: store {got:?}, machine {expected:?}"
            ));
        }
    }
    for state in &states {
        for (caller, step) in pairs {
            // A run holds only a job that runs (or that ended under it); a pending job is
            // held by no one.
            if caller == Caller::Run && state.status == JobStatus::Pending {
                continue;
            }
            let job_id = store_state(&db.store, *state, caller).await;
            let expected = machine(Some(*state), step);
            let got = store_answer(&db.store, job_id, caller, step).await;
            compared += 1;
            if got != expected {
                disagreements.push(format!(
                    "{state:?}, {caller:?} {step:?}: store {got:?}, machine {expected:?}"
                ));
            }
        }
    }
    assert!(compared > 40, "only {compared} pairs compared");
    assert!(
        disagreements.is_empty(),
        "{} of {compared} disagree:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    db.drop().await;
}
