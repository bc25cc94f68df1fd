//! The Worker's metrics: names, units, buckets, and one typed helper per event. Labels stay
//! low-cardinality (outcomes, stages, reasons; never a job id or tenant).
//!
//! - `process.rs`: the process's own families (CPU, memory, file descriptors), read on each
//!   scrape.

mod process;

use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// Counter: jobs that reached a terminal state, by `outcome` (`completed`, `failed`).
pub const JOBS: &str = "fetcher_jobs_total";
/// Histogram: from claim to recorded terminal state, seconds.
pub const JOB_DURATION: &str = "fetcher_job_duration_seconds";
/// Histogram: one pipeline stage, seconds, by `stage` (extract, seal, store, record, publish).
pub const STAGE_DURATION: &str = "fetcher_job_stage_duration_seconds";
/// Counter: rows extracted.
pub const ROWS: &str = "fetcher_rows_extracted_total";
/// Counter: bytes of result JSON extracted.
pub const BYTES: &str = "fetcher_bytes_extracted_total";
/// Counter: messages not run, by `reason` (a stable code).
pub const REJECTED: &str = "fetcher_messages_rejected_total";
/// Gauge: job messages being handled right now.
pub const ACTIVE: &str = "fetcher_consumers_active";
/// Gauge: the prefetch this Worker consumes with (`RABBITMQ_NUMBERS_OF_WORKERS`): how many job
/// messages it handles at most at once, the denominator of [`ACTIVE`]'s use.
pub const PREFETCH: &str = "fetcher_consumers_prefetch";
/// Counter: job messages accepted on the legacy body-only signature
/// (`RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK`).
pub const LEGACY_VERIFIED: &str = "fetcher_messages_legacy_signature_total";
/// Counter: redeliveries of accepted jobs taken although their signature had outgrown
/// `RABBITMQ_SIGNATURE_MAX_AGE_SEC` (the body was the accepted one).
pub const STALE_REDELIVERIES: &str = "fetcher_messages_stale_redelivery_accepted_total";
/// Counter: job messages given back to the queue (or left to come back) to be tried again, by
/// `reason` ([`crate::job::Requeue`]: `state_database`, `connection_store`, `shutdown`, `broker`,
/// `internal`).
pub const REQUEUED: &str = "fetcher_messages_requeued_total";
/// Counter: job messages delivered with the broker's `redelivered` flag (a requeue's, or one left
/// unsettled by a Worker that stopped or lost its channel).
pub const REDELIVERED: &str = "fetcher_messages_redelivered_total";
/// Counter: result writes that failed transiently and were tried again in the same run.
pub const STORAGE_RETRIES: &str = "fetcher_storage_write_retries_total";
/// Counter: retries of datasources whose attempt failed transiently (`JOB_RETRY_ATTEMPTS`), by
/// `outcome` ([`RetryOutcome`]: `retried` each time one is read again, then once per retried
/// datasource `recovered` or `exhausted`; `redelivered` for each datasource of a job whose
/// message came back and ran again).
pub const DATASOURCE_RETRIES: &str = "fetcher_datasource_retries_total";
/// Gauge: slots of a capped datasource this Worker holds (`DATASOURCE_<NAME>_MAX_CONCURRENT`),
/// by `datasource` (the connection name); summed over the replicas, the reads running on it.
pub const SLOTS_IN_USE: &str = "fetcher_datasource_slots_in_use";
/// Counter: reads of a capped datasource that found every slot held and waited, by
/// `datasource`.
pub const SLOT_WAITS: &str = "fetcher_datasource_slot_waits_total";
/// Histogram: from a capped datasource's first ask for a slot to the slot taken (0 when one was
/// free), seconds, by `datasource`.
pub const SLOT_WAIT: &str = "fetcher_datasource_slot_wait_seconds";
/// Counter: temporary files parts of results waiting their turn spilled to (`ENGINE_SPILL_DIR`).
pub const SPILL_FILES: &str = "fetcher_engine_spill_files_total";
/// Counter: bytes written to those files.
pub const SPILL_BYTES: &str = "fetcher_engine_spill_bytes_total";
/// Counter: jobs failed because a part of their result could not be spilled (`ENGINE_SPILL_DIR`
/// gone, read-only or full).
pub const SPILL_FAILURES: &str = "fetcher_engine_spill_failures_total";
/// Counter: connections closed on accept because a limit was reached, by `server` (`health`,
/// `api`; the name is the health server's, which had it first) and `reason` (`total`: the
/// server's; `per_address`: the client address's).
pub const HEALTH_REFUSED: &str = "fetcher_health_connections_refused_total";
/// Counter: cancel requests and their ends, by outcome (`requested`, `refused`, `canceled`).
pub const CANCELS: &str = "fetcher_job_cancels_total";
/// Counter: delete requests and their ends, by outcome (`requested`, `refused`, `deleted`,
/// `retried`: the object could not be deleted yet).
pub const DELETES: &str = "fetcher_job_deletes_total";
/// Histogram: seconds from a cancel's acceptance to the job's `canceled`.
pub const CANCEL_LATENCY: &str = "fetcher_job_cancel_latency_seconds";
/// Counter: jobs that ran out of their time (`timeoutSeconds`).
pub const TIMEOUTS: &str = "fetcher_job_timeouts_total";
/// Counter: control API requests, by route and answered status.
pub const API_REQUESTS: &str = "fetcher_api_requests_total";
/// Counter: control API requests refused, by reason (`signature_mismatch`, `not_found`, ...).
pub const API_REJECTED: &str = "fetcher_api_requests_rejected_total";

