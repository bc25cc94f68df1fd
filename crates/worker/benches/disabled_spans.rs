//! Benchmark: what the traces cost a job while they are off (`ENABLE_TELEMETRY=false`, the
//! default): the seven stage spans a delivery opens (`claim`, `extract`, `seal`, `store`,
//! `record`, `publish`, and the datasources' observer check), disabled DEBUG spans under the
//! Worker's own subscriber at `LOG_LEVEL=info`, and the three look-ups of the job's
//! `traceparent` for its events (the claim, the executions' recorder, the end's event), which
//! find none. Against the same job's steps without any of it, in one process run.
//!
//! Run: `cargo bench -p worker --bench disabled_spans`. A plain harness (no criterion):
//! warm-up, then interleaved rounds of each side; prints the median nanoseconds per job of
//! each and their difference. `BENCH_SPAN_JOBS` (default 1,000,000) jobs per round.

use std::future::Future;
use std::hint::black_box;
use std::time::Instant;

use futures_util::FutureExt as _;
use tracing::Instrument as _;

const ROUNDS: usize = 9;

/// A stage's work, as far as the span is concerned: a future that is ready at once.
fn stage(n: u64) -> impl Future<Output = u64> {
    std::future::ready(black_box(n))
}

/// One job's steps without spans or look-ups.
fn bare(job: u64) -> u64 {
    let mut sum = 0;
    for n in 0..6 {
        sum += stage(job + n).now_or_never().unwrap_or(0);
    }
    sum
}

/// One job's steps as the Worker runs them with traces off: each stage instrumented with its
/// (disabled) span, the observer's check, and the three `traceparent` look-ups.
fn traced_off(job: u64) -> u64 {
    let mut sum = 0;
    let look_up = || u64::from(worker::traces::current_traceparent().is_some());
    sum += look_up();
    sum += stage(job)
        .instrument(tracing::debug_span!("claim"))
        .now_or_never()
        .unwrap_or(0);
    let extract = tracing::debug_span!("extract");
    // `DatasourceSpans::around`: no wrapper when the parent is disabled.
    sum += u64::from(black_box(&extract).is_disabled());
    sum += look_up();
    sum += stage(job + 1)
        .instrument(extract)
        .now_or_never()
        .unwrap_or(0);
    sum += stage(job + 2)
        .instrument(tracing::debug_span!("seal"))
        .now_or_never()
        .unwrap_or(0);
    sum += stage(job + 3)
        .instrument(tracing::debug_span!("store"))
        .now_or_never()
        .unwrap_or(0);
    sum += look_up();
    sum += stage(job + 4)
        .instrument(tracing::debug_span!("record"))
        .now_or_never()
        .unwrap_or(0);
    sum += stage(job + 5)
        .instrument(tracing::debug_span!("publish"))
        .now_or_never()
        .unwrap_or(0);
    sum
}

/// Nanoseconds per job of `run` over `jobs` jobs, inside an (enabled) INFO `job` span as a
/// delivery's.
fn time(jobs: u64, run: fn(u64) -> u64) -> f64 {
    let span = tracing::info_span!("job", job_id = tracing::field::Empty);
    let _entered = span.enter();
    let start = Instant::now();
    let mut sum = 0;
    for job in 0..jobs {
        sum += run(black_box(job));
    }
    black_box(sum);
    start.elapsed().as_nanos() as f64 / jobs as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let jobs: u64 = std::env::var("BENCH_SPAN_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // The Worker's own subscriber, as it starts with traces off.
    let settings = worker::config::LogSettings {
        level: "info".to_owned(),
        json: true,
    };
    assert!(worker::telemetry::init(&settings, None).is_none());
    assert!(
        tracing::debug_span!("probe").is_disabled(),
        "stage spans are off"
    );
    time(jobs / 10, bare);
    time(jobs / 10, traced_off);
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        without.push(time(jobs, bare));
        with.push(time(jobs, traced_off));
    }
    let (without, with) = (median(without), median(with));
    println!("disabled spans, {jobs} jobs per round, {ROUNDS} rounds (median ns per job):");
    println!("  without spans or look-ups: {without:>8.1}");
    println!("  with traces off:           {with:>8.1}");
    println!(
        "  cost of the disabled spans: {:>7.1} ns per job",
        with - without
    );
}
