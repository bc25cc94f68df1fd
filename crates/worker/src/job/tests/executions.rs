//! A run's executions: what the engine reported goes to the job's end (its terminal record or
//! the end of its cancel), with how the executions left open end; a graceful cancel stops the
//! extraction's waiting datasources and stores nothing.

use std::time::Duration;

use contract::lifecycle::ExecutionStatus;
use engine::EngineError;

use super::fakes::Written;
use super::{Bench, Disposition};

fn statuses(written: &Written) -> Vec<(String, ExecutionStatus)> {
    written
        .executions
        .iter()
        .map(|r| (r.datasource.clone(), r.status))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_completed_run_reports_its_executions_succeeded_with_their_rows() {
    let bench = Bench::new();
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let written = bench.jobs.state().written[0].clone();
    assert_eq!(
        statuses(&written),
        [("db".to_owned(), ExecutionStatus::Succeeded)]
    );
    assert_eq!(written.executions[0].row_count, 1);
    assert!(written.executions[0].started_at.is_some());
    assert!(written.executions[0].ended_at.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_timeout_ends_the_running_executions_timed_out() {
    let bench = Bench::new();
    let message = bench.job();
    {
        let mut extract = bench.extract.state();
        // The engine reports nothing of datasources it abandons: the run knows they timed out.
        extract.takes = Duration::from_secs(1);
        extract
            .answers
            .push_back(Err(EngineError::Timeout(Duration::from_secs(2))));
    }
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let written = bench.jobs.state().written[0].clone();
    assert_eq!(written.close_running, Some(ExecutionStatus::TimedOut));
    assert_eq!(
        written.close_error.as_deref(),
        Some("extraction timed out after 2s")
    );
    assert_eq!(
        written.error.as_deref(),
        Some("extraction timed out after 2s")
    );
}

#[tokio::test(start_paused = true)]
async fn another_failure_cancels_the_executions_left_running() {
    let bench = Bench::new();
    let message = bench.job();
    bench
        .extract
        .state()
        .answers
        .push_back(Err(EngineError::Query {
            connection: "db".into(),
            detail: "boom".into(),
            transient: false,
        }));
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let written = bench.jobs.state().written[0].clone();
    assert_eq!(written.close_running, Some(ExecutionStatus::Canceled));
    assert_eq!(
        statuses(&written),
        [("db".to_owned(), ExecutionStatus::Failed)]
    );
    assert_eq!(
        written.executions[0].error.as_deref(),
        Some("query on datasource db failed: boom")
    );
}

#[tokio::test(start_paused = true)]
async fn a_graceful_cancel_stops_the_extraction_early_and_ends_the_cancel_with_its_reports() {
    let bench = Bench::new();
    let message = bench.job();
    {
        let mut extract = bench.extract.state();
        extract.takes = super::LEASE * 10;
        extract.honors_graceful = true;
        let mut jobs = bench.jobs.state();
        jobs.renewals
            .push_back(Ok(outbox::Lease::Canceling { force: false }));
        jobs.cancels
            .push_back(Ok(super::cancels::canceled_discarding(message.job_id)));
    }
    let began = tokio::time::Instant::now();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(
        began.elapsed() < super::LEASE,
        "stopped at the heartbeat that saw the cancel: {:?}",
        began.elapsed()
    );
    assert_eq!(bench.objects.state().put_calls, 0, "nothing stored");
    let jobs = bench.jobs.state();
    assert!(jobs.written.is_empty(), "neither completed nor failed");
    let reports = &jobs.cancel_executions[0];
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0].status,
        ExecutionStatus::InProgress,
        "left to the cancel's end to close"
    );
    // The start was written while the run lasted.
    assert!(jobs
        .execution_writes
        .iter()
        .flatten()
        .any(|r| r.status == ExecutionStatus::InProgress));
}
