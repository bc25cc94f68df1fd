//! Signed control requests (lifecycle §3): signed like a job message (§3 of the contract) with
//! the internal key, over `t\nv1\n<tenant>\n<jobId>\n<METHOD>\n<path>\n<body>`: the v1 payload
//! with the method and the path in the places of the exchange and the routing key. Whoever may
//! submit jobs may control them, and nobody else.

use super::verify::{verify_scanned, SignatureError, SignatureHeaders, VerifyPolicy};
use super::{sign_with_job_id, Route, ScannedJobId, Signature};

/// What a control request's signature covers besides its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRoute<'a> {
    /// `X-Tenant-ID`, empty when absent.
    pub tenant: &'a str,
    /// The job id as the path names it.
    pub job_id: &'a str,
    /// `GET`, `POST`, `DELETE`.
    pub method: &'a str,
    /// The path: without its query string for the routes of lifecycle §3, with it (`?…`) for
    /// the routes that take query parameters (the job list, one job's executions).
    pub path: &'a str,
}

impl ControlRoute<'_> {
    fn route(&self) -> Route<'_> {
        Route {
            tenant: self.tenant,
            exchange: self.method,
            routing_key: self.path,
        }
    }
}

/// The three signature headers of a request sent at Unix second `now`.
pub fn sign_control(
    now: i64,
    route: &ControlRoute<'_>,
    body: &[u8],
    mac: impl FnOnce(&[u8]) -> String,
) -> Signature {
    sign_with_job_id(now, &route.route(), route.job_id, body, mac)
}

/// Verifies a control request received at Unix second `now` (the legacy body-only form is
/// never accepted: it would bind neither the job nor the method).
pub fn verify_control(
    headers: &SignatureHeaders<'_>,
    route: &ControlRoute<'_>,
    body: &[u8],
    policy: &VerifyPolicy,
    now: i64,
    mac_matches: impl Fn(&[&[u8]], &str) -> bool,
) -> Result<(), SignatureError> {
    let policy = VerifyPolicy {
        allow_legacy_body_signature: false,
        ..*policy
    };
    let job_id = ScannedJobId::Id(route.job_id.to_owned());
    verify_scanned(
        headers,
        &route.route(),
        body,
        &job_id,
        &policy,
        now,
        mac_matches,
    )
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::super::HeaderValue;
    use super::*;

    const ID: &str = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";

    fn route(method: &'static str) -> ControlRoute<'static> {
        ControlRoute {
            tenant: "acme",
            job_id: ID,
            method,
            path: "/v1/fetcher/6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88/cancel",
        }
    }

    #[test]
    fn the_payload_is_the_lifecycles_seven_lines() {
        let mut seen = Vec::new();
        sign_control(1_784_052_251, &route("POST"), br#"{"force":true}"#, |p| {
            seen = p.to_vec();
            String::new()
        });
        assert_eq!(
            String::from_utf8(seen).unwrap(),
            "1784052251\nv1\nacme\n6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88\nPOST\n\
             /v1/fetcher/6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88/cancel\n{\"force\":true}"
        );
    }

    #[test]
    fn a_signature_binds_tenant_job_method_path_and_body() {
        let key = crypto::HmacKey::from_bytes(*b"0123456789abcdef0123456789abcdef");
        let mac = |payload: &[u8]| key.sign_hex(payload);
        let matches = |parts: &[&[u8]], hex_sig: &str| key.verify_hex_parts(parts, hex_sig);
        let now = 1_784_052_251;
        let body = br#"{"force":true}"#;
        let signed = sign_control(now, &route("POST"), body, mac);
        let headers = SignatureHeaders {
            signature: Some(HeaderValue::Text(signed.signature.as_bytes())),
            timestamp: Some(HeaderValue::Text(signed.timestamp.as_bytes())),
            version: Some(HeaderValue::Text(b"v1")),
        };
        let policy = VerifyPolicy::default();
        assert_eq!(
            verify_control(&headers, &route("POST"), body, &policy, now, matches),
            Ok(())
        );
        let other_tenant = ControlRoute {
            tenant: "",
            ..route("POST")
        };
        let other_job = ControlRoute {
            job_id: "8f2c1a9e-4b30-4c02-9a1b-2d5e6f7a1c33",
            ..route("POST")
        };
        for (what, changed) in [
            ("method", route("DELETE")),
            ("tenant", other_tenant),
            ("job", other_job),
        ] {
            assert_eq!(
                verify_control(&headers, &changed, body, &policy, now, matches),
                Err(SignatureError::Mismatch),
                "{what}"
            );
        }
        assert_eq!(
            verify_control(&headers, &route("POST"), b"{}", &policy, now, matches),
            Err(SignatureError::Mismatch),
            "body"
        );
        assert!(matches!(
            verify_control(&headers, &route("POST"), body, &policy, now + 301, matches),
            Err(SignatureError::Stale { .. })
        ));
    }
}
