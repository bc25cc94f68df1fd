//! A delivery of a job whose cancel came first: ended without a run (its events delivered, a
//! dead owner's object deleted), or claimed again when the job moved on meanwhile.

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent};
use contract::lifecycle::{Event, JobState, JobStatus, Refusal, Then, Transition};
use outbox::{Claim, Controlled, PendingEvent};

use super::{Bench, Disposition, Requeue};

fn pending_event(job_id: uuid::Uuid, event: Event, id: i64) -> PendingEvent {
    PendingEvent {
        sink: outbox::Sink::Amqp,
        topic: None,
        id: outbox::RowId::Serial(id),
        job_id,
        event: OutboundEvent {
            attributes: CloudEventAttributes::new(event, job_id, "//test", None, Utc::now()),
            request_id: None,
            body: b"{}".to_vec(),
        },
        attempts: 1,
        created_at: Utc::now(),
    }
}

fn done(to: JobStatus, then: Then, events: Vec<PendingEvent>) -> Controlled {
    Controlled::Done {
        transition: Transition {
            to: JobState::new(to),
            events: events.iter().map(|_| Event::Canceled).collect(),
            then,
        },
        events,
        canceled: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_canceled_before_its_message_is_acked_unrun_with_both_events() {
    let bench = Bench::new();
    let message = bench.job();
    let events = vec![
        pending_event(message.job_id, Event::CancellationInProgress, 1),
        pending_event(message.job_id, Event::Canceled, 2),
    ];
    {
        let mut state = bench.jobs.state();
        state.claims.push_back(Ok(Claim::CancelRequested));
        state
            .cancels
            .push_back(Ok(done(JobStatus::Canceled, Then::Nothing, events)));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.extract.state().calls, 0, "never run");
    let delivered: Vec<_> = bench
        .events
        .delivered()
        .into_iter()
        .map(|(_, ce_id, _)| ce_id)
        .collect();
    assert_eq!(
        delivered,
        [
            format!("fetcher.job.cancellation_in_progress.{}", message.job_id),
            format!("fetcher.job.canceled.{}", message.job_id),
        ]
    );
    assert!(bench.objects.state().deleted.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cancel_its_owner_died_in_is_ended_and_its_object_deleted() {
    let bench = Bench::new();
    let message = bench.job();
    let key = bench.key_of(message.job_id);
    bench.objects.state().stored.insert(key.clone(), vec![1]);
    {
        let mut state = bench.jobs.state();
        state.claims.push_back(Ok(Claim::CancelRequested));
        state.cancels.push_back(Ok(done(
            JobStatus::Canceled,
            Then::DiscardObject,
            vec![pending_event(message.job_id, Event::Canceled, 3)],
        )));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert_eq!(bench.events.delivered().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_forced_delete_waiting_on_the_cancel_deletes_and_records_the_deletion() {
    let bench = Bench::new();
    let message = bench.job();
    let key = bench.key_of(message.job_id);
    {
        let mut state = bench.jobs.state();
        state.claims.push_back(Ok(Claim::CancelRequested));
        state.cancels.push_back(Ok(done(
            JobStatus::DeletionInProgress,
            Then::DeleteObject,
            vec![pending_event(message.job_id, Event::DeletionInProgress, 4)],
        )));
        state.deletions.push_back(Ok(done(
            JobStatus::Deleted,
            Then::Nothing,
            vec![pending_event(message.job_id, Event::Deleted, 5)],
        )));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert_eq!(bench.jobs.state().deleted_results, vec![true]);
    assert_eq!(bench.events.delivered().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_that_moved_on_meanwhile_is_claimed_again() {
    let bench = Bench::new();
    {
        let mut state = bench.jobs.state();
        state.claims.push_back(Ok(Claim::CancelRequested));
        state
            .cancels
            .push_back(Ok(Controlled::Refused(Refusal::InvalidTransition {
                from: JobStatus::Processing,
            })));
    }
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.jobs.state().claimed.len(), 2);
    assert_eq!(bench.extract.state().calls, 1, "the second claim ran it");
}

#[tokio::test(start_paused = true)]
async fn a_cancel_the_state_database_cannot_end_gives_the_message_back() {
    let bench = Bench::new();
    {
        let mut state = bench.jobs.state();
        state.claims.push_back(Ok(Claim::CancelRequested));
        state.cancels.push_back(Err(super::fakes::db_down()));
    }
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Retry(Requeue::StateDatabase)
    );
    assert_eq!(bench.extract.state().calls, 0);
}

pub(super) fn canceled_discarding(job_id: uuid::Uuid) -> Controlled {
    done(
        JobStatus::Canceled,
        Then::DiscardObject,
        vec![pending_event(job_id, Event::Canceled, 9)],
    )
}

#[tokio::test(start_paused = true)]
async fn a_forced_cancel_stops_the_extraction_and_stores_nothing() {
    let bench = Bench::new();
    let message = bench.job();
    bench.extract.state().takes = super::LEASE * 4;
    {
        let mut state = bench.jobs.state();
        state
            .renewals
            .push_back(Ok(outbox::Lease::Canceling { force: true }));
        state
            .cancels
            .push_back(Ok(canceled_discarding(message.job_id)));
    }
    let began = tokio::time::Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(
        began.elapsed() < super::LEASE,
        "stopped at the heartbeat: {:?}",
        began.elapsed()
    );
    assert_eq!(bench.objects.state().put_calls, 0);
    assert_eq!(
        bench.objects.state().aborted,
        1,
        "the upload begun is aborted"
    );
    assert_eq!(
        bench.objects.state().deleted,
        vec![bench.key_of(message.job_id)]
    );
    assert!(
        bench.jobs.state().written.is_empty(),
        "neither completed nor failed"
    );
    assert_eq!(
        bench.events.delivered()[0].1,
        format!("fetcher.job.canceled.{}", message.job_id)
    );
}

#[tokio::test(start_paused = true)]
async fn a_graceful_cancel_lets_the_statements_end_then_stores_nothing() {
    let bench = Bench::new();
    let message = bench.job();
    {
        let mut state = bench.jobs.state();
        // Seen by the check before the write: the extraction had already ended.
        state
            .renewals
            .push_back(Ok(outbox::Lease::Canceling { force: false }));
        state
            .cancels
            .push_back(Ok(canceled_discarding(message.job_id)));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(
        bench.extract.state().calls,
        1,
        "the extraction ran to its end"
    );
    assert_eq!(bench.objects.state().put_calls, 0, "nothing stored");
    assert!(bench.jobs.state().written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cancel_that_wins_the_race_with_the_commit_leaves_no_object() {
    let bench = Bench::new();
    let message = bench.job();
    {
        let mut state = bench.jobs.state();
        // The store ends the cancel in the record's own transaction.
        let Controlled::Done {
            transition,
            events,
            canceled,
        } = canceled_discarding(message.job_id)
        else {
            unreachable!()
        };
        state.records.push_back(Ok(outbox::Recorded::Canceled {
            transition,
            events,
            canceled,
        }));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().put_calls, 1, "the run had stored it");
    assert!(
        bench.objects.state().stored.is_empty(),
        "the loser's object is gone"
    );
    let delivered: Vec<_> = bench
        .events
        .delivered()
        .into_iter()
        .map(|(_, id, _)| id)
        .collect();
    assert_eq!(
        delivered,
        [format!("fetcher.job.canceled.{}", message.job_id)]
    );
    assert!(
        bench.jobs.state().cancel_executions.is_empty(),
        "no second transaction ends the cancel"
    );
}
