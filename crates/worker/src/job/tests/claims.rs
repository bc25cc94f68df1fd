//! Taking the job: a busy one (waited for, taken over, or left to its live owner), one already
//! finished (published or not), another tenant's, and a state database that fails the claim.

use std::time::Duration;

use chrono::Utc;
use contract::event::TerminalStatus;
use contract::lifecycle::JobStatus;
use outbox::{Claim, OutboxError, PendingEvent};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fakes::db_down;
use super::{Bench, Disposition, Requeue};
use crate::job::claim::BUSY_WAIT_LIMIT;

fn busy_for(secs: i64) -> Claim {
    Claim::Busy {
        lease_expires_at: Utc::now() + chrono::Duration::seconds(secs),
    }
}

#[tokio::test(start_paused = true)]
async fn a_busy_job_is_taken_over_once_its_lease_lapses() {
    let bench = Bench::new();
    bench.jobs.state().claims.push_back(Ok(busy_for(10)));
    let message = bench.job();
    let began = Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(
        began.elapsed() >= Duration::from_secs(10),
        "waited for the lease"
    );
    let state = bench.jobs.state();
    assert_eq!(state.claimed.len(), 2);
    assert_ne!(
        state.claimed[0], state.claimed[1],
        "each attempt has its own owner"
    );
    assert_eq!(state.written[0].status, TerminalStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn a_job_its_live_owner_keeps_renewing_is_acked_as_a_duplicate() {
    let bench = Bench::new();
    bench.jobs.state().claim_default = busy_for(10);
    let message = bench.job();
    let began = Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(began.elapsed() > BUSY_WAIT_LIMIT);
    assert!(bench.jobs.state().written.is_empty());
    assert_eq!(bench.extract.state().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn a_stop_while_waiting_on_a_busy_job_gives_the_message_back() {
    let bench = Bench::new();
    bench.jobs.state().claim_default = busy_for(10);
    let message = bench.job();
    let stop = CancellationToken::new();
    let stopping = tokio::spawn({
        let stop = stop.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(25)).await;
            stop.cancel();
        }
    });
    assert_eq!(
        bench.deliver_until(&message, &stop).await,
        Disposition::Retry(Requeue::Shutdown)
    );
    stopping.await.expect("stopper");
    assert!(bench.jobs.state().written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_finished_and_published_job_is_acked_without_running() {
    let bench = Bench::new();
    bench.jobs.state().claims.push_back(Ok(Claim::Terminal {
        status: JobStatus::Completed,
        event_published: true,
    }));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.extract.state().calls, 0);
    assert!(bench.jobs.state().leased_for.is_empty());
    assert!(bench.events.delivered().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_finished_job_whose_event_is_unpublished_is_republished_not_rerun() {
    let bench = Bench::new();
    let message = bench.job();
    let event = contract::event::OutboundEvent {
        attributes: contract::event::CloudEventAttributes::new(
            TerminalStatus::Completed,
            message.job_id,
            "//test/fetcher",
            None,
            Utc::now(),
        ),
        request_id: None,
        body: b"{}".to_vec(),
    };
    {
        let mut state = bench.jobs.state();
        state.claims.push_back(Ok(Claim::Terminal {
            status: JobStatus::Completed,
            event_published: false,
        }));
        state.unpublished.push(PendingEvent {
            sink: outbox::Sink::Amqp,
            topic: None,
            id: outbox::RowId::Serial(9),
            job_id: message.job_id,
            event,
            attempts: 2,
            created_at: Utc::now(),
        });
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.extract.state().calls, 0);
    assert_eq!(bench.jobs.state().leased_for, vec![message.job_id]);
    let delivered = bench.events.delivered();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].1, message.completed_ce_id());
}

#[tokio::test(start_paused = true)]
async fn a_job_the_manager_never_created_is_dead_lettered_unrun() {
    let bench = Bench::new();
    bench.jobs.state().claims.push_back(Ok(Claim::Unknown));
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::DeadLetter("job_not_found")
    );
    assert!(bench.jobs.state().written.is_empty());
    assert_eq!(bench.extract.state().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn another_tenants_job_is_dead_lettered() {
    let bench = Bench::new();
    bench.jobs.state().claims.push_back(Ok(Claim::OtherTenant));
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::DeadLetter("tenant_mismatch")
    );
    assert!(bench.jobs.state().written.is_empty());
    assert_eq!(bench.extract.state().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_state_database_at_the_claim_gives_the_message_back() {
    let bench = Bench::new();
    bench.jobs.state().claims.push_back(Err(db_down()));
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Retry(Requeue::StateDatabase)
    );
    assert!(bench.jobs.state().written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_job_the_state_database_refuses_for_good_fails_unrun() {
    let bench = Bench::new();
    bench
        .jobs
        .state()
        .claims
        .push_back(Err(OutboxError::Constraint {
            step: "claiming a job",
            constraint: "jobs_metadata_check".into(),
            detail: "value too long".into(),
        }));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let state = bench.jobs.state();
    assert_eq!(state.written.len(), 1);
    assert_eq!(state.written[0].owner, None);
    assert!(state.written[0]
        .error
        .as_deref()
        .unwrap()
        .starts_with("the job cannot be recorded"));
    assert_eq!(bench.extract.state().calls, 0);
}
