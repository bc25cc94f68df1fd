//! Terminal job events (contract §8): status, body and CloudEvents attributes.

mod body;
mod cloudevents;
mod outbound;
mod status;

pub use body::{event_body, Outcome, StoredResult};
pub use cloudevents::{ce_id, event_tenant, CloudEventAttributes, SINGLE_TENANT};
pub use outbound::OutboundEvent;
pub use status::{NotTerminal, TerminalStatus};