/// Counter: retention passes, by `outcome` (`done`, `skipped`: another replica holds the lease,
/// `failed`).
pub const RETENTION_PASSES: &str = "fetcher_retention_passes_total";
/// Counter: completed jobs whose result retention deleted (`RESULT_RETENTION_DAYS`).
pub const RETENTION_RESULTS: &str = "fetcher_retention_results_deleted_total";
/// Counter: ended jobs whose rows retention pruned (`JOB_RETENTION_DAYS`).
pub const RETENTION_JOBS: &str = "fetcher_retention_jobs_pruned_total";

/// Histogram: one `/readyz` dependency check, milliseconds, by `dep` and `status` (upstream's).
pub const READYZ_CHECK_DURATION: &str = "readyz_check_duration_ms";
/// Counter: `/readyz` dependency checks, by `dep` and `status` (`up`, `down`).
pub const READYZ_CHECK_STATUS: &str = "readyz_check_status";
/// Gauge: the start's probe of each dependency, by `dep`: 1 once it answered, 0 while waiting.
pub const SELFPROBE: &str = "selfprobe_result";
/// Gauge: always 1, labelled with this build's `version`, `revision` and `build_date`.
pub const BUILD_INFO: &str = "fetcher_worker_build_info";

/// Upstream's buckets of [`READYZ_CHECK_DURATION`], milliseconds.
const READYZ_MS_BUCKETS: &[f64] = &[
    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 5000.0,
];

/// Seconds buckets from 5 ms to 10 min: covers a tiny query and the 5-minute extraction limit.
const SECONDS_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Installs the global recorder with explicit buckets; the handle renders `/metrics`.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full(READYZ_CHECK_DURATION.into()),
            READYZ_MS_BUCKETS,
        )?
        .install_recorder()?;
    describe();
    register_at_zero();
    Ok(handle)
}

/// `/metrics`: every recorded family, then the process's own.
pub fn render(handle: &PrometheusHandle) -> String {
    let mut text = handle.render();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&process::render());
    text
}

