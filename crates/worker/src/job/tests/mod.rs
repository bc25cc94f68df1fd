//! The job core's state machine on in-memory ports, with tokio's clock paused (waits for leases,
//! backoffs and retries pass at once): every branch of a delivery and of a claimed run, and
//! every [`Disposition`], in milliseconds and without a server. The end-to-end and chaos tests
//! prove the same paths against the real services.

mod cancels;
mod claims;
mod deliveries;
mod executions;
mod fakes;
mod house;
mod runs;
mod sim;
mod slots;
mod sweeps;

use std::sync::Arc;
use std::time::Duration;

use contract::envelope::{self, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use storage::object_key;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    Disposition, Inbound, InboundHeaders, JobCore, JobSettings, MessageLimits, Ports, Requeue,
};
use fakes::{Events, Extract, Jobs, Objects};

const QUEUE: &str = "fetcher.jobs";
const LEASE: Duration = Duration::from_secs(30);

/// A job core on fakes, and the fakes, to script and read back.
struct Bench {
    core: JobCore,
    jobs: Arc<Jobs>,
    objects: Arc<Objects>,
    events: Arc<Events>,
    extract: Arc<Extract>,
    keys: crypto::KeySet,
}

impl Bench {
    fn new() -> Bench {
        let keys = crypto::KeySet::from_master_bytes(&[7; 32]).expect("keys");
        let jobs = Arc::new(Jobs::default());
        let objects = Arc::new(Objects::default());
        let events = Arc::new(Events::default());
        let extract = Arc::new(Extract::default());
        let ports = Ports {
            jobs: jobs.clone(),
            objects: objects.clone(),
            events: events.clone(),
            extractor: extract.clone(),
            slots: None,
        };
        let settings = JobSettings {
            keys: keys.clone(),
            source: "//test/fetcher".into(),
            worker_id: "w1".into(),
            lease: LEASE,
            verify: VerifyPolicy::default(),
            limits: MessageLimits {
                max_message_bytes: 4096,
                max_metadata_bytes: 1024,
            },
            storage_retry: Duration::from_secs(60),
            datasource_caps: Default::default(),
        };
        Bench {
            core: JobCore::new(ports, settings),
            jobs,
            objects,
            events,
            extract,
            keys,
        }
    }

    /// A job message for a new job, signed now.
    fn job(&self) -> Message {
        let job_id = Uuid::new_v4();
        let body = serde_json::json!({
            "jobId": job_id,
            "mappedFields": {"db": {"payments": ["id"]}},
            "metadata": {"source": "unit"},
        });
        self.signed(job_id, body.to_string().into_bytes(), 0)
    }

    /// `body`, signed `age_secs` ago.
    fn signed(&self, job_id: Uuid, body: Vec<u8>, age_secs: i64) -> Message {
        let route = Route {
            tenant: "",
            exchange: "",
            routing_key: QUEUE,
        };
        let signed_at = chrono::Utc::now().timestamp() - age_secs;
        let signature = envelope::sign(signed_at, &route, &body, |payload| {
            self.keys.internal_hmac().sign_hex(payload)
        });
        Message {
            job_id,
            body,
            signature: signature.signature,
            timestamp: signature.timestamp,
            job_id_header: None,
        }
    }

    async fn deliver(&self, message: &Message) -> Disposition {
        self.deliver_until(message, &CancellationToken::new()).await
    }

    async fn deliver_until(&self, message: &Message, stop: &CancellationToken) -> Disposition {
        let inbound = Inbound {
            headers: InboundHeaders {
                signature: SignatureHeaders {
                    signature: Some(HeaderValue::Text(message.signature.as_bytes())),
                    timestamp: Some(HeaderValue::Text(message.timestamp.as_bytes())),
                    version: Some(HeaderValue::Text(envelope::SIGNATURE_VERSION.as_bytes())),
                },
                tenant: None,
                request_id: Some("req-1"),
                job_id: message.job_id_header.as_deref().map(str::as_bytes),
                ..InboundHeaders::default()
            },
            exchange: "",
            routing_key: QUEUE,
            body: &message.body,
            redelivered: false,
        };
        self.core.handle(&inbound, stop).await
    }

    /// The key every run of `job_id` writes.
    fn key_of(&self, job_id: Uuid) -> String {
        object_key("", None, job_id).expect("key").full
    }
}

/// A job message as delivered.
struct Message {
    job_id: Uuid,
    body: Vec<u8>,
    signature: String,
    timestamp: String,
    job_id_header: Option<String>,
}

impl Message {
    fn completed_ce_id(&self) -> String {
        format!("fetcher.job.completed.{}", self.job_id)
    }

    fn failed_ce_id(&self) -> String {
        format!("fetcher.job.failed.{}", self.job_id)
    }
}
