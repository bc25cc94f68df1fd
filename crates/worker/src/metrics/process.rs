//! The process's own metrics, read from `/proc/self` on each scrape (Linux), in the names, types
//! and units of Prometheus's client libraries (`process_cpu_seconds_total`, ...).

use std::fmt::Write as _;

/// Clock ticks per second of `/proc`'s CPU and start times: USER_HZ, which Linux keeps at 100 on
/// every architecture the Worker is built for. Prometheus's own procfs library hard-codes it as
/// well: asking `sysconf` would take `unsafe`, which this workspace forbids.
const USER_HZ: f64 = 100.0;

/// The process families, in the Prometheus text format; a family whose source cannot be read
/// (not Linux, `/proc` not mounted) is left out rather than exported as a false 0.
pub(crate) fn render() -> String {
    let mut text = String::new();
    let stat = read("/proc/self/stat");
    // The fields after the command name, which is in parentheses and may hold spaces: index 0
    // is the state (field 3 of proc(5)).
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|stat| stat.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |number: usize| -> Option<f64> { fields.get(number - 3)?.parse().ok() };

    if let (Some(user), Some(system)) = (field(14), field(15)) {
        family(
            &mut text,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (user + system) / USER_HZ,
        );
    }
    if let Some(kib) = status_kib("VmRSS:") {
        family(
            &mut text,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            kib * 1024.0,
        );
    }
    if let Some(bytes) = field(23) {
        family(
            &mut text,
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            bytes,
        );
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        family(
            &mut text,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            entries.count() as f64,
        );
    }
    if let Some(max) = max_open_files() {
        family(
            &mut text,
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    if let Some(threads) = field(20) {
        family(
            &mut text,
            "process_threads",
            "gauge",
            "Number of OS threads in the process.",
            threads,
        );
    }
    if let (Some(ticks), Some(boot)) = (field(22), boot_time()) {
        family(
            &mut text,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            boot + ticks / USER_HZ,
        );
    }
    text
}

fn family(text: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    );
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A `kB` line of `/proc/self/status`.
fn status_kib(key: &str) -> Option<f64> {
    read("/proc/self/status")?
        .lines()
        .find_map(|line| line.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The soft limit on open files (`unlimited` is left out).
fn max_open_files() -> Option<f64> {
    read("/proc/self/limits")?
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The system's boot, in seconds since the epoch (`btime` of `/proc/stat`).
fn boot_time() -> Option<f64> {
    read("/proc/stat")?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    fn value(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
            .parse()
            .expect("a number")
    }

    #[test]
    fn the_process_families_hold_this_process_values() {
        let text = render();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs_f64();
        let started = value(&text, "process_start_time_seconds");
        // This test process started before now, and not a day ago.
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started}"
        );
        assert!(value(&text, "process_resident_memory_bytes") > 1024.0 * 1024.0);
        assert!(
            value(&text, "process_virtual_memory_bytes")
                > value(&text, "process_resident_memory_bytes")
        );
        assert!(value(&text, "process_open_fds") >= 3.0);
        assert!(value(&text, "process_max_fds") >= value(&text, "process_open_fds"));
        assert!(value(&text, "process_threads") >= 1.0);
        assert!(value(&text, "process_cpu_seconds_total") >= 0.0);
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}: no help");
        }
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
    }
}
