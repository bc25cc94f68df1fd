//! Reading the headers of an inbound job message.

use contract::envelope::amqp::header_value;
use contract::envelope::{
    HeaderValue, SignatureHeaders, SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER,
};
use contract::wire::{JOB_ID_HEADER, REQUEST_ID_HEADER, TENANT_HEADER};
use lapin::types::{AMQPValue, FieldTable};

/// The headers the Worker reads, borrowed from a delivery.
#[derive(Debug, Default, Clone, Copy)]
pub struct InboundHeaders<'a> {
    pub signature: SignatureHeaders<'a>,
    /// A string `X-Tenant-ID`; anything else counts as no tenant.
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub job_id: Option<&'a [u8]>,
}

impl<'a> InboundHeaders<'a> {
    pub fn read(headers: Option<&'a FieldTable>) -> InboundHeaders<'a> {
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
        }
    }

    /// The tenant as the signature covers it: the string header, else empty.
    pub fn signed_tenant(&self) -> &'a str {
        self.tenant.unwrap_or("")
    }
}

fn text(value: &AMQPValue) -> Option<&str> {
    match header_value(value) {
        HeaderValue::Text(bytes) => std::str::from_utf8(bytes).ok(),
        _ => None,
    }
}
