//! The cancel listener: a connection of its own to the state database, `LISTEN`ing for the
//! cancels the control API announces (lifecycle §3), so the replica that runs a canceled job
//! learns it within a moment; the run's lease heartbeat is the fallback when an announcement
//! is missed (the listener was reconnecting, or another replica's API took the request).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::job::JobCore;

/// Wakes the runs of announced jobs until `stop`; reconnects after a lost connection.
pub async fn listen(store: outbox::Store, core: Arc<JobCore>, stop: CancellationToken) {
    let mut backoff = Duration::from_millis(500);
    while !stop.is_cancelled() {
        match store.listen_for_cancels().await {
            Ok(mut listener) => {
                backoff = Duration::from_millis(500);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        announced = listener.recv() => match announced {
                            Ok(job_id) => core.wake(job_id),
                            Err(error) => {
                                tracing::warn!(%error, "The cancel listener lost its connection; reconnecting.");
                                break;
                            }
                        },
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "Could not listen for cancels; running jobs learn them from their heartbeat meanwhile.");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(15));
    }
}
