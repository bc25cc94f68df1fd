//! A control request's authentication: its size first, then its signature over tenant, job id,
//! method, path with its query string, and body (contract §3 rules of freshness). A request
//! that fails either changes nothing and learns nothing about any job.

use axum::http::{HeaderMap, Method};
use chrono::Utc;
use contract::envelope::{
    verify_control, ControlRoute, HeaderValue, SignatureHeaders, SIGNATURE_HEADER,
    TIMESTAMP_HEADER, VERSION_HEADER,
};
use contract::wire::TENANT_HEADER;

use super::handlers::Refused;
use super::ControlApi;

/// An authenticated request: its tenant (`None` without `X-Tenant-ID`).
pub(super) struct Caller<'a> {
    pub tenant: Option<&'a str>,
}

/// Checks the request's signature; the caller checked its size.
pub(super) fn authenticate<'a>(
    api: &ControlApi,
    headers: &'a HeaderMap,
    method: &Method,
    path: &str,
    job_id: &str,
    body: &[u8],
) -> Result<Caller<'a>, Refused> {
    let text = |name: &str| headers.get(name).map(|v| HeaderValue::Text(v.as_bytes()));
    let signature = SignatureHeaders {
        signature: text(SIGNATURE_HEADER),
        timestamp: text(TIMESTAMP_HEADER),
        version: text(VERSION_HEADER),
    };
    let tenant = match headers.get(TENANT_HEADER).map(|v| v.to_str()) {
        None => None,
        Some(Ok(tenant)) => Some(tenant),
        Some(Err(_)) => return Err(Refused::unauthorized("signature_mismatch")),
    };
    let route = ControlRoute {
        tenant: tenant.unwrap_or(""),
        job_id,
        method: method.as_str(),
        path,
    };
    let settings = api.core.settings();
    let key = settings.keys.internal_hmac();
    verify_control(
        &signature,
        &route,
        body,
        &settings.verify,
        Utc::now().timestamp(),
        |parts, hex| key.verify_hex_parts(parts, hex),
    )
    .map_err(|error| Refused::unauthorized(error.code()))?;
    Ok(Caller {
        tenant: tenant.filter(|t| !t.is_empty()),
    })
}
