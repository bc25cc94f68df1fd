//! The job core: one delivery, from its headers to its disposition (contract §4's table of
//! outcomes). The steps are in the sibling modules; this file holds the order they run in.

use std::time::Duration;

use contract::envelope::{self, Route, VerifyPolicy};
use contract::message::check_header;
use contract::{JobMessage, Redacted};
use serde_json::Map;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::inbound::Inbound;
use super::ports::Ports;
use super::wakeups::Wakeups;
use super::{authenticate, claim, rejects};
use crate::metrics;

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

    /// Handles one job message. Never panics on input; every branch logs why it ended as it did.
    ///
    /// Nothing costly happens before the signature holds: the size is checked first, the signed
    /// job id is found by a shallow scan, the signature is computed over the body in place, and
    /// only then is the body parsed.
    ///
    /// Every log line of the delivery carries its `X-Request-Id` (and its job id, once known)
    /// from the `job` span.
    pub async fn handle(&self, message: &Inbound<'_>, stop: &CancellationToken) -> Disposition {
        let headers = message.headers;
        let span = tracing::info_span!(
            "job",
            request_id = headers.request_id.unwrap_or(""),
            tenant = headers.tenant.unwrap_or(""),
            job_id = tracing::field::Empty,
        );
        self.handle_delivery(message, stop).instrument(span).await
    }

    async fn handle_delivery(
        &self,
        message: &Inbound<'_>,
        stop: &CancellationToken,
    ) -> Disposition {
        let headers = &message.headers;
        let route = Route {
            tenant: headers.signed_tenant(),
            exchange: message.exchange,
            routing_key: message.routing_key,
        };
        let body = message.body;
        let signed_job_id = envelope::scan_job_id(body);
        if body.len() > self.settings.limits.max_message_bytes {
            return rejects::too_large(self, headers, &route, body, &signed_job_id).await;
        }
        let mut digest = None;
        if let Err(disposition) =
            authenticate::authenticate(self, headers, &route, body, &signed_job_id, &mut digest)
                .await
        {
            return disposition;
        }

        let job = match JobMessage::parse(body) {
            Ok(job) => job,
            Err(error) => return rejects::unusable(self, headers, body, &error).await,
        };
        tracing::Span::current().record("job_id", tracing::field::display(job.job_id));
        if let Err(mismatch) = check_header(headers.job_id, job.job_id) {
            return rejects::job_id_header(mismatch);
        }
        if let Err(error) = job.check_metadata_size(self.settings.limits.max_metadata_bytes) {
            metrics::rejected(error.code());
            tracing::warn!(job_id = %job.job_id, reason = error.code(), %error, "Job failed: its metadata is too large for its events.");
            let message = Redacted::new(&format!("invalid job message: {error}"));
            return rejects::fail_unrun(self, job.job_id, headers, &Map::new(), message).await;
        }
        // A job over the limits fails before anything is stored or claimed for it.
        if let Err(error) = self.ports.extractor.check_limits(&job.mapped_fields) {
            metrics::rejected("limit_exceeded");
            tracing::warn!(job_id = %job.job_id, %error, "Job failed: it exceeds the engine's limits.");
            let message = Redacted::new(&error.to_string());
            return rejects::fail_unrun(self, job.job_id, headers, &job.metadata, message).await;
        }
        let digest = digest.unwrap_or_else(|| authenticate::message_digest(body));
        claim::claim_and_run(self, &job, headers, &digest, stop).await
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
}
