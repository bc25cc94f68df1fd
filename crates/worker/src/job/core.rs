//! The job core: what every step shares ([`JobCore`]: its ports, settings and wake-ups, the
//! publish of recorded events), and what a delivery comes to ([`Disposition`], [`Requeue`]).
//! The order a delivery's steps run in is `deliver.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use contract::envelope::VerifyPolicy;
use uuid::Uuid;

use super::ports::Ports;
use super::wakeups::Wakeups;

/// What happens to a delivery once it is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Done with: acknowledge.
    Ack,
    /// Refused (a bad signature, another tenant, ...): dead-lettered with this reason, the
    /// code of `fetcher_messages_rejected_total{reason}`.
    DeadLetter(&'static str),
    /// Not done with, for this cause: give it back to the queue to be tried again.
    Retry(Requeue),
}

/// Why a delivery goes back to the queue: the `reason` of `fetcher_messages_requeued_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// The state database did not answer (or lost its answer to a commit).
    StateDatabase,
    /// The connection store (the state database's `connections` table, the datasources'
    /// settings) did not answer.
    ConnectionStore,
    /// The Worker is stopping: the delivery waited on another owner's claim, or its job had not
    /// finished within `SHUTDOWN_GRACE_SEC`.
    Shutdown,
    /// The delivery could not be settled: the channel to the broker was gone.
    Broker,
    /// A step of the Worker's own was interrupted (a sealing task, an event it could not build).
    Internal,
}

impl Requeue {
    /// Every cause, in the order the metric's series are registered.
    pub const ALL: [Requeue; 5] = [
        Requeue::StateDatabase,
        Requeue::ConnectionStore,
        Requeue::Shutdown,
        Requeue::Broker,
        Requeue::Internal,
    ];

    /// The metric's `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Requeue::StateDatabase => "state_database",
            Requeue::ConnectionStore => "connection_store",
            Requeue::Shutdown => "shutdown",
            Requeue::Broker => "broker",
            Requeue::Internal => "internal",
        }
    }
}

/// How the core judges and runs jobs.
#[derive(Clone)]
pub struct JobSettings {
    pub keys: crypto::KeySet,
    /// `STREAMING_CLOUDEVENTS_SOURCE`.
    pub source: String,
    /// This Worker's id; each attempt's claim owner is derived from it.
    pub worker_id: String,
    /// A claim's lease (renewed while the job runs).
    pub lease: Duration,
    pub verify: VerifyPolicy,
    pub limits: MessageLimits,
    /// `OBJECT_STORAGE_RETRY_SEC`: how long a result write is tried again in the same run.
    pub storage_retry: Duration,
    /// `DATASOURCE_<NAME>_MAX_CONCURRENT`: how many reads of each capped datasource run at once
    /// across every replica, by connection name ([`super::ports::SlotStore`]).
    pub datasource_caps: Arc<BTreeMap<String, u32>>,
}

/// What one job message may weigh.
#[derive(Debug, Clone, Copy)]
pub struct MessageLimits {
    /// `RABBITMQ_MAX_MESSAGE_BYTES`: larger messages are dead-lettered unparsed.
    pub max_message_bytes: usize,
    /// `EVENT_MAX_METADATA_BYTES`: larger metadata fails the job as invalid.
    pub max_metadata_bytes: u64,
}

/// Runs job messages to their one terminal outcome. Shared by every consumer task.
pub struct JobCore {
    pub(in crate::job) ports: Ports,
    pub(in crate::job) settings: JobSettings,
    pub(in crate::job) wakeups: Wakeups,
}

impl JobCore {
    /// `RABBITMQ_MAX_MESSAGE_BYTES`: the largest message handled as a job, and copied as a dead
    /// letter.
    pub fn max_message_bytes(&self) -> usize {
        self.settings.limits.max_message_bytes
    }

    pub fn new(ports: Ports, settings: JobSettings) -> JobCore {
        JobCore {
            ports,
            settings,
            wakeups: Wakeups::default(),
        }
    }

    /// How it judges and runs jobs (the control API signs, sources and leases as it does).
    pub fn settings(&self) -> &JobSettings {
        &self.settings
    }

    /// A job's timeout when its message names none (`ENGINE_EXTRACTION_TIMEOUT_SEC`).
    pub fn default_timeout(&self) -> Duration {
        self.ports.extractor.timeout()
    }

    /// A cancel of `job_id` was announced: its run here, if any, checks its claim now.
    pub fn wake(&self, job_id: Uuid) {
        if self.wakeups.wake(job_id) {
            tracing::debug!(%job_id, "Cancel announced for a running job.");
        }
    }

    /// Hands recorded events (their outbox rows leased to `publisher`) to the sink; the
    /// repairer publishes what it could not.
    pub async fn publish(&self, publisher: &str, events: &[outbox::PendingEvent]) {
        if let Err(error) = self.ports.events.deliver(publisher, events).await {
            // One job's events at a time: its id says whose.
            let job_id = events.first().map(|pending| pending.job_id);
            tracing::warn!(?job_id, %error, "Could not record the publish; the repairer will publish the events.");
        }
    }

    /// A claim (or publish lease) owner unique to this attempt.
    pub(in crate::job) fn owner(&self) -> String {
        format!("{}/{}", self.settings.worker_id, Uuid::new_v4().simple())
    }

    /// Publishes a finished job's events that were never published (a redelivery found them
    /// so); the repairer does it when this cannot.
    pub(in crate::job) async fn republish(&self, job_id: Uuid) -> Disposition {
        let owner = self.owner();
        match self
            .ports
            .jobs
            .lease_unpublished(job_id, &owner, self.settings.lease)
            .await
        {
            Ok(pending) => self.publish(&owner, &pending).await,
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not lease the job's unpublished event; the repairer will publish it.");
            }
        }
        Disposition::Ack
    }
}
