//! Signed AMQP envelopes (contract §3): the signed payload, signing and verification.
//!
//! The HMAC itself belongs to the `crypto` crate; this module decides *what* is signed and
//! *whether* a message's headers are acceptable, and takes the MAC as a function, so it stays
//! free of key material.

#[cfg(feature = "amqp")]
pub mod amqp;
mod control;
mod job_id;
mod verify;

pub use control::{sign_control, verify_control, ControlRoute};
pub use job_id::{json_values, scan_job_id, signed_job_id, ScannedJobId};
pub use verify::{
    verify, verify_scanned, HeaderValue, SignatureError, SignatureHeaders, Verified, VerifyPolicy,
};

/// Header carrying the lowercase hex HMAC-SHA256 of the signed payload.
pub const SIGNATURE_HEADER: &str = "x-message-signature";
/// Header carrying the Unix seconds of signing.
pub const TIMESTAMP_HEADER: &str = "t";
/// Header carrying the signature scheme version.
pub const VERSION_HEADER: &str = "signature-version";
/// The only signature scheme version.
pub const SIGNATURE_VERSION: &str = "v1";

/// Where a message travels, as far as its signature covers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    /// The `X-Tenant-ID` header when it is a string, else empty.
    pub tenant: &'a str,
    /// The exchange the message was published to (`""` for the default exchange).
    pub exchange: &'a str,
    pub routing_key: &'a str,
}

/// The bytes a v1 signature covers:
/// `<t>\n<version>\n<tenant>\n<jobId>\n<exchange>\n<routingKey>\n<raw body>`.
pub fn signing_payload(timestamp: &str, route: &Route<'_>, body: &[u8]) -> Vec<u8> {
    payload_with_job_id(timestamp, route, &signed_job_id(body), body)
}

/// [`signing_payload`] with the `jobId` given rather than read from the body.
fn payload_with_job_id(timestamp: &str, route: &Route<'_>, job_id: &str, body: &[u8]) -> Vec<u8> {
    let mut payload = payload_header(timestamp, route, job_id);
    payload.extend_from_slice(body);
    payload
}

/// Everything a v1 signature covers before the body: six lines, each ending in `\n`.
pub(crate) fn payload_header(timestamp: &str, route: &Route<'_>, job_id: &str) -> Vec<u8> {
    let parts = [
        timestamp,
        SIGNATURE_VERSION,
        route.tenant,
        job_id,
        route.exchange,
        route.routing_key,
    ];
    let mut header = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for part in parts {
        header.extend_from_slice(part.as_bytes());
        header.push(b'\n');
    }
    header
}

/// The bytes the legacy signature covers: `<t>.<raw body>`.
pub fn legacy_payload(timestamp: &str, body: &[u8]) -> Vec<u8> {
    legacy_parts(timestamp, body).concat()
}

/// [`legacy_payload`] in pieces, for a MAC that takes them without a copy of the body.
pub(crate) fn legacy_parts<'a>(timestamp: &'a str, body: &'a [u8]) -> [&'a [u8]; 3] {
    [timestamp.as_bytes(), b".", body]
}

/// The three signature headers of an outbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Value of [`SIGNATURE_HEADER`].
    pub signature: String,
    /// Value of [`TIMESTAMP_HEADER`].
    pub timestamp: String,
    /// Value of [`VERSION_HEADER`].
    pub version: &'static str,
}

/// Signs a message published at Unix second `now` on `route`; `mac` returns the lowercase hex
/// HMAC-SHA256 of the payload under the caller's key.
pub fn sign(
    now: i64,
    route: &Route<'_>,
    body: &[u8],
    mac: impl FnOnce(&[u8]) -> String,
) -> Signature {
    let timestamp = now.to_string();
    let signature = mac(&signing_payload(&timestamp, route, body));
    Signature {
        signature,
        timestamp,
        version: SIGNATURE_VERSION,
    }
}

/// [`sign`] for a caller that already knows the body's `jobId` (an outbound event's subject is
/// its job id), sparing the parse of the body. `job_id` must be what [`signed_job_id`] returns
/// for `body`, or the signature will not verify.
pub fn sign_with_job_id(
    now: i64,
    route: &Route<'_>,
    job_id: &str,
    body: &[u8],
    mac: impl FnOnce(&[u8]) -> String,
) -> Signature {
    let timestamp = now.to_string();
    let signature = mac(&payload_with_job_id(&timestamp, route, job_id, body));
    Signature {
        signature,
        timestamp,
        version: SIGNATURE_VERSION,
    }
}
