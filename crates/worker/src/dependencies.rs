//! Waiting for the dependencies at start: PostgreSQL, RabbitMQ and S3 are asked in turn, each
//! again after a capped, jittered wait until it answers, while the health server already serves
//! `/health` (200) and `/readyz` (503, the failing check named). A Worker started before its
//! dependencies, or during their outage, waits instead of crash-looping.
//!
//! Only reachability is waited for. What a dependency answers once reachable (a migration that
//! cannot apply, a queue declared with conflicting arguments) still stops the start: waiting
//! would not change it. `selfprobe_result{dep}` is 0 while a dependency is waited for, 1 once
//! it answered.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::metrics;

/// From 500 ms doubling to 15 s between two probes of one dependency.
const PROBE_BACKOFF: outbox::Backoff = outbox::Backoff {
    base: Duration::from_millis(500),
    cap: Duration::from_secs(15),
};

/// Probes `dep` until `probe` succeeds; `None` when `shutdown` came first. `probe`'s error is a
/// redacted reason, logged at each failure.
pub(crate) async fn wait_for<T, F, Fut>(
    dep: &'static str,
    shutdown: &CancellationToken,
    mut probe: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut failures = 0u32;
    loop {
        let outcome = tokio::select! {
            outcome = probe() => outcome,
            _ = shutdown.cancelled() => return None,
        };
        match outcome {
            Ok(value) => {
                metrics::selfprobe(dep, true);
                if failures > 0 {
                    tracing::info!(
                        dep,
                        failures,
                        "A dependency answers now; the start goes on."
                    );
                }
                return Some(value);
            }
            Err(error) => {
                metrics::selfprobe(dep, false);
                failures += 1;
                let wait = PROBE_BACKOFF.delay(failures);
                tracing::warn!(dep, %error, failures, retry_in_ms = wait.as_millis() as u64, "A dependency does not answer; waiting for it before consuming.");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => return None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_dependency_is_probed_until_it_answers() {
        let calls = AtomicU32::new(0);
        let answer = wait_for("test", &CancellationToken::new(), || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0..=3 => Err("down".to_owned()),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(answer, Some(4));
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_when_the_worker_is_stopped() {
        let shutdown = CancellationToken::new();
        let stopper = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            stopper.cancel();
        });
        let answer: Option<()> =
            wait_for("test", &shutdown, || async { Err("down".to_owned()) }).await;
        assert_eq!(answer, None);
    }
}
