//! Published marks batched across jobs: the rows several jobs published within a few
//! milliseconds of each other are marked by one statement.
//!
//! A job's publisher hands its confirmed rows to [`Marks`] and goes on; a background task marks
//! what waits once a window has passed since the first row arrived, or at once when enough rows
//! wait, with one [`outbox::Store::mark_published_by`] per flush. A row is handed over only
//! once the broker confirmed it, so it is never marked before it was published; a row whose
//! mark is lost (the cap, a flush that failed twice, a crash) stays leased until its lease ends
//! and the repairer publishes it again: at least once, as the contract allows (contract §8).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use outbox::Store;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::metrics;

/// How marks are batched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarksConfig {
    /// How long the first row handed over waits for others before its flush: the latency a
    /// mark gains, and the time in which other jobs' marks can join it.
    pub window: Duration,
    /// A flush starts at once when this many rows wait.
    pub flush_rows: usize,
    /// Most rows waiting; beyond it new rows are not queued but left to the repairer, so a
    /// state database that stopped answering cannot make the queue grow without end.
    pub cap: usize,
}

impl Default for MarksConfig {
    fn default() -> MarksConfig {
        MarksConfig {
            window: Duration::from_millis(20),
            flush_rows: 256,
            cap: 8192,
        }
    }
}

/// What the batcher has done so far (for tests and logs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarksStats {
    /// Statements sent, failed ones included.
    pub flushes: u64,
    /// Of `flushes`, those that failed.
    pub failed_flushes: u64,
    /// Rows marked published.
    pub marked: u64,
    /// Rows left to the repairer: beyond the cap, handed over after the close, or in a flush
    /// that failed twice.
    pub left: u64,
}

/// Marks confirmed rows published, several jobs' rows per statement. Cheap to clone; the
/// background task ends once [`Marks::close`] is called or every clone is dropped, after a
/// last flush.
#[derive(Clone)]
pub struct Marks {
    handle: Arc<Handle>,
}

/// Closes the queue when the last [`Marks`] goes, so the task flushes what waits and ends.
struct Handle {
    shared: Arc<Shared>,
}

struct Shared {
    config: MarksConfig,
    // A std mutex: it is held only to push or take rows, never across an await.
    state: Mutex<State>,
    /// Wakes the task: the first row of a window, a full batch, the close.
    wake: Notify,
    task: Mutex<Option<JoinHandle<()>>>,
    flushes: AtomicU64,
    failed_flushes: AtomicU64,
    marked: AtomicU64,
    left: AtomicU64,
}

#[derive(Default)]
struct State {
    /// `(outbox id, lease owner)`, in the order handed over.
    waiting: Vec<(i64, String)>,
    closed: bool,
    /// Rows left since the last warning about it, and when that was: rows left under a
    /// sustained overload make one WARN line every [`LEFT_WARN_EVERY`], not one per row.
    left_unwarned: u64,
    warned_at: Option<Instant>,
}

/// The least time between two warnings about rows left to the repairer.
const LEFT_WARN_EVERY: Duration = Duration::from_secs(30);

