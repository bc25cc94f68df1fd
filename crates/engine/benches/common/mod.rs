//! What the engine's extraction benchmarks share: the row count (`BENCH_ROWS`), the median of
//! their runs and the lines that compare the engine with a bare reader of the same rows.

use std::time::Duration;

/// Runs of each reader; the median is reported.
pub const RUNS: usize = 3;

/// `BENCH_ROWS`, or `default`.
pub fn bench_rows(default: u64) -> u64 {
    std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
}

pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

/// Prints the medians of the bare reader (`bare`, named `reader`) and of the engine, with the
/// result's size, and their ratio.
#[allow(dead_code)] // extract_vs_copy compares with COPY and prints its own lines
pub fn report(reader: &str, bare: Vec<Duration>, extracted: Vec<Duration>, result_bytes: usize) {
    let (bare, extracted) = (median(bare), median(extracted));
    println!("{reader:<20} median {:>8} ms", bare.as_millis());
    println!(
        "engine extraction    median {:>8} ms   {:.1} MiB of result JSON",
        extracted.as_millis(),
        result_bytes as f64 / 1_048_576.0
    );
    println!(
        "time ratio extraction/bare: {:.2}",
        extracted.as_secs_f64() / bare.as_secs_f64()
    );
}
