//! What must hold once a schedule settled, read from the simulated store and objects. Each
//! broken rule is one line naming the job.

use std::collections::BTreeMap;

use contract::event::Operation;
use contract::lifecycle::{self, JobState, JobStatus};
use storage::object_key;
use uuid::Uuid;

use super::schedule::Sim;

/// Every rule broken, empty when all hold.
pub fn check(sim: &Sim) -> Vec<String> {
    let mut broken = Vec::new();
    let world = sim.store.world();
    let objects = sim.objects.stored.lock().expect("objects").clone();

    // Replayed through the machine, each job's log of writes is legal, continuous and ends in
    // the stored state.
    let mut replayed: BTreeMap<Uuid, Option<JobState>> = BTreeMap::new();
    let mut logged_events: BTreeMap<Uuid, Vec<&'static str>> = BTreeMap::new();
    for entry in &world.log {
        let at = replayed.entry(entry.job_id).or_insert(None);
        if *at != entry.from {
            broken.push(format!(
                "job {}: a write from {:?} while the stored state was {:?}",
                entry.job_id, entry.from, at
            ));
        }
        match lifecycle::step(entry.from, entry.step) {
            Ok(t) if t.to == entry.to && t.events == entry.events => {}
            judged => broken.push(format!(
                "job {}: wrote {:?} for {:?} from {:?}; the machine says {judged:?}",
                entry.job_id, entry.to, entry.step, entry.from
            )),
        }
        *at = Some(entry.to);
        let ops = logged_events.entry(entry.job_id).or_default();
        ops.extend(entry.events.iter().map(|e| Operation::from(*e).as_str()));
    }
    for (job_id, row) in &world.jobs {
        let replay = replayed.get(job_id).copied().flatten();
        if replay != Some(row.state) {
            broken.push(format!(
                "job {job_id}: stored {:?}, its writes replay to {replay:?}",
                row.state
            ));
        }
    }

    for (job_id, row) in &world.jobs {
        let status = row.state.status;
        let mut recorded: Vec<&str> = world
            .outbox
            .iter()
            .filter(|o| o.job_id == *job_id)
            .map(|o| o.event.attributes.status.as_str())
            .collect();
        // Every event recorded comes from a write the machine judged, and the reverse.
        let mut logged = logged_events.get(job_id).cloned().unwrap_or_default();
        recorded.sort_unstable();
        logged.sort_unstable();
        if recorded != logged {
            broken.push(format!(
                "job {job_id}: events recorded {recorded:?}, the writes' events {logged:?}"
            ));
        }
        let terminal: Vec<&str> = recorded
            .iter()
            .copied()
            .filter(|op| matches!(*op, "completed" | "failed" | "canceled"))
            .collect();
        let ended = status.is_terminal()
            || matches!(status, JobStatus::DeletionInProgress | JobStatus::Deleted);
        if terminal.len() != usize::from(ended) {
            broken.push(format!(
                "job {job_id} ({status}): terminal events {terminal:?}"
            ));
        }
        let outcome = match status {
            JobStatus::DeletionInProgress | JobStatus::Deleted => row.before_deletion,
            _ => Some(status),
        };
        if let (Some(outcome), [event]) = (outcome, terminal.as_slice()) {
            if outcome.as_str() != *event {
                broken.push(format!(
                    "job {job_id} ({status}): its terminal event is {event}, its outcome {outcome}"
                ));
            }
        }
        // Settled: nothing is left in between.
        if !matches!(
            status,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Canceled | JobStatus::Deleted
        ) {
            broken.push(format!(
                "job {job_id}: left {status} ({:?}) once settled and swept",
                row.state
            ));
        }
        let key = object_key("", None, *job_id).expect("key").full;
        let stored = objects.contains(&key);
        match status {
            JobStatus::Completed if !stored => {
                broken.push(format!("job {job_id}: completed without its object"))
            }
            JobStatus::Failed | JobStatus::Canceled | JobStatus::Deleted if stored => {
                broken.push(format!("job {job_id}: {status}, its object left stored"))
            }
            _ => {}
        }
    }
    broken
}
