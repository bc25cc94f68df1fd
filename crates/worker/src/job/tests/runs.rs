//! A claimed run: completed, failed, interrupted, its claim lost (during extraction, before the
//! write, at the record), its commit's answer lost, the job ended elsewhere meanwhile, and the
//! result's writes tried again.

use std::time::Duration;

use contract::event::TerminalStatus;
use engine::EngineError;
use outbox::{Claim, Recorded, RecordedEvent};
use storage::{Cause, StorageError};
use tokio::time::Instant;

use super::fakes::{db_down, s3_down};
use super::{Bench, Disposition, Requeue, LEASE};

#[tokio::test(start_paused = true)]
async fn a_job_completes_stored_recorded_published_and_acked() {
    let bench = Bench::new();
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);

    let key = bench.key_of(message.job_id);
    let sealed = bench.objects.state().stored.get(&key).cloned();
    let opened = bench
        .keys
        .storage()
        .open_bytes(&sealed.expect("the object is stored"))
        .expect("the object opens with the storage key");
    assert_eq!(opened, bench.extract.state().rows);

    let state = bench.jobs.state();
    assert_eq!(state.written.len(), 1);
    let written = &state.written[0];
    assert_eq!(written.status, TerminalStatus::Completed);
    assert_eq!(written.owner.as_deref(), Some(state.claimed[0].as_str()));
    assert_eq!(written.publisher, state.claimed[0], "the run publishes");
    assert_eq!(written.ce_id, message.completed_ce_id());
    assert_eq!(
        bench.events.delivered(),
        vec![(state.claimed[0].clone(), message.completed_ce_id(), 1)]
    );
    assert!(state.released.is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_connection_store_gives_the_message_back_and_releases_the_claim() {
    let bench = Bench::new();
    bench
        .extract
        .state()
        .answers
        .push_back(Err(EngineError::Store("connection refused".into())));
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Retry(Requeue::ConnectionStore)
    );
    let state = bench.jobs.state();
    assert!(state.written.is_empty());
    assert_eq!(state.released, state.claimed, "the claim is given back");
    assert!(bench.objects.state().stored.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_spill_directory_that_takes_no_file_fails_the_job_once_and_acks() {
    let bench = Bench::new();
    bench
        .extract
        .state()
        .answers
        .push_back(Err(EngineError::Spill {
            dir: "/var/spill".into(),
            detail: "Read-only file system (os error 30)".into(),
        }));
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Ack,
        "not requeued"
    );
    let state = bench.jobs.state();
    assert_eq!(state.written.len(), 1);
    assert_eq!(state.written[0].status, TerminalStatus::Failed);
    assert_eq!(
        state.written[0].error.as_deref(),
        Some("the spill directory ENGINE_SPILL_DIR (/var/spill) could not be written: Read-only file system (os error 30)")
    );
    assert!(state.released.is_empty(), "the claim ends with the job");
    assert_eq!(bench.events.delivered()[0].1, message.failed_ce_id());
}

#[tokio::test(start_paused = true)]
async fn a_failing_datasource_fails_the_job_without_an_object() {
    let bench = Bench::new();
    bench
        .extract
        .state()
        .answers
        .push_back(Err(EngineError::Query {
            connection: "db".into(),
            detail: "relation does not exist".into(),
            transient: false,
        }));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let state = bench.jobs.state();
    assert_eq!(state.written[0].status, TerminalStatus::Failed);
    assert!(state.written[0].owner.is_some(), "recorded under the claim");
    assert!(
        bench.objects.state().deleted.is_empty(),
        "a first run left none"
    );
    assert_eq!(bench.events.delivered()[0].1, message.failed_ce_id());
}

#[tokio::test(start_paused = true)]
async fn a_later_run_that_fails_deletes_the_object_an_earlier_run_may_have_stored() {
    let bench = Bench::new();
    let message = bench.job();
    let key = bench.key_of(message.job_id);
    bench.objects.state().stored.insert(key.clone(), vec![1]);
    bench.jobs.state().claims.push_back(Ok(Claim::Acquired {
        attempt: 2,
        running_for: Duration::from_secs(1),
    }));
    bench
        .extract
        .state()
        .answers
        .push_back(Err(EngineError::Timeout(Duration::from_secs(1))));
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert!(bench.objects.state().stored.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_claim_taken_over_during_extraction_abandons_the_run() {
    let bench = Bench::new();
    bench.extract.state().takes = LEASE * 2;
    bench
        .jobs
        .state()
        .renewals
        .push_back(Ok(outbox::Lease::Lost));
    let message = bench.job();
    let began = Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(
        began.elapsed() < LEASE * 2,
        "the heartbeat stopped the extraction: {:?}",
        began.elapsed()
    );
    assert!(bench.jobs.state().written.is_empty());
    assert!(bench.objects.state().stored.is_empty());
    assert_eq!(bench.objects.state().put_calls, 0);
    assert!(bench.events.delivered().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_claim_taken_over_before_the_write_leaves_the_object_to_the_new_owner() {
    let bench = Bench::new();
    bench
        .jobs
        .state()
        .renewals
        .push_back(Ok(outbox::Lease::Lost));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().put_calls, 0);
    assert!(bench.jobs.state().written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_claim_lost_at_the_record_acks_and_publishes_nothing() {
    let bench = Bench::new();
    bench
        .jobs
        .state()
        .records
        .push_back(Ok(Recorded::LostClaim));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(bench.events.delivered().is_empty());
    // The new owner writes the same key: the object is left to it.
    assert!(bench.objects.state().deleted.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_job_failed_elsewhere_meanwhile_loses_this_runs_object() {
    let bench = Bench::new();
    bench
        .jobs
        .state()
        .records
        .push_back(Ok(Recorded::AlreadyTerminal {
            status: contract::lifecycle::JobStatus::Failed,
        }));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let key = bench.key_of(message.job_id);
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert!(bench.events.delivered().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_job_completed_elsewhere_meanwhile_keeps_the_object() {
    let bench = Bench::new();
    bench
        .jobs
        .state()
        .records
        .push_back(Ok(Recorded::AlreadyTerminal {
            status: contract::lifecycle::JobStatus::Completed,
        }));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(bench.objects.state().deleted.is_empty());
    assert_eq!(bench.objects.state().stored.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lost_commit_found_committed_is_published_by_the_run_that_holds_its_lease() {
    let bench = Bench::new();
    {
        let mut state = bench.jobs.state();
        state.records.push_back(Err(db_down()));
        state.lookups.push_back(Err(db_down()));
        state.committed_for_claimer = true;
    }
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let owner = bench.jobs.state().claimed[0].clone();
    assert_eq!(
        bench.events.delivered(),
        vec![(owner, message.completed_ce_id(), 1)]
    );
    assert!(
        bench.objects.state().deleted.is_empty(),
        "the job is completed"
    );
    assert!(bench.jobs.state().released.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_lost_commit_found_committed_under_another_lease_is_left_to_the_repairer() {
    let bench = Bench::new();
    {
        let mut state = bench.jobs.state();
        state.records.push_back(Err(db_down()));
        state.lookups.push_back(Ok(Some(RecordedEvent {
            outbox_id: outbox::RowId::Serial(7),
            leased_by: Some("someone-else".into()),
        })));
    }
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(bench.events.delivered().is_empty());
    assert!(
        bench.objects.state().deleted.is_empty(),
        "the job is completed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_commit_that_did_not_happen_deletes_the_object_and_gives_the_message_back() {
    let bench = Bench::new();
    bench.jobs.state().records.push_back(Err(db_down()));
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Retry(Requeue::StateDatabase)
    );
    let key = bench.key_of(message.job_id);
    assert_eq!(bench.objects.state().deleted, vec![key]);
    assert!(bench.events.delivered().is_empty());
    let state = bench.jobs.state();
    assert_eq!(state.released, state.claimed);
}

#[tokio::test(start_paused = true)]
async fn a_commit_nobody_can_confirm_keeps_the_object_and_gives_the_message_back() {
    let bench = Bench::new();
    {
        let mut state = bench.jobs.state();
        state.records.push_back(Err(db_down()));
        for _ in 0..5 {
            state.lookups.push_back(Err(db_down()));
        }
    }
    let message = bench.job();
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Retry(Requeue::StateDatabase)
    );
    assert!(bench.objects.state().deleted.is_empty());
    assert_eq!(bench.objects.state().stored.len(), 1);
    assert!(bench.jobs.state().lookups.is_empty(), "asked five times");
}

#[tokio::test(start_paused = true)]
async fn a_result_write_is_tried_again_and_the_job_completes() {
    let bench = Bench::new();
    let message = bench.job();
    let key = bench.key_of(message.job_id);
    {
        let mut objects = bench.objects.state();
        objects.puts.push_back(Err(s3_down(&key)));
        objects.puts.push_back(Err(s3_down(&key)));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().put_calls, 3);
    assert_eq!(
        bench.jobs.state().written[0].status,
        TerminalStatus::Completed
    );
    assert_eq!(bench.extract.state().calls, 1, "no re-extraction");
}

#[tokio::test(start_paused = true)]
async fn a_result_that_cannot_be_written_within_the_retry_window_fails_the_job() {
    let bench = Bench::new();
    bench.objects.state().always_fail = true;
    let message = bench.job();
    let began = Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(
        began.elapsed() <= Duration::from_secs(60),
        "within OBJECT_STORAGE_RETRY_SEC"
    );
    assert!(bench.objects.state().put_calls > 1);
    let state = bench.jobs.state();
    assert_eq!(state.written[0].status, TerminalStatus::Failed);
    assert!(state.written[0]
        .error
        .as_deref()
        .unwrap()
        .starts_with("storage write did not complete"));
}

#[tokio::test(start_paused = true)]
async fn the_retry_window_never_runs_past_the_jobs_timeout() {
    let bench = Bench::new();
    bench.objects.state().always_fail = true;
    bench.extract.state().timeout = Duration::from_secs(3);
    let message = bench.job();
    let began = Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(
        began.elapsed() <= Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(bench.jobs.state().written[0].status, TerminalStatus::Failed);
}

#[tokio::test(start_paused = true)]
async fn a_write_the_store_refuses_for_good_fails_the_job_at_once() {
    let bench = Bench::new();
    let message = bench.job();
    bench.objects.state().puts.push_back(Err(StorageError::Put {
        key: "k".into(),
        cause: Cause::new("access denied", false),
    }));
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(bench.objects.state().put_calls, 1);
    assert_eq!(bench.jobs.state().written[0].status, TerminalStatus::Failed);
}

#[tokio::test(start_paused = true)]
async fn a_jobs_own_timeout_bounds_its_extraction_less_what_earlier_runs_used() {
    let bench = Bench::new();
    let job_id = uuid::Uuid::new_v4();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {"db": {"payments": ["id"]}},
        "timeoutSeconds": 20,
    });
    let message = bench.signed(job_id, body.to_string().into_bytes(), 0);
    bench.jobs.state().claims.push_back(Ok(Claim::Acquired {
        attempt: 2,
        running_for: Duration::from_secs(5),
    }));
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(
        bench.extract.state().limits,
        vec![engine::TimeLimit {
            timeout: Duration::from_secs(20),
            elapsed: Duration::from_secs(5),
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_without_a_timeout_gets_the_engines() {
    let bench = Bench::new();
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert_eq!(
        bench.extract.state().limits,
        vec![engine::TimeLimit::fresh(Duration::from_secs(300))]
    );
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_extraction_fails_the_job_with_its_timeout() {
    let bench = Bench::new();
    bench
        .extract
        .state()
        .answers
        .push_back(Err(EngineError::Timeout(Duration::from_secs(20))));
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let state = bench.jobs.state();
    assert_eq!(
        state.written[0].error.as_deref(),
        Some("extraction timed out after 20s")
    );
    assert!(
        state.released.is_empty(),
        "a timeout is the job's end, not a retry"
    );
    let objects = bench.objects.state();
    assert_eq!(objects.aborted, 1, "the upload begun is aborted");
    assert_eq!(objects.put_calls, 0, "nothing was published");
}
