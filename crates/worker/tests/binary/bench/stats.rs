//! Medians and percentiles of a benchmark's samples.

use std::time::Duration;

/// The `p`-quantile (0.0–1.0) of `samples`, nearest rank.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 0.5)
}

/// The median of plain numbers.
pub fn median_of(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub const MIB: f64 = 1024.0 * 1024.0;
