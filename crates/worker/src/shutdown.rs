//! The one place that listens for SIGTERM and SIGINT: it cancels the root token that every
//! long-running component watches. And the drain's bound: once the signal came, the Worker is
//! gone within `READYZ_DRAIN_DELAY_SEC` + `SHUTDOWN_GRACE_SEC` + [`CLOSE_BUDGET`].

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::ShutdownSettings;

/// What the drain may spend after the grace period: closing the broker connection, relaying
/// the outbox once more, closing the publisher and the state database's pool.
pub const CLOSE_BUDGET: Duration = Duration::from_secs(15);

/// Cancels `token` on the first SIGTERM or SIGINT. Runs until then.
pub async fn on_signal(token: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            // Without a SIGTERM handler only Ctrl-C can stop the Worker gracefully.
            Err(error) => {
                tracing::warn!(%error, "Cannot listen for SIGTERM.");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = terminate => tracing::info!("SIGTERM received; draining."),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; draining."),
        _ = token.cancelled() => return,
    }
    token.cancel();
}

/// The longest a drain may take, from the signal to the end of `run_until_stopped`.
pub fn drain_limit(settings: &ShutdownSettings) -> Duration {
    settings
        .readyz_drain_delay
        .saturating_add(settings.grace)
        .saturating_add(CLOSE_BUDGET)
}

/// Runs `run` to its end, or until `limit` after `token` was cancelled, whichever comes first;
/// `None` when the limit cut it short (what it had not finished is dropped, and the broker
/// redelivers every message it had not settled).
pub async fn bounded<F: Future>(
    run: F,
    token: CancellationToken,
    limit: Duration,
) -> Option<F::Output> {
    let deadline = async {
        token.cancelled().await;
        tokio::time::sleep(limit).await;
    };
    tokio::select! {
        output = run => Some(output),
        _ = deadline => {
            tracing::warn!(limit_secs = limit.as_secs(), close_budget_secs = CLOSE_BUDGET.as_secs(), "The drain did not end within READYZ_DRAIN_DELAY_SEC + SHUTDOWN_GRACE_SEC + the close budget; stopping now.");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_drain_that_overruns_its_limit_is_cut_short() {
        let token = CancellationToken::new();
        token.cancel();
        let stuck = std::future::pending::<()>();
        assert_eq!(bounded(stuck, token, Duration::from_secs(5)).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_limit_only_counts_from_the_signal() {
        let token = CancellationToken::new();
        let work = async {
            // Longer than the limit, but finished before any signal.
            tokio::time::sleep(Duration::from_secs(60)).await;
            7
        };
        assert_eq!(bounded(work, token, Duration::from_secs(5)).await, Some(7));
    }

    #[test]
    fn the_limit_is_the_documented_sum() {
        let settings = ShutdownSettings {
            readyz_drain_delay: Duration::from_secs(12),
            grace: Duration::from_secs(330),
        };
        assert_eq!(drain_limit(&settings), Duration::from_secs(357));
        let huge = ShutdownSettings {
            readyz_drain_delay: Duration::MAX,
            grace: Duration::MAX,
        };
        assert_eq!(drain_limit(&huge), Duration::MAX);
    }
}