/// Exports the counters of rare events (and the busy gauge) from the start, at 0: a series that
/// appears only with its first event makes `rate()` and the alerts blind to that first event.
/// The labelled ones whose labels are few and known are registered for each. The build's gauge
/// is 1 from the start.
fn register_at_zero() {
    for counter in [
        ROWS,
        BYTES,
        LEGACY_VERIFIED,
        STALE_REDELIVERIES,
        STORAGE_RETRIES,
        SPILL_FILES,
        SPILL_BYTES,
        SPILL_FAILURES,
        TIMEOUTS,
        REDELIVERED,
        RETENTION_RESULTS,
        RETENTION_JOBS,
    ] {
        metrics::counter!(counter).absolute(0);
    }
    for outcome in ["done", "skipped", "failed"] {
        metrics::counter!(RETENTION_PASSES, "outcome" => outcome).absolute(0);
    }
    for outcome in RetryOutcome::ALL {
        metrics::counter!(DATASOURCE_RETRIES, "outcome" => outcome.as_str()).absolute(0);
    }
    for reason in crate::job::Requeue::ALL {
        metrics::counter!(REQUEUED, "reason" => reason.as_str()).absolute(0);
    }
    for server in ["health", "api"] {
        for reason in ["total", "per_address"] {
            metrics::counter!(HEALTH_REFUSED, "server" => server, "reason" => reason).absolute(0);
        }
    }
    metrics::gauge!(ACTIVE).set(0.0);
    repairer::metrics::marks_at_zero();
    metrics::gauge!(
        BUILD_INFO,
        "version" => crate::build_info::VERSION,
        "revision" => crate::build_info::REVISION,
        "build_date" => crate::build_info::BUILD_DATE,
    )
    .set(1.0);
}

/// Help text (and unit) of every family, the other crates' included.
fn describe() {
    publisher::metrics::describe();
    repairer::metrics::describe();
    outbox::describe_metrics();
    metrics::describe_gauge!(
        BUILD_INFO,
        "Always 1: the version, git revision and build date of this fetcher-worker."
    );
    metrics::describe_counter!(JOBS, "Jobs that reached a terminal state, by outcome.");
    metrics::describe_histogram!(
        JOB_DURATION,
        metrics::Unit::Seconds,
        "From claim to recorded terminal state."
    );
    metrics::describe_histogram!(
        STAGE_DURATION,
        metrics::Unit::Seconds,
        "Duration of one pipeline stage."
    );
    metrics::describe_counter!(ROWS, "Rows extracted.");
    metrics::describe_counter!(
        SPILL_FILES,
        "Temporary files parts of results waiting their turn were spilled to."
    );
    metrics::describe_counter!(
        SPILL_BYTES,
        "Bytes of results spilled to temporary files while waiting their turn."
    );
    metrics::describe_counter!(
        SPILL_FAILURES,
        "Jobs failed because a part of their result could not be spilled to ENGINE_SPILL_DIR."
    );
    metrics::describe_counter!(
        BYTES,
        metrics::Unit::Bytes,
        "Bytes of result JSON extracted."
    );
    metrics::describe_counter!(REJECTED, "Job messages not run, by reason.");
    metrics::describe_gauge!(ACTIVE, "Job messages being handled.");
    metrics::describe_gauge!(
        PREFETCH,
        "The prefetch this Worker consumes with: job messages handled at most at once."
    );
    metrics::describe_counter!(
        LEGACY_VERIFIED,
        "Job messages accepted on the legacy body-only signature."
    );
    metrics::describe_counter!(
        STALE_REDELIVERIES,
        "Redeliveries of accepted jobs taken past the signature's freshness window."
    );
    metrics::describe_counter!(
        REQUEUED,
        "Job messages given back to the queue to be tried again, by reason."
    );
    metrics::describe_counter!(
        REDELIVERED,
        "Job messages delivered with the broker's redelivered flag."
    );
    metrics::describe_counter!(
        STORAGE_RETRIES,
        "Result writes that failed transiently and were tried again in the same run."
    );
    metrics::describe_counter!(
        DATASOURCE_RETRIES,
        "Retries of datasources whose attempt failed transiently, by outcome: retried, recovered, exhausted."
    );
    metrics::describe_gauge!(
        SLOTS_IN_USE,
        "Slots of a capped datasource this Worker holds (DATASOURCE_<NAME>_MAX_CONCURRENT), by datasource."
    );
    metrics::describe_counter!(
        SLOT_WAITS,
        "Reads of a capped datasource that found every slot held and waited, by datasource."
    );
    metrics::describe_histogram!(
        SLOT_WAIT,
        metrics::Unit::Seconds,
        "From a capped datasource's first ask for a slot to the slot taken, by datasource."
    );
    metrics::describe_histogram!(
        READYZ_CHECK_DURATION,
        "Duration of one /readyz dependency check, in milliseconds."
    );
    metrics::describe_counter!(READYZ_CHECK_STATUS, "/readyz dependency checks, by status.");
    metrics::describe_gauge!(
        SELFPROBE,
        "The start's probe of each dependency: 1 once it answered, 0 while waiting."
    );
    metrics::describe_counter!(API_REQUESTS, "Control API requests, by route and status.");
    metrics::describe_counter!(CANCELS, "Cancel requests and their ends, by outcome.");
    metrics::describe_counter!(DELETES, "Delete requests and their ends, by outcome.");
    metrics::describe_histogram!(
        CANCEL_LATENCY,
        metrics::Unit::Seconds,
        "From a cancel's acceptance to the job's canceled state."
    );
    metrics::describe_counter!(TIMEOUTS, "Jobs that ran out of their timeoutSeconds.");
    metrics::describe_counter!(RETENTION_PASSES, "Retention passes, by outcome.");
    metrics::describe_counter!(
        RETENTION_RESULTS,
        "Completed jobs whose result retention deleted."
    );
    metrics::describe_counter!(RETENTION_JOBS, "Ended jobs whose rows retention pruned.");
    metrics::describe_counter!(
        API_REJECTED,
        "Control API requests refused, by reason; nothing changed for them."
    );
    metrics::describe_counter!(
        HEALTH_REFUSED,
        "Connections the health server or control API closed at once: its limit or the client address's was reached."
    );
}

