//! The cleanup a test resource runs from `Drop` when its test panicked before the async cleanup.

use std::future::Future;

/// Runs the future `cleanup` makes to its end on a new thread with a runtime of its own, and
/// waits for it.
///
/// `Drop` may run inside the test's runtime, which cannot be blocked on, hence the thread. The
/// future is made on that thread, so it need not be `Send` (sqlx's `&mut PgConnection` executors
/// are not general enough for it). Best effort: a cleanup that fails (or a runtime that cannot be
/// built) is ignored, so that one panic never turns into an abort.
pub fn run_detached<M, F>(cleanup: M)
where
    M: FnOnce() -> F + Send + 'static,
    F: Future<Output = ()>,
{
    let thread = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(cleanup());
    });
    let _ = thread.join();
}
