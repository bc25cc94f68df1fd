//! Job events: terminal ones (contract §8) and the lifecycle's (lifecycle §4): operation, body
//! and CloudEvents attributes; [`mirror`]: their MQTT mirror's topics and payloads (lifecycle §5).

mod body;
mod cloudevents;
mod lifecycle_body;
pub mod mirror;
mod operation;
mod outbound;
mod status;

pub use body::{event_body, Outcome, StoredResult};
pub use cloudevents::{
    ce_id, event_tenant, execution_ce_id, CloudEventAttributes, SINGLE_TENANT, TRACEPARENT_HEADER,
};
pub use lifecycle_body::{CancelBody, DeletionBody, ExecutionBody};
pub use operation::Operation;
pub use outbound::OutboundEvent;
pub use status::{NotTerminal, TerminalStatus};
