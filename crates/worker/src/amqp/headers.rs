//! Reading a delivery of a job message into the job core's [`Inbound`].

use contract::envelope::amqp::header_value;
use contract::envelope::{
    HeaderValue, SignatureHeaders, SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER,
};
use contract::wire::{JOB_ID_HEADER, REQUEST_ID_HEADER, TENANT_HEADER};
use lapin::message::Delivery;
use lapin::types::{AMQPValue, FieldTable};

use crate::job::{Inbound, InboundHeaders};

/// The job core's view of a delivery.
pub fn inbound(delivery: &Delivery) -> Inbound<'_> {
    Inbound {
        headers: read(delivery.properties.headers().as_ref()),
        exchange: delivery.exchange.as_str(),
        routing_key: delivery.routing_key.as_str(),
        body: delivery.data.as_slice(),
        redelivered: delivery.redelivered,
    }
}

/// The headers the Worker reads, borrowed from a delivery's table.
pub fn read(headers: Option<&FieldTable>) -> InboundHeaders<'_> {
    let Some(table) = headers else {
        return InboundHeaders::default();
    };
    let get = |name: &str| table.inner().get(name);
    InboundHeaders {
        signature: SignatureHeaders {
            signature: get(SIGNATURE_HEADER).map(header_value),
            timestamp: get(TIMESTAMP_HEADER).map(header_value),
            version: get(VERSION_HEADER).map(header_value),
        },
        tenant: get(TENANT_HEADER).and_then(text).filter(|t| !t.is_empty()),
        request_id: get(REQUEST_ID_HEADER)
            .and_then(text)
            .filter(|t| !t.is_empty()),
        job_id: get(JOB_ID_HEADER).and_then(|v| match header_value(v) {
            HeaderValue::Text(bytes) => Some(bytes),
            _ => None,
        }),
        // Upstream's Manager writes `Traceparent`; W3C's own spelling is lower-case.
        traceparent: get("Traceparent")
            .or_else(|| get("traceparent"))
            .and_then(text),
        tracestate: get("Tracestate")
            .or_else(|| get("tracestate"))
            .and_then(text),
    }
}

fn text(value: &AMQPValue) -> Option<&str> {
    match header_value(value) {
        HeaderValue::Text(bytes) => std::str::from_utf8(bytes).ok(),
        _ => None,
    }
}
