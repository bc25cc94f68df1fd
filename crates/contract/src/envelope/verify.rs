//! Verification of an inbound message's signature headers: presence, freshness, version, MAC.

use super::{legacy_parts, payload_header, scan_job_id, Route, ScannedJobId, SIGNATURE_VERSION};

/// A header value as it arrived. AMQP long strings are bytes; `t` may also be an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderValue<'a> {
    Text(&'a [u8]),
    Integer(i64),
    /// Any other AMQP type, named for the error message.
    Other(&'static str),
}

/// The three signature headers of a message, `None` where absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignatureHeaders<'a> {
    pub signature: Option<HeaderValue<'a>>,
    pub timestamp: Option<HeaderValue<'a>>,
    pub version: Option<HeaderValue<'a>>,
}

/// What verification accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyPolicy {
    /// Oldest accepted signature, in seconds (upstream: 300).
    pub max_age_secs: i64,
    /// Furthest accepted clock skew into the future, in seconds (upstream: 30).
    pub max_future_secs: i64,
    /// Accept the legacy `"<t>." + body` payload (`RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK`).
    pub allow_legacy_body_signature: bool,
}

impl Default for VerifyPolicy {
    fn default() -> Self {
        VerifyPolicy {
            max_age_secs: 300,
            max_future_secs: 30,
            allow_legacy_body_signature: false,
        }
    }
}

/// Which payload form a verified signature covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    V1,
    LegacyBody,
}

/// Why a signature was refused. Messages never carry the signature or the payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("signature header {0:?} is missing")]
    Missing(&'static str),
    #[error("signature header {header:?} must be a string, got {found}")]
    NotAString {
        header: &'static str,
        found: &'static str,
    },
    #[error("signature timestamp is not a decimal number of seconds")]
    InvalidTimestamp,
    #[error("signature is stale: signed {age_secs} s ago, the limit is {limit_secs} s")]
    Stale { age_secs: i64, limit_secs: i64 },
    #[error("signature is from the future: {ahead_secs} s ahead, the limit is {limit_secs} s")]
    FromTheFuture { ahead_secs: i64, limit_secs: i64 },
    #[error("signature version is not supported (expected v1)")]
    UnsupportedVersion,
    #[error("signature does not match the message")]
    Mismatch,
    /// The legacy form signs the body only: it cannot bind a tenant, so it never carries one.
    #[error("a legacy body signature cannot carry X-Tenant-ID (the legacy form does not sign it)")]
    LegacyWithTenant,
}

impl SignatureError {
    /// A stable identifier for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Missing(_) => "signature_missing",
            SignatureError::NotAString { .. } => "signature_header_type",
            SignatureError::InvalidTimestamp => "signature_timestamp_invalid",
            SignatureError::Stale { .. } => "signature_stale",
            SignatureError::FromTheFuture { .. } => "signature_future",
            SignatureError::UnsupportedVersion => "signature_version",
            SignatureError::Mismatch => "signature_mismatch",
            SignatureError::LegacyWithTenant => "signature_legacy_tenant",
        }
    }
}

/// Verifies a message received on `route` at Unix second `now`. `mac_matches(parts, hex)` must
/// compare, in constant time, the HMAC under the internal key of the concatenated `parts` (the
/// payload, given in pieces so the body is never copied) with `hex`. The body is scanned once,
/// shallowly, for its signed job id, and otherwise only MACed.
pub fn verify(
    headers: &SignatureHeaders<'_>,
    route: &Route<'_>,
    body: &[u8],
    policy: &VerifyPolicy,
    now: i64,
    mac_matches: impl Fn(&[&[u8]], &str) -> bool,
) -> Result<Verified, SignatureError> {
    let job_id = scan_job_id(body);
    verify_scanned(headers, route, body, &job_id, policy, now, mac_matches)
}

/// [`verify`] for a caller that already scanned the body ([`scan_job_id`]) and needs the id
/// itself too, so the body is scanned once.
pub fn verify_scanned(
    headers: &SignatureHeaders<'_>,
    route: &Route<'_>,
    body: &[u8],
    job_id: &ScannedJobId,
    policy: &VerifyPolicy,
    now: i64,
    mac_matches: impl Fn(&[&[u8]], &str) -> bool,
) -> Result<Verified, SignatureError> {
    use super::{SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER};

    let signature = text(headers.signature, SIGNATURE_HEADER)?;
    let timestamp = match headers.timestamp {
        None => return Err(SignatureError::Missing(TIMESTAMP_HEADER)),
        Some(HeaderValue::Integer(t)) => t.to_string(),
        Some(value) => text(Some(value), TIMESTAMP_HEADER)?.to_owned(),
    };
    let version = text(headers.version, VERSION_HEADER)?;

    let signed_at = parse_seconds(&timestamp)?;
    let age = now.saturating_sub(signed_at);
    if age > policy.max_age_secs {
        return Err(SignatureError::Stale {
            age_secs: age,
            limit_secs: policy.max_age_secs,
        });
    }
    if -age > policy.max_future_secs {
        return Err(SignatureError::FromTheFuture {
            ahead_secs: -age,
            limit_secs: policy.max_future_secs,
        });
    }
    if version != SIGNATURE_VERSION {
        return Err(SignatureError::UnsupportedVersion);
    }

    // A job id too long to be any job's cannot be what a genuine message signed.
    if let ScannedJobId::Id(job_id) = job_id {
        let header = payload_header(&timestamp, route, job_id);
        if mac_matches(&[&header, body], signature) {
            return Ok(Verified::V1);
        }
    }
    if policy.allow_legacy_body_signature && mac_matches(&legacy_parts(&timestamp, body), signature)
    {
        if !route.tenant.is_empty() {
            return Err(SignatureError::LegacyWithTenant);
        }
        return Ok(Verified::LegacyBody);
    }
    Err(SignatureError::Mismatch)
}

fn text<'a>(
    value: Option<HeaderValue<'a>>,
    header: &'static str,
) -> Result<&'a str, SignatureError> {
    match value {
        None => Err(SignatureError::Missing(header)),
        Some(HeaderValue::Text(bytes)) => {
            // A header that is not UTF-8 cannot hold hex, seconds or "v1": it can only mismatch.
            std::str::from_utf8(bytes).map_err(|_| SignatureError::Mismatch)
        }
        Some(HeaderValue::Integer(_)) => Err(SignatureError::NotAString {
            header,
            found: "integer",
        }),
        Some(HeaderValue::Other(found)) => Err(SignatureError::NotAString { header, found }),
    }
}

/// Unix seconds as plain ASCII digits, optionally negative; no sign `+`, no spaces.
fn parse_seconds(text: &str) -> Result<i64, SignatureError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::InvalidTimestamp);
    }
    text.parse().map_err(|_| SignatureError::InvalidTimestamp)
}
