//! The two terminal statuses a job event can report.

use std::fmt;
use std::str::FromStr;

/// A terminal job status; each has its own routing key, CloudEvents type and ce-id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalStatus {
    Completed,
    Failed,
}

impl TerminalStatus {
    /// `completed` / `failed`: the job's status and the `ce-eventtype`.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminalStatus::Completed => "completed",
            TerminalStatus::Failed => "failed",
        }
    }

    /// `job.completed` / `job.failed`.
    pub fn routing_key(self) -> &'static str {
        match self {
            TerminalStatus::Completed => "job.completed",
            TerminalStatus::Failed => "job.failed",
        }
    }

    /// `studio.lerian.job.completed` / `studio.lerian.job.failed`.
    pub fn ce_type(self) -> &'static str {
        match self {
            TerminalStatus::Completed => "studio.lerian.job.completed",
            TerminalStatus::Failed => "studio.lerian.job.failed",
        }
    }
}

impl fmt::Display for TerminalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not `completed` or `failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a terminal status (expected completed or failed)")]
pub struct NotTerminal;

impl FromStr for TerminalStatus {
    type Err = NotTerminal;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "completed" => Ok(TerminalStatus::Completed),
            "failed" => Ok(TerminalStatus::Failed),
            _ => Err(NotTerminal),
        }
    }
}