impl Marks {
    /// Starts the batcher's task on the current tokio runtime.
    pub fn start(store: Store, config: MarksConfig) -> Marks {
        let config = MarksConfig {
            flush_rows: config.flush_rows.max(1),
            cap: config.cap.max(1),
            ..config
        };
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            task: Mutex::new(None),
            flushes: AtomicU64::new(0),
            failed_flushes: AtomicU64::new(0),
            marked: AtomicU64::new(0),
            left: AtomicU64::new(0),
        });
        let task = tokio::spawn(run(shared.clone(), store));
        *lock(&shared.task) = Some(task);
        Marks {
            handle: Arc::new(Handle { shared }),
        }
    }

    /// Hands over rows leased to `owner` that the broker confirmed, to be marked published by a
    /// later flush. Never waits. Returns how many were queued: the others (beyond the cap, or
    /// after [`Marks::close`]) are left to the repairer.
    pub fn mark_later(&self, owner: &str, ids: &[i64]) -> usize {
        if ids.is_empty() {
            return 0;
        }
        let shared = &self.handle.shared;
        let (queued, warn) = {
            let mut state = lock(&shared.state);
            let room = if state.closed {
                0
            } else {
                shared.config.cap.saturating_sub(state.waiting.len())
            };
            let queued = ids.len().min(room);
            let was_empty = state.waiting.is_empty();
            state
                .waiting
                .extend(ids[..queued].iter().map(|&id| (id, owner.to_owned())));
            metrics::marks_waiting(state.waiting.len());
            if queued > 0 && (was_empty || state.waiting.len() >= shared.config.flush_rows) {
                shared.wake.notify_one();
            }
            let left = (ids.len() - queued) as u64;
            let warn = if left > 0 {
                state.left_unwarned += left;
                let due = state
                    .warned_at
                    .is_none_or(|at| at.elapsed() >= LEFT_WARN_EVERY);
                due.then(|| {
                    state.warned_at = Some(Instant::now());
                    (std::mem::take(&mut state.left_unwarned), state.closed)
                })
            } else {
                None
            };
            (queued, warn)
        };
        if queued < ids.len() {
            let left = (ids.len() - queued) as u64;
            shared.left.fetch_add(left, Ordering::Relaxed);
            metrics::mark_rows(false, left);
        }
        if let Some((rows, closed)) = warn {
            let why = if closed { "closed" } else { "full" };
            tracing::warn!(
                rows,
                queue = why,
                cap = shared.config.cap,
                "Published events not queued to be marked; the repairer will publish them again once their lease ends."
            );
        }
        queued
    }

    /// Flushes what waits (a failed flush is retried once) and ends the task, waiting at most
    /// `timeout`; what is still unmarked then is left to the repairer. Call it before the state
    /// database's pool closes. Later calls return at once.
    pub async fn close(&self, timeout: Duration) {
        let shared = &self.handle.shared;
        lock(&shared.state).closed = true;
        shared.wake.notify_one();
        let Some(task) = lock(&shared.task).take() else {
            return;
        };
        let abort = task.abort_handle();
        if tokio::time::timeout(timeout, task).await.is_err() {
            abort.abort();
            let waiting = lock(&shared.state).waiting.len();
            tracing::warn!(
                waiting,
                timeout_ms = timeout.as_millis() as u64,
                "Published marks did not finish in time; the repairer will publish their events again."
            );
        }
    }

    /// What the batcher has done so far.
    pub fn stats(&self) -> MarksStats {
        let shared = &self.handle.shared;
        MarksStats {
            flushes: shared.flushes.load(Ordering::Relaxed),
            failed_flushes: shared.failed_flushes.load(Ordering::Relaxed),
            marked: shared.marked.load(Ordering::Relaxed),
            left: shared.left.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.wake.notify_one();
    }
}

/// The batcher's task: waits for a first row, lets the window fill, flushes; until closed.
async fn run(shared: Arc<Shared>, store: Store) {
    // Rows whose flush failed once: they go with the next flush, and are left to the repairer
    // if it fails too.
    let mut retry: Vec<(i64, String)> = Vec::new();
    loop {
        loop {
            {
                let state = lock(&shared.state);
                if state.closed || !state.waiting.is_empty() || !retry.is_empty() {
                    break;
                }
            }
            shared.wake.notified().await;
        }
        let deadline = Instant::now() + shared.config.window;
        loop {
            {
                let state = lock(&shared.state);
                if state.closed || state.waiting.len() >= shared.config.flush_rows {
                    break;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                _ = shared.wake.notified() => {}
            }
        }
        let (waiting, closed) = {
            let mut state = lock(&shared.state);
            metrics::marks_waiting(0);
            (std::mem::take(&mut state.waiting), state.closed)
        };
        let retried = retry.len();
        let mut rows = std::mem::take(&mut retry);
        rows.extend(waiting);
        if !rows.is_empty() {
            retry = flush(&shared, &store, rows, retried).await;
        }
        if closed && retry.is_empty() && lock(&shared.state).waiting.is_empty() {
            return;
        }
    }
}

/// One statement for `rows`, of which the first `retried` failed once already. Returns the rows
/// to retry at the next flush.
async fn flush(
    shared: &Shared,
    store: &Store,
    mut rows: Vec<(i64, String)>,
    retried: usize,
) -> Vec<(i64, String)> {
    shared.flushes.fetch_add(1, Ordering::Relaxed);
    let marks: Vec<(i64, &str)> = rows
        .iter()
        .map(|(id, owner)| (*id, owner.as_str()))
        .collect();
    match store.mark_published_by(&marks).await {
        Ok(marked) => {
            metrics::mark_flush(true);
            // Every row handed over is done with: a row not marked was no longer leased to its
            // publisher (the repairer took it), which marks it itself.
            metrics::mark_rows(true, rows.len() as u64);
            shared.marked.fetch_add(marked, Ordering::Relaxed);
            Vec::new()
        }
        Err(error) => {
            metrics::mark_flush(false);
            shared.failed_flushes.fetch_add(1, Ordering::Relaxed);
            let again = rows.split_off(retried);
            if retried > 0 {
                metrics::mark_rows(false, retried as u64);
                shared.left.fetch_add(retried as u64, Ordering::Relaxed);
                tracing::warn!(
                    rows = retried,
                    %error,
                    "Could not mark published events twice; the repairer will publish them again once their lease ends."
                );
            }
            if !again.is_empty() {
                tracing::info!(
                    rows = again.len(),
                    %error,
                    "Could not mark published events; retrying at the next flush."
                );
            }
            again
        }
    }
}

/// The lock, whatever a panicking holder left: the state is a queue and flags, each change
/// complete before the guard drops.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
