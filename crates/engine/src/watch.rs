//! What an extraction tells about its datasources while it runs, and how it is asked to stop
//! gracefully (lifecycle §1, §3): the caller's view of the job's executions.
//!
//! The engine reports; it stores nothing. Calls come from the datasources' tasks, so an
//! [`Observer`] must be cheap and must not block (hand the news to a channel).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use contract::lifecycle::ExecutionStatus;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::admission::{Admission, Unlimited};
use crate::error::EngineError;

/// Told about each datasource of an extraction as it starts, reads rows and ends.
pub trait Observer: Send + Sync {
    /// The datasource's read began (its connection is being resolved), once admitted.
    fn started(&self, datasource: &str);

    /// Rows read so far: at least every [`PROGRESS_ROWS`] rows or [`PROGRESS_EVERY`], whichever
    /// comes first (checked as each row arrives).
    fn progress(&self, datasource: &str, rows: u64);

    /// An attempt at the datasource failed transiently and it is read again after
    /// `retry.wait` (`JOB_RETRY_ATTEMPTS`); its rows count from 0 again. Nothing by default.
    fn retrying(&self, datasource: &str, retry: &Retry<'_>) {
        let _ = (datasource, retry);
    }

    /// The datasource ended. Datasources the extraction abandons (fail-fast, timeout, a forced
    /// stop) get no call: they were cut short, and the caller knows why.
    fn ended(&self, datasource: &str, end: &DatasourceEnd<'_>);
}

/// A datasource's failed attempt that is retried.
#[derive(Debug)]
pub struct Retry<'a> {
    /// The attempt that failed, from 1; the next one is `attempt + 1`.
    pub attempt: u32,
    /// Why it failed (transient: [`EngineError::is_transient`]).
    pub error: &'a EngineError,
    /// How long the datasource waits before its next attempt.
    pub wait: Duration,
}

/// How a datasource ended, as far as the engine knows.
#[derive(Debug)]
pub enum DatasourceEnd<'a> {
    /// Every table was read.
    Succeeded { rows: u64 },
    /// It failed with this error (its status is [`EngineError::execution_status`]).
    Failed(&'a EngineError),
    /// It never started: a graceful stop came while it waited its turn.
    Canceled,
}

impl DatasourceEnd<'_> {
    pub fn status(&self) -> ExecutionStatus {
        match self {
            DatasourceEnd::Succeeded { .. } => ExecutionStatus::Succeeded,
            DatasourceEnd::Failed(error) => error.execution_status(),
            DatasourceEnd::Canceled => ExecutionStatus::Canceled,
        }
    }
}

/// Rows between two progress reports, at most.
pub const PROGRESS_ROWS: u64 = 10_000;
/// Time between two progress reports while rows arrive, at most.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// An extraction's observer and its graceful stop.
#[derive(Clone)]
pub struct Watch {
    pub observer: Arc<dyn Observer>,
    /// Cancelled: start no more datasources (each waiting one ends
    /// [`DatasourceEnd::Canceled`]), let the running ones finish, then end with
    /// [`EngineError::Canceled`]. Dropping the extraction is the forced stop.
    pub graceful: CancellationToken,
    /// Waited on before each datasource's read (its concurrency cap); the datasource stays
    /// queued meanwhile ([`Observer::started`] comes once it is admitted).
    pub admission: Arc<dyn Admission>,
}

impl Watch {
    /// Nobody watches, nobody stops it.
    pub fn none() -> Watch {
        Watch {
            observer: Arc::new(Unwatched),
            graceful: CancellationToken::new(),
            admission: Arc::new(Unlimited),
        }
    }
}

struct Unwatched;

