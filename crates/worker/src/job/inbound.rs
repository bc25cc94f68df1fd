//! A job message as the job core sees it: no transport type, only what the broker delivered
//! (headers already read, the route, the body, whether it came back).

use contract::envelope::SignatureHeaders;

/// One delivery of a job message, borrowed from whatever transport carried it.
#[derive(Debug, Clone, Copy)]
pub struct Inbound<'a> {
    pub headers: InboundHeaders<'a>,
    /// The exchange it was published to (`""` for the default exchange).
    pub exchange: &'a str,
    pub routing_key: &'a str,
    pub body: &'a [u8],
    /// The broker delivered it before (its earlier delivery was not settled).
    pub redelivered: bool,
}

/// The headers the Worker reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct InboundHeaders<'a> {
    pub signature: SignatureHeaders<'a>,
    /// A string `X-Tenant-ID`; anything else counts as no tenant.
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub job_id: Option<&'a [u8]>,
    /// W3C `traceparent` (upstream's Manager sends `Traceparent`): the trace the job's spans
    /// continue, when traces are on and it parses.
    pub traceparent: Option<&'a str>,
    /// W3C `tracestate` (`Tracestate`), carried with the parent.
    pub tracestate: Option<&'a str>,
}

impl<'a> InboundHeaders<'a> {
    /// The tenant as the signature covers it: the string header, else empty.
    pub fn signed_tenant(&self) -> &'a str {
        self.tenant.unwrap_or("")
    }
}
