//! The Worker's resident memory, read from `/proc/<pid>/status`: its peak (`VmHWM`) since the
//! last reset (`/proc/<pid>/clear_refs`), so a case's peak growth is measured, not sampled.

/// Memory figures of one process, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    pub now: u64,
    pub peak: u64,
}

/// Reads `VmRSS` and `VmHWM` of `pid`.
pub fn read(pid: u32) -> Rss {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{name} missing from /proc/{pid}/status"))
            * 1024
    };
    Rss {
        now: field("VmRSS:"),
        peak: field("VmHWM:"),
    }
}

/// Resets the peak to the current resident size (writing `5` to `clear_refs`).
pub fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .unwrap_or_else(|e| panic!("/proc/{pid}/clear_refs: {e}"));
}

/// Measures one case: resets the peak, runs `case`, and returns how far the peak rose above
/// the resident size at the start.
pub async fn peak_growth<F: std::future::Future<Output = ()>>(pid: u32, case: F) -> u64 {
    reset_peak(pid);
    let before = read(pid).now;
    case.await;
    read(pid).peak.saturating_sub(before)
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
