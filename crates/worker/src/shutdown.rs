//! The one place that listens for SIGTERM and SIGINT: it cancels the root token that every
//! long-running component watches.

use tokio_util::sync::CancellationToken;

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
