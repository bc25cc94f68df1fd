//! The run a claim gives a delivery: its job, its owner and attempt, and its time limit. Run by
//! `run.rs`, produced by `produce.rs`.

use std::time::Duration;

use contract::JobMessage;
use engine::TimeLimit;

/// A job this delivery holds the claim of.
pub(super) struct ClaimedRun<'a> {
    pub job: &'a JobMessage,
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
    /// The claim's owner, unique to this attempt.
    pub owner: &'a str,
    /// The claims of this job so far, this one included (1 = first).
    pub attempt: u32,
    /// How long ago the job first started (earlier runs count against its timeout).
    pub running_for: Duration,
}

impl ClaimedRun<'_> {
    /// The job's timeout (its own `timeoutSeconds`, else the engine's) and what earlier runs
    /// used of it.
    pub(super) fn time_limit(&self, default: Duration) -> TimeLimit {
        let timeout = self
            .job
            .timeout_seconds
            .map(|seconds| Duration::from_secs(seconds.into()))
            .unwrap_or(default);
        TimeLimit {
            timeout,
            elapsed: self.running_for,
        }
    }
}
