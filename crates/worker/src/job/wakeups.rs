//! Waking a run's heartbeat at once when its job's cancel is announced (the state database's
//! `NOTIFY`, read by the Worker's listener), instead of at its next tick.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use uuid::Uuid;

/// The runs of this Worker, by job.
#[derive(Default)]
pub(super) struct Wakeups(Mutex<HashMap<Uuid, Arc<Notify>>>);

impl Wakeups {
    /// Registers a run of `job_id` until the guard drops.
    pub(super) fn register(&self, job_id: Uuid) -> Registered<'_> {
        let notify = Arc::new(Notify::new());
        self.map().insert(job_id, notify.clone());
        Registered {
            wakeups: self,
            job_id,
            notify,
        }
    }

    /// Wakes the run of `job_id`, if this Worker runs it.
    pub(super) fn wake(&self, job_id: Uuid) -> bool {
        match self.map().get(&job_id) {
            Some(notify) => {
                notify.notify_one();
                true
            }
            None => false,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Notify>>> {
        // A panic while holding the map cannot leave it half-written: take it as it is.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A registered run.
pub(super) struct Registered<'a> {
    wakeups: &'a Wakeups,
    job_id: Uuid,
    pub notify: Arc<Notify>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut map = self.wakeups.map();
        if map
            .get(&self.job_id)
            .is_some_and(|n| Arc::ptr_eq(n, &self.notify))
        {
            map.remove(&self.job_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_registered_run_is_woken_and_only_while_registered() {
        let wakeups = Wakeups::default();
        let job = Uuid::new_v4();
        assert!(!wakeups.wake(job));
        {
            let _run = wakeups.register(job);
            assert!(wakeups.wake(job));
        }
        assert!(!wakeups.wake(job), "unregistered when the run ends");
    }
}