/// Exports the capped datasources' slot series from the start, at 0, so the first wait shows
/// in `rate()`; their names are the operator's own (`DATASOURCE_<NAME>_MAX_CONCURRENT`), few.
pub fn capped_datasources<'a>(names: impl IntoIterator<Item = &'a String>) {
    for name in names {
        metrics::counter!(SLOT_WAITS, "datasource" => name.clone()).absolute(0);
        metrics::gauge!(SLOTS_IN_USE, "datasource" => name.clone()).set(0.0);
    }
}

/// A read of `datasource` found every slot held: it waits.
pub(crate) fn slot_wait(datasource: &str) {
    metrics::counter!(SLOT_WAITS, "datasource" => datasource.to_owned()).increment(1);
}

/// A read of `datasource` took a slot after `waited`.
pub(crate) fn slot_taken(datasource: &str, waited: Duration) {
    metrics::histogram!(SLOT_WAIT, "datasource" => datasource.to_owned())
        .record(waited.as_secs_f64());
}

/// This Worker holds one slot of `datasource` more (`1.0`) or less (`-1.0`).
pub(crate) fn slot_held(datasource: &str, delta: f64) {
    metrics::gauge!(SLOTS_IN_USE, "datasource" => datasource.to_owned()).increment(delta);
}

pub(crate) fn job_finished(outcome: &'static str, took: Duration) {
    metrics::counter!(JOBS, "outcome" => outcome).increment(1);
    metrics::histogram!(JOB_DURATION, "outcome" => outcome).record(took.as_secs_f64());
}

pub(crate) fn stage(stage: &'static str, took: Duration) {
    metrics::histogram!(STAGE_DURATION, "stage" => stage).record(took.as_secs_f64());
}

pub(crate) fn extracted(rows: u64, bytes: u64) {
    metrics::counter!(ROWS).increment(rows);
    metrics::counter!(BYTES).increment(bytes);
}