impl Observer for Unwatched {
    fn started(&self, _: &str) {}
    fn progress(&self, _: &str, _: u64) {}
    fn ended(&self, _: &str, _: &DatasourceEnd<'_>) {}
}

/// The progress clock of every extraction of an engine: one timer task, started with the first
/// extraction, raises a count each [`PROGRESS_EVERY`]. A row does not read the time (a clock
/// read costs more than the rest of the count) and a job spawns no timer of its own (a task
/// spawned and aborted per datasource cost two wake-ups of the runtime per job).
#[derive(Default)]
pub(crate) struct Ticks {
    started: OnceLock<Ticker>,
}

struct Ticker {
    count: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Ticks {
    /// The count, its timer started if it was not. Needs the Tokio runtime.
    fn count(&self) -> Arc<AtomicU64> {
        let ticker = self.started.get_or_init(|| {
            let count = Arc::new(AtomicU64::new(0));
            let raised = count.clone();
            let start = Instant::now();
            // Runs until the engine goes (`Ticker`'s drop aborts it).
            let task = tokio::spawn(async move {
                let mut next = start;
                loop {
                    next += PROGRESS_EVERY;
                    tokio::time::sleep_until(next).await;
                    raised.fetch_add(1, Ordering::Relaxed);
                }
            });
            Ticker { count, task }
        });
        ticker.count.clone()
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts one datasource's rows and reports them when due: each [`PROGRESS_ROWS`] rows, and
/// on the first row after each tick of the engine's [`Ticks`] (so at least every
/// [`PROGRESS_EVERY`] while rows arrive; the first report comes at the first tick after the
/// start, within [`PROGRESS_EVERY`]).
pub(crate) struct Progress {
    observer: Arc<dyn Observer>,
    datasource: String,
    reported_rows: u64,
    /// Raised by the engine's timer each [`PROGRESS_EVERY`].
    ticks: Arc<AtomicU64>,
    /// The count at the last report (or at the start).
    reported_tick: u64,
}

impl Progress {
    /// Needs the Tokio runtime (the first one starts the timer task).
    pub(crate) fn new(observer: Arc<dyn Observer>, datasource: &str, ticks: &Ticks) -> Progress {
        let ticks = ticks.count();
        let reported_tick = ticks.load(Ordering::Relaxed);
        Progress {
            observer,
            datasource: datasource.to_owned(),
            reported_rows: 0,
            ticks,
            reported_tick,
        }
    }

    /// `rows` have been read.
    #[inline]
    pub(crate) fn row(&mut self, rows: u64) {
        let tick = self.ticks.load(Ordering::Relaxed);
        if rows - self.reported_rows >= PROGRESS_ROWS || tick != self.reported_tick {
            self.observer.progress(&self.datasource, rows);
            self.reported_rows = rows;
            self.reported_tick = tick;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<u64>>);

    impl Observer for Seen {
        fn started(&self, _: &str) {}
        fn progress(&self, _: &str, rows: u64) {
            self.0.lock().unwrap().push(rows);
        }
        fn ended(&self, _: &str, _: &DatasourceEnd<'_>) {}
    }

    #[tokio::test(start_paused = true)]
    async fn progress_is_reported_every_ten_thousand_rows_or_two_seconds() {
        let seen = Arc::new(Seen::default());
        let ticks = Ticks::default();
        let mut progress = Progress::new(seen.clone(), "ledger", &ticks);
        for rows in 1..=25_000 {
            progress.row(rows);
        }
        assert_eq!(*seen.0.lock().unwrap(), [10_000, 20_000]);
        // The timer task runs when this one lets it: a few turns, which take no time.
        let turns = |n| async move {
            for _ in 0..n {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::advance(PROGRESS_EVERY - Duration::from_millis(1)).await;
        turns(10).await;
        progress.row(25_001);
        assert_eq!(seen.0.lock().unwrap().len(), 2, "too early");
        tokio::time::advance(Duration::from_millis(1)).await;
        turns(10).await;
        progress.row(25_002);
        assert_eq!(*seen.0.lock().unwrap(), [10_000, 20_000, 25_002]);
        progress.row(25_003);
        assert_eq!(seen.0.lock().unwrap().len(), 3, "reported once per tick");
        tokio::time::advance(PROGRESS_EVERY).await;
        turns(10).await;
        progress.row(25_004);
        assert_eq!(*seen.0.lock().unwrap(), [10_000, 20_000, 25_002, 25_004]);
    }

    #[test]
    fn ends_have_their_execution_status() {
        let removed = EngineError::RemovedConnection("ledger".into());
        assert_eq!(
            DatasourceEnd::Failed(&removed).status(),
            ExecutionStatus::Removed
        );
        assert_eq!(
            DatasourceEnd::Succeeded { rows: 3 }.status(),
            ExecutionStatus::Succeeded
        );
        assert_eq!(DatasourceEnd::Canceled.status(), ExecutionStatus::Canceled);
    }
}
