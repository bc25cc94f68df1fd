//! What `/proc` tells of a process: its resident memory and peak since a reset
//! (`VmRSS`, `VmHWM`, `clear_refs`), and the CPU time it used (`utime + stime`), alone or summed
//! over every process of a server (PostgreSQL's backends, RabbitMQ's VM, the S3 server).

use std::fs;

/// Kernel clock ticks per second (`getconf CLK_TCK`; 100 on Linux everywhere it runs).
const TICKS_PER_SECOND: f64 = 100.0;

/// A field of `/proc/<pid>/status`, in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Resident memory now, in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    status_kib(pid, "VmRSS") * 1024
}

/// Peak resident memory since the process started or [`reset_peak`], in bytes.
pub fn peak_bytes(pid: u32) -> u64 {
    status_kib(pid, "VmHWM") * 1024
}

/// Resets the peak to the resident memory now (`echo 5 > /proc/<pid>/clear_refs`).
pub fn reset_peak(pid: u32) {
    fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .unwrap_or_else(|e| panic!("reset the peak RSS of {pid}: {e}"));
}

/// CPU seconds `pid` used so far (user + system), `None` once it is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// Every process whose command name (`/proc/<pid>/comm`) starts with `name`.
pub fn pids_named(name: &str) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim_end().starts_with(name))
        })
        .collect()
}

/// CPU seconds used so far by every process named `name`: a server's, backends included.
/// Processes that came and went between two readings are missed, so this is a lower bound.
pub fn cpu_seconds_of(name: &str) -> f64 {
    pids_named(name).into_iter().filter_map(cpu_seconds).sum()
}

/// CPU seconds the whole machine spent busy so far (`/proc/stat`: all but idle and iowait),
/// and how many CPUs it has.
pub fn machine_busy_seconds() -> (f64, usize) {
    let stat = fs::read_to_string("/proc/stat").expect("/proc/stat");
    let total = stat.lines().next().expect("cpu line");
    let ticks: Vec<f64> = total
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let busy: f64 = ticks.iter().take(8).sum::<f64>() - ticks[3] - ticks[4];
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    (busy / TICKS_PER_SECOND, cpus)
}

/// CPU seconds used so far by the PostgreSQL processes that serve `databases`: their client
/// backends (process title `postgres: <cluster>: <user> <database> <host>(<port>) ...`) and the
/// server's own processes (postmaster, WAL writer, checkpointer, ...), which serve every
/// database. Other sessions' backends on the shared server are left out; their share of the
/// shared processes is not, so this is an upper bound on what `databases` cost.
pub fn postgres_cpu_seconds_for(databases: &[&str]) -> f64 {
    pids_named("postgres")
        .into_iter()
        .filter(|pid| {
            let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let title = String::from_utf8_lossy(&cmdline);
            let client = title.contains("[local]") || title.contains('(');
            !client
                || title
                    .split_whitespace()
                    .any(|word| databases.contains(&word))
        })
        .filter_map(cpu_seconds)
        .sum()
}
