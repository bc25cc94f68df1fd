//! Running a job message to its one terminal outcome: verify, parse, claim, extract, seal,
//! store, record, publish.
//!
//! - `inbound.rs`: a delivery as the core sees it, free of any transport type.
//! - `handle.rs`: what to do with one delivery, and whether to ack, dead-letter or retry it.
//! - `pipeline.rs`: a claimed job's run, from extraction to the recorded terminal state.
//! - `events.rs`: the terminal events of each outcome.
//! - `sweeper.rs`: failing jobs whose Worker was lost and that no redelivery took over.

mod events;
mod handle;
mod inbound;
mod pipeline;
mod sweeper;

use std::sync::Arc;
use std::time::Duration;

use contract::envelope::VerifyPolicy;

use storage::ObjectStore;

pub use handle::Disposition;
pub use inbound::{Inbound, InboundHeaders};
pub use sweeper::Sweeper;

/// Everything a job needs, shared by every consumer task.
pub struct JobContext {
    pub keys: crypto::KeySet,
    pub engine: engine::Engine,
    pub store: outbox::Store,
    pub objects: ObjectStore,
    pub publisher: Arc<publisher::Publisher>,
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
