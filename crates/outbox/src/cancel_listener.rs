//! The LISTEN side of cancel announcements: a cancel of a running job is announced at its
//! commit (`control.rs` sends the `NOTIFY`), and the replica that runs the job hears it here.

use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::store::Store;

/// The channel a cancel is announced on (`NOTIFY`, at its commit) to the replica running the
/// job, whose lease heartbeat is the fallback.
pub const CANCEL_CHANNEL: &str = "fetcher_job_cancel";

/// Cancels announced on [`CANCEL_CHANNEL`], each as its job id. Reconnects by itself (an
/// announcement made while it was away is lost; the heartbeat still sees the cancel).
pub struct CancelListener(sqlx::postgres::PgListener);

impl CancelListener {
    /// The next announced job. A payload that is not a job id is skipped.
    pub async fn recv(&mut self) -> Result<Uuid> {
        loop {
            let notification = self
                .0
                .recv()
                .await
                .map_err(|e| OutboxError::sqlx("listening for cancels", e))?;
            if let Ok(job_id) = Uuid::parse_str(notification.payload()) {
                return Ok(job_id);
            }
        }
    }
}

impl Store {
    /// A listener of announced cancels, on a connection of its own.
    pub async fn listen_for_cancels(&self) -> Result<CancelListener> {
        let db = |e| OutboxError::sqlx("listening for cancels", e);
        let mut listener = sqlx::postgres::PgListener::connect_with(self.pool())
            .await
            .map_err(db)?;
        listener.listen(CANCEL_CHANNEL).await.map_err(db)?;
        Ok(CancelListener(listener))
    }
}
