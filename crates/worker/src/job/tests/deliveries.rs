//! Deliveries that never run: refused signatures, sizes, unusable bodies, a `jobId` header of
//! another job, limits, and the stale redelivery of an accepted job.

use contract::event::TerminalStatus;
use uuid::Uuid;

use super::fakes::Written;
use super::{Bench, Disposition, Requeue};

fn failed_unrun(bench: &Bench) -> Written {
    let state = bench.jobs.state();
    assert!(state.claimed.is_empty(), "claimed: {:?}", state.claimed);
    assert_eq!(state.written.len(), 1, "{:?}", state.written);
    let written = state.written[0].clone();
    assert_eq!(written.status, TerminalStatus::Failed);
    assert_eq!(written.owner, None, "a job failed unrun holds no claim");
    written
}

#[tokio::test(start_paused = true)]
async fn a_forged_signature_is_dead_lettered_and_touches_nothing() {
    let bench = Bench::new();
    let mut message = bench.job();
    message.signature = "00".repeat(32);
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::DeadLetter("signature_mismatch")
    );
    let state = bench.jobs.state();
    assert!(state.claimed.is_empty() && state.written.is_empty());
    assert!(bench.events.delivered().is_empty());
    assert_eq!(bench.extract.state().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn an_unsigned_oversized_message_is_dead_lettered_without_failing_a_job() {
    let bench = Bench::new();
    let mut message = bench.signed(Uuid::new_v4(), vec![b' '; 5000], 0);
    message.signature = "00".repeat(32);
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::DeadLetter("message_too_large")
    );
    assert!(bench.jobs.state().written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_signed_oversized_message_fails_its_job_and_is_dead_lettered() {
    let bench = Bench::new();
    let job_id = Uuid::new_v4();
    let body = format!(r#"{{"jobId":"{job_id}","pad":"{}"}}"#, "x".repeat(5000));
    let message = bench.signed(job_id, body.into_bytes(), 0);
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::DeadLetter("message_too_large")
    );
    let written = failed_unrun(&bench);
    assert_eq!(written.job_id, job_id);
    assert!(written
        .error
        .unwrap()
        .contains("more than the 4096 bytes allowed"));
    assert_eq!(
        bench.events.delivered().len(),
        1,
        "its failure is published"
    );
}

#[tokio::test(start_paused = true)]
async fn a_signed_oversized_message_is_retried_when_its_failure_cannot_be_recorded() {
    let bench = Bench::new();
    let job_id = Uuid::new_v4();
    let body = format!(r#"{{"jobId":"{job_id}","pad":"{}"}}"#, "x".repeat(5000));
    let message = bench.signed(job_id, body.into_bytes(), 0);
    bench
        .jobs
        .state()
        .records
        .push_back(Err(super::fakes::db_down()));
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::Retry(Requeue::StateDatabase)
    );
}

#[tokio::test(start_paused = true)]
async fn an_unusable_body_with_a_job_id_fails_that_job_and_is_acked() {
    let bench = Bench::new();
    let job_id = Uuid::new_v4();
    let body = format!(r#"{{"jobId":"{job_id}","mappedFields":42}}"#);
    let message = bench.signed(job_id, body.into_bytes(), 0);
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    let written = failed_unrun(&bench);
    assert_eq!(written.job_id, job_id);
    assert!(written.error.unwrap().starts_with("invalid job message"));
    assert_eq!(bench.extract.state().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn an_unusable_body_without_a_job_id_is_dropped() {
    let bench = Bench::new();
    let message = bench.signed(Uuid::nil(), b"[1,2,3]".to_vec(), 0);
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(bench.jobs.state().written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_job_id_header_naming_another_job_is_dead_lettered_and_the_job_untouched() {
    let bench = Bench::new();
    let mut message = bench.job();
    message.job_id_header = Some(Uuid::new_v4().to_string());
    assert_eq!(
        bench.deliver(&message).await,
        Disposition::DeadLetter("job_id_header_mismatch")
    );
    let state = bench.jobs.state();
    assert!(state.claimed.is_empty() && state.written.is_empty());
}

#[tokio::test(start_paused = true)]
async fn metadata_over_its_limit_fails_the_job_unrun() {
    let bench = Bench::new();
    let job_id = Uuid::new_v4();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {"db": {"payments": ["id"]}},
        "metadata": {"note": "m".repeat(2000)},
    });
    let message = bench.signed(job_id, body.to_string().into_bytes(), 0);
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    assert!(failed_unrun(&bench).error.unwrap().contains("metadata"));
}

#[tokio::test(start_paused = true)]
async fn a_job_over_the_engine_limits_fails_unrun() {
    let bench = Bench::new();
    bench.extract.state().over_limits = true;
    let message = bench.job();
    assert_eq!(bench.deliver(&message).await, Disposition::Ack);
    failed_unrun(&bench);
    assert_eq!(bench.extract.state().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn a_stale_signature_is_refused_for_a_job_never_accepted() {
    let bench = Bench::new();
    let fresh = bench.job();
    let stale = bench.signed(fresh.job_id, fresh.body.clone(), 600);
    assert_eq!(
        bench.deliver(&stale).await,
        Disposition::DeadLetter("signature_stale")
    );
    assert!(bench.jobs.state().claimed.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stale_redelivery_of_the_accepted_body_runs() {
    let bench = Bench::new();
    let fresh = bench.job();
    let stale = bench.signed(fresh.job_id, fresh.body.clone(), 600);
    bench.jobs.state().accepted_digest = Ok(Some(super::super::authenticate::message_digest(
        &fresh.body,
    )));
    assert_eq!(bench.deliver(&stale).await, Disposition::Ack);
    assert_eq!(bench.jobs.state().written.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stale_redelivery_of_another_body_is_refused() {
    let bench = Bench::new();
    let fresh = bench.job();
    let stale = bench.signed(fresh.job_id, fresh.body.clone(), 600);
    bench.jobs.state().accepted_digest = Ok(Some([1; 32]));
    assert_eq!(
        bench.deliver(&stale).await,
        Disposition::DeadLetter("signature_stale")
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_redelivery_is_retried_when_the_state_database_cannot_tell() {
    let bench = Bench::new();
    let fresh = bench.job();
    let stale = bench.signed(fresh.job_id, fresh.body.clone(), 600);
    bench.jobs.state().accepted_digest = Err(());
    assert_eq!(
        bench.deliver(&stale).await,
        Disposition::Retry(Requeue::StateDatabase)
    );
}
