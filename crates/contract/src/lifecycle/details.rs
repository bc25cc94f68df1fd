//! `jobProcessDetails`: how many of a job's executions are in each status (IoT's counts).

use super::status::ExecutionStatus;

/// The count of a job's executions in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobProcessDetails {
    counts: [u64; 8],
}

impl JobProcessDetails {
    /// The counts of these executions' statuses.
    pub fn of(statuses: impl IntoIterator<Item = ExecutionStatus>) -> JobProcessDetails {
        let mut details = JobProcessDetails::default();
        for status in statuses {
            details.counts[index(status)] += 1;
        }
        details
    }

    pub fn count(&self, status: ExecutionStatus) -> u64 {
        self.counts[index(status)]
    }

    /// The members as the job document and the `job.canceled` body write them, in order.
    pub fn members(&self) -> [(&'static str, u64); 8] {
        use ExecutionStatus as E;
        [
            ("numberOfQueuedThings", self.count(E::Queued)),
            ("numberOfInProgressThings", self.count(E::InProgress)),
            ("numberOfSucceededThings", self.count(E::Succeeded)),
            ("numberOfFailedThings", self.count(E::Failed)),
            ("numberOfRejectedThings", self.count(E::Rejected)),
            ("numberOfRemovedThings", self.count(E::Removed)),
            ("numberOfTimedOutThings", self.count(E::TimedOut)),
            ("numberOfCanceledThings", self.count(E::Canceled)),
        ]
    }
}

fn index(status: ExecutionStatus) -> usize {
    ExecutionStatus::ALL
        .iter()
        .position(|s| *s == status)
        .expect("every status is in ALL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_status_and_writes_them_in_the_documents_order() {
        use ExecutionStatus as E;
        let details = JobProcessDetails::of([E::Succeeded, E::Succeeded, E::Rejected, E::Canceled]);
        let members = details.members();
        assert_eq!(members[2], ("numberOfSucceededThings", 2));
        assert_eq!(members[4], ("numberOfRejectedThings", 1));
        assert_eq!(members[7], ("numberOfCanceledThings", 1));
        assert_eq!(members.iter().map(|(_, n)| n).sum::<u64>(), 4);
        assert_eq!(details.count(E::Queued), 0);
    }
}
