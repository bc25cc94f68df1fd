//! Waiting for the dependencies at start: PostgreSQL, RabbitMQ and S3 are asked in turn, each
//! again after a capped, jittered wait until it answers, while the health server already serves
//! `/health` (200) and `/readyz` (503, the failing check named). A Worker started before its
//! dependencies, or during their outage, waits instead of crash-looping.
//!
//! Only reachability is waited for. A dependency that answers but refuses the Worker (a
//! database that does not exist, a password it rejects, a missing vhost or bucket) stops the
//! start at once with what to fix: no wait ends that, only someone changing something. So does
//! what a reachable dependency answers later (a migration that cannot apply, a queue declared
//! with conflicting arguments). `selfprobe_result{dep}` is 0 while a dependency is waited for,
//! 1 once it answered.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::metrics;

/// From 500 ms doubling to 15 s between two probes of one dependency.
const PROBE_BACKOFF: outbox::Backoff = outbox::Backoff {
    base: Duration::from_millis(500),
    cap: Duration::from_secs(15),
};

/// Why a probe of a dependency did not succeed. Both reasons are redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProbeError {
    /// It did not answer (refused the connection, timed out, closed it): wait for it.
    Unreachable(String),
    /// It answered and refused the Worker: waiting changes nothing. `fix` tells the operator
    /// what to change.
    Refused { reason: String, fix: String },
}

impl From<String> for ProbeError {
    fn from(reason: String) -> ProbeError {
        ProbeError::Unreachable(reason)
    }
}

/// A dependency refused the Worker: the start stops with this error, logged once at ERROR.
#[derive(Debug, thiserror::Error)]
#[error("{dep} refuses the Worker: {reason}; {fix}")]
pub(crate) struct Refused {
    pub dep: &'static str,
    pub reason: String,
    pub fix: String,
}

/// Probes `dep` until `probe` succeeds; `Ok(None)` when `shutdown` came first, an error when
/// the dependency refuses the Worker. An unreachable dependency's reason is logged at WARN at
/// each failure.
pub(crate) async fn wait_for<T, E, F, Fut>(
    dep: &'static str,
    shutdown: &CancellationToken,
    mut probe: F,
) -> Result<Option<T>, Refused>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<ProbeError>,
{
    let mut failures = 0u32;
    loop {
        let outcome = tokio::select! {
            outcome = probe() => outcome,
            _ = shutdown.cancelled() => return Ok(None),
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
                return Ok(Some(value));
            }
            Err(error) => {
                let error = match error.into() {
                    ProbeError::Unreachable(reason) => reason,
                    ProbeError::Refused { reason, fix } => {
                        metrics::selfprobe(dep, false);
                        return Err(Refused { dep, reason, fix });
                    }
                };
                metrics::selfprobe(dep, false);
                failures += 1;
                let wait = PROBE_BACKOFF.delay(failures);
                tracing::warn!(dep, %error, failures, retry_in_ms = wait.as_millis() as u64, "A dependency does not answer; waiting for it before consuming.");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => return Ok(None),
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
        assert_eq!(answer.unwrap(), Some(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dependency_that_refuses_the_worker_stops_the_wait_at_once() {
        let calls = AtomicU32::new(0);
        let refused = wait_for("postgres", &CancellationToken::new(), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(ProbeError::Refused {
                reason: "database \"x\" does not exist".to_owned(),
                fix: "create it or fix DATABASE_URL".to_owned(),
            })
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            refused.to_string(),
            "postgres refuses the Worker: database \"x\" does not exist; create it or fix DATABASE_URL"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_when_the_worker_is_stopped() {
        let shutdown = CancellationToken::new();
        let stopper = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            stopper.cancel();
        });
        let answer: Option<()> = wait_for("test", &shutdown, || async { Err("down".to_owned()) })
            .await
            .unwrap();
        assert_eq!(answer, None);
    }
}