pub(crate) fn rejected(reason: &'static str) {
    metrics::counter!(REJECTED, "reason" => reason).increment(1);
}

pub(crate) fn prefetch(prefetch: u16) {
    metrics::gauge!(PREFETCH).set(f64::from(prefetch));
}

pub(crate) fn active(delta: f64) {
    metrics::gauge!(ACTIVE).increment(delta);
}

pub(crate) fn legacy_verified() {
    metrics::counter!(LEGACY_VERIFIED).increment(1);
}

pub(crate) fn stale_redelivery_accepted() {
    metrics::counter!(STALE_REDELIVERIES).increment(1);
}

/// `messages` job messages go back to the queue, for `reason`.
pub(crate) fn requeued(reason: crate::job::Requeue, messages: u64) {
    metrics::counter!(REQUEUED, "reason" => reason.as_str()).increment(messages);
}

pub(crate) fn redelivered() {
    metrics::counter!(REDELIVERED).increment(1);
}

pub(crate) fn spilled(spilled: engine::SpillStats) {
    metrics::counter!(SPILL_FILES).increment(spilled.files);
    metrics::counter!(SPILL_BYTES).increment(spilled.bytes);
}

/// A job failed: its spill directory could not be written.
pub(crate) fn spill_failed() {
    metrics::counter!(SPILL_FAILURES).increment(1);
}

/// What became of a datasource's retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryOutcome {
    /// An attempt failed transiently and the datasource is read again.
    Retried,
    /// A datasource read again ended well.
    Recovered,
    /// A datasource read again still failed (its retries ran out, or a later attempt failed
    /// permanently).
    Exhausted,
    /// A datasource run again because its job's message came back and ran again (a requeue,
    /// a Worker that died mid-job): once per datasource of each such run.
    Redelivered,
}

impl RetryOutcome {
    const ALL: [RetryOutcome; 4] = [
        RetryOutcome::Retried,
        RetryOutcome::Recovered,
        RetryOutcome::Exhausted,
        RetryOutcome::Redelivered,
    ];

    fn as_str(self) -> &'static str {
        match self {
            RetryOutcome::Retried => "retried",
            RetryOutcome::Recovered => "recovered",
            RetryOutcome::Exhausted => "exhausted",
            RetryOutcome::Redelivered => "redelivered",
        }
    }
}

pub(crate) fn datasource_retry(outcome: RetryOutcome) {
    datasource_retries(outcome, 1);
}

pub(crate) fn datasource_retries(outcome: RetryOutcome, datasources: u64) {
    metrics::counter!(DATASOURCE_RETRIES, "outcome" => outcome.as_str()).increment(datasources);
}

pub(crate) fn storage_retry() {
    metrics::counter!(STORAGE_RETRIES).increment(1);
}

pub(crate) fn readiness_check(dep: &'static str, up: bool, took_ms: f64) {
    let status = if up { "up" } else { "down" };
    metrics::histogram!(READYZ_CHECK_DURATION, "dep" => dep, "status" => status).record(took_ms);
    metrics::counter!(READYZ_CHECK_STATUS, "dep" => dep, "status" => status).increment(1);
}

pub(crate) fn selfprobe(dep: &'static str, up: bool) {
    metrics::gauge!(SELFPROBE, "dep" => dep).set(if up { 1.0 } else { 0.0 });
}

pub(crate) fn connection_refused(server: &'static str, reason: &'static str) {
    metrics::counter!(HEALTH_REFUSED, "server" => server, "reason" => reason).increment(1);
}

pub(crate) fn api_request(route: &'static str, status: u16) {
    metrics::counter!(API_REQUESTS, "route" => route, "status" => status.to_string()).increment(1);
}

pub(crate) fn api_rejected(reason: &'static str) {
    metrics::counter!(API_REJECTED, "reason" => reason).increment(1);
}

pub(crate) fn cancel(outcome: &'static str) {
    metrics::counter!(CANCELS, "outcome" => outcome).increment(1);
}

