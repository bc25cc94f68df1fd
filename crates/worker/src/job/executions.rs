//! A run's executions (lifecycle §1): what the engine tells of each datasource, kept for the
//! job's end and written to the job store as it happens, so the job document shows how far the
//! run is and an execution's end is published while the others still run.
//!
//! The [`Ledger`] is the engine's [`Observer`]: it only notes the news (the engine's tasks must
//! not wait) and wakes its [`record`] loop, which writes what changed. A write that fails is
//! tried again; whatever the loop did not write, the job's end writes (the run's last reports
//! go into its terminal transaction, which then closes what is still open).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::Utc;
use contract::lifecycle::ExecutionStatus;
use contract::message::MappedFields;
use contract::Redacted;
use engine::{DatasourceEnd, EngineError, Observer, Retry};
use outbox::{ExecutionEvents, ExecutionReport};
use tokio::sync::Notify;
use uuid::Uuid;

use super::core::JobCore;
use crate::metrics::{self, RetryOutcome};

/// One run's executions, by datasource.
pub(super) struct Ledger {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    executions: BTreeMap<String, ExecutionReport>,
    /// Datasources whose report changed since the loop last wrote them.
    unwritten: BTreeSet<String>,
}

impl Ledger {
    /// Every datasource of the job, `QUEUED`.
    pub(super) fn new(mapped: &MappedFields) -> Arc<Ledger> {
        let executions = mapped
            .keys()
            .map(|name| {
                let report = ExecutionReport {
                    datasource: name.clone(),
                    status: ExecutionStatus::Queued,
                    row_count: 0,
                    started_at: None,
                    ended_at: None,
                    error: None,
                    attempts: 0,
                    last_error: None,
                };
                (name.clone(), report)
            })
            .collect();
        Arc::new(Ledger {
            state: Mutex::new(State {
                executions,
                unwritten: BTreeSet::new(),
            }),
            changed: Notify::new(),
        })
    }

    /// Every execution as the run last saw it.
    pub(super) fn reports(&self) -> Vec<ExecutionReport> {
        self.lock().executions.values().cloned().collect()
    }

    /// How long to gather changes before writing them: not long when an execution ended while
    /// others are still open, else as long as a row count may wait.
    fn gather(&self) -> Duration {
        let state = self.lock();
        let open = state
            .executions
            .values()
            .any(|report| !report.status.is_terminal());
        let ended = state.unwritten.iter().any(|name| {
            state
                .executions
                .get(name)
                .is_some_and(|report| report.status.is_terminal())
        });
        if open && ended {
            GATHER
        } else {
            PROGRESS
        }
    }

    /// The reports changed since the last call.
    fn take_unwritten(&self) -> Vec<ExecutionReport> {
        let mut state = self.lock();
        let names = std::mem::take(&mut state.unwritten);
        names
            .iter()
            .filter_map(|name| state.executions.get(name).cloned())
            .collect()
    }

    /// Marks reports a failed write left unwritten (unless they changed since).
    fn unwritten_again(&self, reports: &[ExecutionReport]) {
        let mut state = self.lock();
        for report in reports {
            state.unwritten.insert(report.datasource.clone());
        }
    }

