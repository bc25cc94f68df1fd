//! The sweeper: a job whose Worker was lost fails with its own reason, loses any object its
//! lost run stored, and its event goes out; a job a redelivery took over is left alone.

use chrono::Utc;
use contract::event::TerminalStatus;
use outbox::{ExpiredJob, Recorded, WORKER_LOST};
use serde_json::Map;
use uuid::Uuid;

use super::fakes::db_down;
use super::Bench;
use crate::job::Sweeper;

fn expired(job_id: Uuid) -> ExpiredJob {
    ExpiredJob {
        job_id,
        tenant_id: None,
        request_id: None,
        metadata: Map::new(),
        owner: Some("w0/dead".into()),
        attempts: 1,
        lease_expires_at: Utc::now(),
        canceling: false,
    }
}

fn sweeper(bench: Bench) -> (Sweeper, Bench) {
    let core = std::sync::Arc::new(crate::job::JobCore::new(
        bench.core.ports.clone(),
        bench.core.settings.clone(),
    ));
    let sweeper = Sweeper {
        core,
        interval: super::LEASE,
        grace: super::LEASE * 2,
    };
    (sweeper, bench)
}

#[tokio::test(start_paused = true)]
async fn a_lost_job_fails_loses_its_object_and_is_published() {
    let (sweeper, bench) = sweeper(Bench::new());
    let job_id = Uuid::new_v4();
    let key = bench.key_of(job_id);
    bench.objects.state().stored.insert(key.clone(), vec![1]);
    bench.jobs.state().expired.push(expired(job_id));

    assert_eq!(sweeper.sweep_once().await.expect("sweep"), 1);
    let state = bench.jobs.state();
    let written = &state.written[0];
    assert_eq!(written.status, TerminalStatus::Failed);
    assert_eq!(written.error.as_deref(), Some(WORKER_LOST));
    assert_eq!(written.owner, None);
    assert_eq!(written.publisher, "w1/sweeper");
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert_eq!(
        bench.events.delivered(),
        vec![(
            "w1/sweeper".into(),
            format!("fetcher.job.failed.{job_id}"),
            1
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_a_redelivery_took_over_is_left_alone() {
    let (sweeper, bench) = sweeper(Bench::new());
    let job_id = Uuid::new_v4();
    {
        let mut state = bench.jobs.state();
        state.expired.push(expired(job_id));
        state.records.push_back(Ok(Recorded::LostClaim));
    }
    assert_eq!(sweeper.sweep_once().await.expect("sweep"), 0);
    assert!(bench.objects.state().deleted.is_empty());
    assert!(bench.events.delivered().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_pass_the_state_database_interrupts_is_an_error() {
    let (sweeper, bench) = sweeper(Bench::new());
    {
        let mut state = bench.jobs.state();
        state.expired.push(expired(Uuid::new_v4()));
        state.records.push_back(Err(db_down()));
    }
    assert!(sweeper.sweep_once().await.is_err());
    assert!(bench.events.delivered().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cancel_whose_owner_died_ends_canceled_and_loses_its_object() {
    use contract::lifecycle::{Event, JobState, JobStatus, Then, Transition};
    let (sweeper, bench) = sweeper(Bench::new());
    let job_id = Uuid::new_v4();
    let key = bench.key_of(job_id);
    bench.objects.state().stored.insert(key.clone(), vec![1]);
    {
        let mut state = bench.jobs.state();
        state.expired.push(ExpiredJob {
            canceling: true,
            ..expired(job_id)
        });
        state.cancels.push_back(Ok(outbox::Controlled::Done {
            transition: Transition {
                to: JobState::new(JobStatus::Canceled),
                events: vec![Event::Canceled],
                then: Then::DiscardObject,
            },
            events: Vec::new(),
            canceled: None,
        }));
    }
    assert_eq!(sweeper.sweep_once().await.expect("sweep"), 1);
    assert!(bench.jobs.state().written.is_empty(), "not failed");
    assert_eq!(bench.objects.state().deleted, vec![key]);
}

#[tokio::test(start_paused = true)]
async fn a_deletion_left_in_progress_is_finished_once_the_store_answers() {
    use contract::lifecycle::{JobState, JobStatus, Then, Transition};
    let (sweeper, bench) = sweeper(Bench::new());
    let job_id = Uuid::new_v4();
    let key = bench.key_of(job_id);
    bench.objects.state().stored.insert(key.clone(), vec![1]);
    bench.jobs.state().deleting.push((job_id, None));
    bench
        .jobs
        .state()
        .deletions
        .push_back(Ok(outbox::Controlled::Done {
            transition: Transition {
                to: JobState::new(JobStatus::Deleted),
                events: vec![contract::lifecycle::Event::Deleted],
                then: Then::Nothing,
            },
            events: Vec::new(),
            canceled: None,
        }));
    assert_eq!(sweeper.sweep_once().await.expect("sweep"), 1);
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert_eq!(bench.jobs.state().deleted_results, vec![true]);
}