/// A retention pass ended as `outcome` says.
pub(crate) fn retention_pass(outcome: &'static str) {
    metrics::counter!(RETENTION_PASSES, "outcome" => outcome).increment(1);
}

/// Retention deleted a completed job's result.
pub(crate) fn retention_deleted() {
    metrics::counter!(RETENTION_RESULTS).increment(1);
}

/// Retention pruned `jobs` ended jobs' rows.
pub(crate) fn retention_pruned(jobs: u64) {
    metrics::counter!(RETENTION_JOBS).increment(jobs);
}

/// A job ended `canceled`, `after` its cancel was accepted.
pub(crate) fn canceled(after: Duration) {
    cancel("canceled");
    metrics::histogram!(CANCEL_LATENCY).record(after.as_secs_f64());
}

pub(crate) fn delete(outcome: &'static str) {
    metrics::counter!(DELETES, "outcome" => outcome).increment(1);
}

pub(crate) fn timed_out() {
    metrics::counter!(TIMEOUTS).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every family, each recorded once through its helper (the other crates' directly), as
    /// `/metrics` renders them.
    fn every_family() -> String {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            describe();
            register_at_zero();
            job_finished("completed", Duration::from_millis(5));
            stage("extract", Duration::from_millis(5));
            extracted(3, 100);
            rejected("signature_verification_failed");
            prefetch(4);
            active(1.0);
            legacy_verified();
            stale_redelivery_accepted();
            requeued(crate::job::Requeue::ALL[0], 1);
            redelivered();
            spilled(engine::SpillStats {
                files: 1,
                bytes: 10,
            });
            spill_failed();
            storage_retry();
            datasource_retry(RetryOutcome::Retried);
            readiness_check("rabbitmq", true, 2.0);
            selfprobe("rabbitmq", true);
            connection_refused("api", "total");
            api_request("delete", 202);
            api_rejected("not_found");
            cancel("requested");
            canceled(Duration::from_millis(5));
            delete("requested");
            timed_out();
            for counter in [
                publisher::metrics::PUBLISHED,
                publisher::metrics::PUBLISH_FAILED,
                publisher::metrics::RETURNED,
                repairer::metrics::REPUBLISHED,
                repairer::metrics::REPAIR_PASSES,
            ] {
                metrics::counter!(counter).increment(1);
            }
            for gauge in [
                outbox::PENDING_EVENTS,
                outbox::OLDEST_UNPUBLISHED_AGE_SECONDS,
                outbox::FAILING_EVENTS,
                outbox::OLDEST_IN_TRANSITION_AGE_SECONDS,
            ] {
                metrics::gauge!(gauge).set(1.0);
            }
        });
        render(&handle)
    }

    /// promtool's rules the names can break, over every family (the binary test runs promtool
    /// itself on the families a live Worker exported): help text on each, `_total` on counters
    /// only, seconds and bytes as units, the `fetcher_` prefix on ours. Upstream's names
    /// (`readyz_check_*`, `selfprobe_result`) and the standard `process_*` stay as they are.
    #[test]
    fn every_family_has_help_and_prometheus_names() {
        let text = every_family();
        let families: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split_once(' '))
            .collect();
        assert!(families.len() >= 40, "{families:?}");
        for (name, kind) in families {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no help text"
            );
            if name.starts_with("readyz_check_") {
                continue;
            }
            assert!(
                name.starts_with("fetcher_") || name.starts_with("process_") || name == SELFPROBE,
                "{name}: the Worker's own families carry the fetcher_ prefix"
            );
            assert_eq!(
                name.ends_with("_total"),
                kind == "counter",
                "{name} is a {kind}: `_total` is for counters only"
            );
            for unit in ["_ms", "_milliseconds", "_kb", "_mb", "_minutes", "_hours"] {
                assert!(!name.contains(unit), "{name}: not a base unit");
            }
        }
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(text.contains(&format!("\n{name} ")), "{name} missing");
        }
    }
}