    /// Applies `change` to the datasource's report unless it already ended; says whether it
    /// did.
    fn update(&self, datasource: &str, change: impl FnOnce(&mut ExecutionReport)) -> bool {
        {
            let mut state = self.lock();
            let Some(report) = state.executions.get_mut(datasource) else {
                return false;
            };
            // An execution that ended is final for this run.
            if report.status.is_terminal() {
                return false;
            }
            change(report);
            state.unwritten.insert(datasource.to_owned());
        }
        self.changed.notify_one();
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is plain data, valid after any panic of a holder.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Observer for Ledger {
    fn started(&self, datasource: &str) {
        self.update(datasource, |report| {
            report.status = ExecutionStatus::InProgress;
            report.started_at = Some(Utc::now());
            report.attempts = 1;
        });
    }

    fn progress(&self, datasource: &str, rows: u64) {
        self.update(datasource, |report| report.row_count = rows);
    }

    /// The attempt that failed is noted as the last error; the rows start again from 0.
    fn retrying(&self, datasource: &str, retry: &Retry<'_>) {
        let noted = self.update(datasource, |report| {
            report.attempts = retry.attempt + 1;
            report.last_error = Some(Redacted::new(&retry.error.to_string()).as_str().to_owned());
            report.row_count = 0;
        });
        if noted {
            metrics::datasource_retry(RetryOutcome::Retried);
        }
    }

    fn ended(&self, datasource: &str, end: &DatasourceEnd<'_>) {
        let mut retried = false;
        let noted = self.update(datasource, |report| {
            retried = report.attempts > 1;
            report.status = end.status();
            report.ended_at = Some(Utc::now());
            match end {
                DatasourceEnd::Succeeded { rows } => report.row_count = *rows,
                DatasourceEnd::Failed(error) => {
                    report.error = Some(Redacted::new(&error.to_string()).as_str().to_owned())
                }
                DatasourceEnd::Canceled => {}
            }
        });
        if noted && retried {
            let outcome = match end {
                DatasourceEnd::Succeeded { .. } => RetryOutcome::Recovered,
                // A graceful stop during the wait: neither recovered nor given up on.
                DatasourceEnd::Canceled | DatasourceEnd::Failed(EngineError::Canceled) => return,
                DatasourceEnd::Failed(_) => RetryOutcome::Exhausted,
            };
            metrics::datasource_retry(outcome);
        }
    }
}

/// How long a failed write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);
/// How long changes gather before they are written together when an execution ended while
/// others go on (its end is news: a graceful cancel's queued datasources, a finished one).
const GATHER: Duration = Duration::from_millis(250);
/// How long starts and row counts gather (lifecycle §3: a running execution's `rowCount` is
/// updated at least every 2 s). A job shorter than that has its executions written once, by
/// its end, instead of once per change.
const PROGRESS: Duration = engine::watch::PROGRESS_EVERY;

/// Who writes a run's executions, and for which job.
pub(super) struct Recorder<'a> {
    pub core: &'a JobCore,
    pub job_id: Uuid,
    /// The run's claim: nothing is written once it is lost.
    pub owner: &'a str,
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
}

impl Recorder<'_> {
    /// Writes what changed in `ledger`, as it changes, and publishes the events of the ends it
    /// wrote. Runs until dropped (the run's end).
    pub(super) async fn record(self, ledger: Arc<Ledger>) -> Infallible {
        // Polled within the run's `job` span: its trace (telemetry on) goes with the events.
        let traceparent = crate::traces::current_traceparent();
        let events = ExecutionEvents {
            tenant: self.tenant,
            request_id: self.request_id,
            source: &self.core.settings.source,
            publisher: self.owner,
            lease: self.core.settings.lease,
            traceparent: traceparent.as_deref(),
        };
        loop {
            ledger.changed.notified().await;
            let mut waited = Duration::ZERO;
            // An end that comes while starts and row counts gather is written sooner.
            while waited < ledger.gather() {
                tokio::time::sleep(GATHER).await;
                waited += GATHER;
            }
            let reports = ledger.take_unwritten();
            if reports.is_empty() {
                continue;
            }
            let written = self
                .core
                .ports
                .jobs
                .record_executions(self.job_id, self.owner, &reports, &events)
                .await;
            match written {
                Ok(recorded) => self.core.publish(self.owner, &recorded).await,
                Err(error) => {
                    tracing::warn!(job_id = %self.job_id, %error, "Could not record the job's executions; trying again.");
                    ledger.unwritten_again(&reports);
                    tokio::time::sleep(RETRY).await;
                    ledger.changed.notify_one();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use engine::EngineError;

    use super::*;

    fn mapped(names: &[&str]) -> MappedFields {
        names
            .iter()
            .map(|name| {
                (
                    (*name).to_owned(),
                    BTreeMap::from([("t".to_owned(), vec!["id".to_owned()])]),
                )
            })
            .collect()
    }

    fn statuses(ledger: &Ledger) -> Vec<(String, ExecutionStatus)> {
        ledger
            .reports()
            .into_iter()
            .map(|r| (r.datasource, r.status))
            .collect()
    }

    #[test]
    fn a_run_moves_each_execution_once_to_its_end() {
        let ledger = Ledger::new(&mapped(&["a", "b", "c"]));
        ledger.started("a");
        ledger.progress("a", 10_000);
        ledger.ended("a", &DatasourceEnd::Succeeded { rows: 12_345 });
        ledger.started("b");
        let missing = EngineError::Schema {
            connection: "b".into(),
            detail: "table t not found".into(),
        };
        ledger.ended("b", &DatasourceEnd::Failed(&missing));
        ledger.ended("c", &DatasourceEnd::Canceled);
        // Ends are final: later news of an ended execution changes nothing.
        ledger.ended("a", &DatasourceEnd::Canceled);
        ledger.progress("b", 5);
        assert_eq!(
            statuses(&ledger),
            [
                ("a".into(), ExecutionStatus::Succeeded),
                ("b".into(), ExecutionStatus::Rejected),
                ("c".into(), ExecutionStatus::Canceled),
            ]
        );
        let reports = ledger.reports();
        assert_eq!(reports[0].row_count, 12_345);
        assert!(reports[0].started_at.is_some() && reports[0].ended_at.is_some());
        assert_eq!(
            reports[1].error.as_deref(),
            Some("datasource b failed schema validation: table t not found")
        );
        assert!(reports[2].started_at.is_none(), "c never started");
    }

    #[test]
    fn a_retried_execution_counts_its_attempts_and_keeps_the_last_retried_error() {
        let ledger = Ledger::new(&mapped(&["a", "b"]));
        ledger.started("a");
        ledger.started("b");
        ledger.progress("a", 40);
        let reset = EngineError::Connect {
            connection: "a".into(),
            detail: "connection reset by peer".into(),
            transient: true,
        };
        for attempt in 1..=2 {
            let retry = Retry {
                attempt,
                error: &reset,
                wait: Duration::from_millis(10),
            };
            ledger.retrying("a", &retry);
        }
        ledger.ended("a", &DatasourceEnd::Succeeded { rows: 7 });
        ledger.ended("b", &DatasourceEnd::Succeeded { rows: 1 });
        let reports = ledger.reports();
        assert_eq!(reports[0].attempts, 3);
        assert_eq!(reports[0].row_count, 7);
        assert_eq!(
            reports[0].last_error.as_deref(),
            Some("failed to connect to datasource a: connection reset by peer")
        );
        assert_eq!(reports[1].attempts, 1, "read at its first attempt");
        assert_eq!(reports[1].last_error, None);
        let details = |r: &ExecutionReport| {
            outbox::status_details(r.error.clone(), r.attempts, r.last_error.clone(), 1)
        };
        assert_eq!(details(&reports[0])["attempts"], 3);
        assert!(details(&reports[1]).is_empty(), "no retry, no details");
    }

    #[test]
    fn an_end_while_others_run_is_written_soon_starts_and_rows_can_wait() {
        let ledger = Ledger::new(&mapped(&["a", "b"]));
        ledger.started("a");
        ledger.progress("a", 10);
        assert_eq!(ledger.gather(), PROGRESS);
        ledger.ended("b", &DatasourceEnd::Canceled);
        assert_eq!(ledger.gather(), GATHER, "b ended, a still runs");
        ledger.take_unwritten();
        ledger.ended("a", &DatasourceEnd::Succeeded { rows: 10 });
        assert_eq!(
            ledger.gather(),
            PROGRESS,
            "the last end is the job's end to write"
        );
    }

    #[test]
    fn what_changed_is_written_once_and_again_after_a_failed_write() {
        let ledger = Ledger::new(&mapped(&["a", "b"]));
        ledger.started("a");
        ledger.progress("a", 3);
        let first = ledger.take_unwritten();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].row_count, 3);
        assert!(ledger.take_unwritten().is_empty());
        ledger.unwritten_again(&first);
        assert_eq!(ledger.take_unwritten(), first);
        ledger.started("x");
        assert!(
            ledger.take_unwritten().is_empty(),
            "not a datasource of the job"
        );
    }
}
