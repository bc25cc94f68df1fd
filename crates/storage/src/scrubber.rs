//! The scrubber of S3 errors: the configured credentials and the endpoint's host removed from
//! every SDK error text before it becomes a [`Cause`].

use std::error::Error as StdError;
use std::fmt;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::error::Cause;

/// Turns SDK errors into [`Cause`]s, removing what the generic [`contract::redact`] cannot know
/// about: the configured credentials and the endpoint's host (a bare host name has no port or
/// scheme for the generic rules to catch).
#[derive(Clone)]
pub(crate) struct Scrubber {
    literals: Vec<String>,
}

/// Hosts shorter than this are not scrubbed literally: replacing a name like `s3` everywhere
/// would mangle the rest of the text. Such a host still loses its port and scheme to `redact`.
const MIN_SCRUBBED_HOST_LEN: usize = 4;

impl Scrubber {
    pub(crate) fn new(endpoint: Option<&str>, secrets: &[&str]) -> Self {
        let mut literals: Vec<String> = secrets
            .iter()
            .filter(|secret| !secret.is_empty())
            .map(|secret| (*secret).to_owned())
            .collect();
        if let Some(endpoint) = endpoint.filter(|endpoint| !endpoint.is_empty()) {
            literals.push(endpoint.to_owned());
            let authority = endpoint
                .split_once("://")
                .map_or(endpoint, |(_, rest)| rest)
                .split(['/', '?', '#'])
                .next()
                .unwrap_or_default();
            let host_port = authority.rsplit('@').next().unwrap_or(authority);
            let host = match host_port.strip_prefix('[') {
                Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
                None => host_port.split(':').next().unwrap_or_default(),
            };
            literals.push(host_port.to_owned());
            if host.len() >= MIN_SCRUBBED_HOST_LEN {
                literals.push(host.to_owned());
            }
        }
        // Longest first, so a host inside the endpoint URL does not leave the URL's remains.
        literals.sort_by_key(|literal| std::cmp::Reverse(literal.len()));
        literals.dedup();
        Self { literals }
    }

    /// Redacts any text about to leave the store.
    pub(crate) fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for literal in &self.literals {
            if out.contains(literal.as_str()) {
                out = out.replace(literal.as_str(), "[redacted]");
            }
        }
        contract::redact(&out)
    }

    /// A [`Cause`] from a failed SDK call: its whole chain of causes (the SDK's own `Display`
    /// says only "service error" or "dispatch failure") and, for an error response, the HTTP
    /// status.
    ///
    /// Not `DisplayErrorContext`: it appends the error's `Debug`, which holds the raw response
    /// (headers and body); an S3 error body may echo the access key id and the string to sign.
    pub(crate) fn sdk<E>(&self, error: &SdkError<E>) -> Cause
    where
        E: StdError + ProvideErrorMetadata + 'static,
    {
        let mut message = cause_chain(error);
        if let SdkError::ServiceError(service) = error {
            message.push_str(&format!(" (HTTP {})", service.raw().status().as_u16()));
        }
        Cause {
            message: self.text(&message),
            retriable: sdk_is_retriable(error),
        }
    }

    /// A [`Cause`] from any other failure on the way (reading a body, a failed upload task).
    pub(crate) fn other(&self, error: &dyn fmt::Display, retriable: bool) -> Cause {
        Cause {
            message: self.text(&error.to_string()),
            retriable,
        }
    }
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The literals are the secrets themselves.
        f.write_str("Scrubber(<redacted>)")
    }
}

/// `error: source: source's source: …`, leaving out a text its predecessor already ends with.
pub(crate) fn cause_chain(error: &(dyn StdError + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// S3 error codes that mean "slow down" or "try again", whatever the HTTP status.
const TRANSIENT_CODES: &[&str] = &[
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "InternalError",
    "ServiceUnavailable",
    "OperationAborted",
];

/// Whether an S3 error code means "slow down" or "try again".
pub(crate) fn is_transient_code(code: &str) -> bool {
    TRANSIENT_CODES.contains(&code)
}

fn sdk_is_retriable<E: ProvideErrorMetadata>(error: &SdkError<E>) -> bool {
    match error {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(failure) => !failure.is_user(),
        SdkError::ServiceError(service) => {
            let status = service.raw().status();
            status.is_server_error()
                || status.as_u16() == 429
                || service.err().code().is_some_and(is_transient_code)
        }
        // Construction failures are bugs or bad settings; unknown kinds are not guessed at.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_endpoint_host_are_scrubbed() {
        let scrubber = Scrubber::new(
            Some("https://user@storage.internal.example:9443/base"),
            &["AKIDEXAMPLE", "very-secret-key"],
        );
        let text = scrubber.text(
            "signature for AKIDEXAMPLE with very-secret-key failed at storage.internal.example \
             (https://user@storage.internal.example:9443/base)",
        );
        for leaked in [
            "AKIDEXAMPLE",
            "very-secret-key",
            "storage.internal.example",
            "9443",
        ] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        assert!(text.starts_with("signature for [redacted] with [redacted] failed at"));
    }

    #[test]
    fn short_hosts_are_left_to_the_generic_rules() {
        let scrubber = Scrubber::new(Some("http://s3:9000"), &[]);
        assert_eq!(
            scrubber.text("aws-sdk-s3 could not reach s3:9000"),
            "aws-sdk-s3 could not reach [redacted]"
        );
    }

    #[test]
    fn ipv6_endpoints_are_scrubbed() {
        let scrubber = Scrubber::new(Some("http://[fd00::5]:9000"), &[]);
        let text = scrubber.text("connect to [fd00::5]:9000 refused; host fd00::5");
        assert!(!text.contains("fd00"), "{text}");
    }

    #[test]
    fn debug_of_the_scrubber_shows_no_literal() {
        let scrubber = Scrubber::new(None, &["very-secret-key"]);
        assert!(!format!("{scrubber:?}").contains("very-secret-key"));
    }
}
