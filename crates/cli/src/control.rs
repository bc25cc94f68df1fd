//! `fetcherctl status | cancel | delete` (and the requests of `jobs`): signed requests to a Worker's control API
//! (lifecycle §3), signed with the internal HMAC key as `submit` signs jobs. Prints the job
//! document (`--json`) or a summary; an answer of 4xx or 5xx is an error with the API's reason.
//!
//! The API speaks plain HTTP on the pod network (`--api http://host:port`); the request is one
//! HTTP/1.0 exchange, so no HTTP client library is needed.

use std::time::Duration;

use anyhow::{bail, Context as _};
use contract::envelope::{sign_control, ControlRoute};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use uuid::Uuid;

use crate::submit::{internal_key, HMAC_KEY_ENV};

/// The variable that may hold the API's address, instead of `--api`.
pub const API_ENV: &str = "FETCHER_API_URL";
/// How long a request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The most of an answer read.
const MAX_ANSWER: u64 = 4 << 20;

#[derive(clap::Args)]
pub struct Target {
    /// The job.
    job_id: Uuid,
    #[command(flatten)]
    api: Api,
}

/// Where the control API is, as whom to ask it, and how to print its answer.
#[derive(clap::Args)]
pub struct Api {
    /// The job's tenant (`X-Tenant-ID`); none for a single-tenant job.
    #[arg(long)]
    tenant: Option<String>,
    /// The control API, `http://host:port`.
    #[arg(long, env = API_ENV, default_value = "http://127.0.0.1:4008")]
    api: String,
    /// Print the job document as JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// The internal HMAC key as hex, for a caller not given the master key (exactly one of
    /// this and APP_ENC_KEY).
    #[arg(long, value_name = "HEX", env = HMAC_KEY_ENV, hide_env_values = true)]
    hmac_key: Option<String>,
}

#[derive(clap::Args)]
pub struct Change {
    #[command(flatten)]
    target: Target,
    /// Stop running statements at once (cancel), or cancel a job that has not ended first
    /// (delete).
    #[arg(long)]
    force: bool,
    /// Why (at most 2028 characters), recorded with the job and its events.
    #[arg(long)]
    comment: Option<String>,
}

#[derive(clap::Args)]
pub struct Cancel {
    #[command(flatten)]
    change: Change,
    /// A code for the cancel (at most 128 of A-Z, 0-9, _).
    #[arg(long)]
    reason_code: Option<String>,
}

/// `fetcherctl status`.
pub async fn status(target: Target) -> anyhow::Result<()> {
    let path = format!("/v1/fetcher/{}", target.job_id);
    send(&target, "GET", &path, b"").await
}

/// `fetcherctl cancel`.
pub async fn cancel(args: Cancel) -> anyhow::Result<()> {
    let change = &args.change;
    let mut body = json!({"force": change.force});
    if let Some(comment) = &change.comment {
        body["comment"] = Value::String(comment.clone());
    }
    if let Some(code) = &args.reason_code {
        body["reasonCode"] = Value::String(code.clone());
    }
    let path = format!("/v1/fetcher/{}/cancel", change.target.job_id);
    send(&change.target, "POST", &path, body.to_string().as_bytes()).await
}

/// `fetcherctl delete`.
pub async fn delete(change: Change) -> anyhow::Result<()> {
    let mut body = json!({"force": change.force});
    if let Some(comment) = &change.comment {
        body["comment"] = Value::String(comment.clone());
    }
    let path = format!("/v1/fetcher/{}", change.target.job_id);
    send(&change.target, "DELETE", &path, body.to_string().as_bytes()).await
}

async fn send(target: &Target, method: &str, path: &str, body: &[u8]) -> anyhow::Result<()> {
    let job_id = target.job_id.to_string();
    let document = request(&target.api, &job_id, method, path, body).await?;
    if target.api.json {
        println!("{document}");
    } else {
        print!("{}", summary(&document));
    }
    Ok(())
}

/// Sends one request signed for `job_id` (empty for a route on no job) and `path` (with its
/// query string); the answer's JSON, or the API's reason as an error when it refused.
pub async fn request(
    api: &Api,
    job_id: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> anyhow::Result<Value> {
    let key = internal_key(api.hmac_key.as_deref())?;
    let authority = authority(&api.api)?;
    let tenant = api.tenant.as_deref().filter(|t| !t.is_empty());
    let route = ControlRoute {
        tenant: tenant.unwrap_or(""),
        job_id,
        method,
        path,
    };
    let signature = sign_control(chrono::Utc::now().timestamp(), &route, body, |payload| {
        key.sign_hex(payload)
    });
    let mut request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nx-message-signature: {}\r\nt: {}\r\nsignature-version: {}\r\n",
        body.len(),
        signature.signature,
        signature.timestamp,
        signature.version
    );
    if let Some(tenant) = tenant {
        request.push_str(&format!("X-Tenant-ID: {tenant}\r\n"));
    }
    request.push_str("\r\n");
    let exchange = async {
        let mut stream = TcpStream::connect(authority).await?;
        stream.write_all(request.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut answer = Vec::new();
        stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("the control API at {authority} did not answer in time"))?
        .with_context(|| format!("could not reach the control API at {authority}"))?;
    let (status, document) = parse(&answer)?;
    if status >= 400 {
        let reason = document["error"].as_str().unwrap_or("no reason given");
        bail!("the control API answered {status}: {reason}");
    }
    Ok(document)
}

/// `host:port` of an `http://host:port` address.
fn authority(api: &str) -> anyhow::Result<&str> {
    let Some(rest) = api.strip_prefix("http://") else {
        bail!("--api must be an http://host:port address");
    };
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') || !authority.contains(':') {
        bail!("--api must be an http://host:port address");
    }
    Ok(authority)
}

/// The status and JSON body of an HTTP answer.
fn parse(answer: &[u8]) -> anyhow::Result<(u16, Value)> {
    let text = String::from_utf8_lossy(answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("the control API's answer is not HTTP")?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let document = serde_json::from_str(body).unwrap_or(Value::Null);
    Ok((status, document))
}

/// A readable summary of a job document.
pub fn summary(document: &Value) -> String {
    let text = |name: &str| document[name].as_str().unwrap_or("-").to_owned();
    let mut out = format!("Job {}: {}\n", text("id"), text("status"));
    if let Some(path) = document["resultPath"].as_str() {
        out.push_str(&format!("  result: {path}\n"));
    }
    if document["forceCanceled"] == true {
        out.push_str("  force-canceled\n");
    }
    if let Some(comment) = document["comment"].as_str() {
        out.push_str(&format!("  comment: {comment}\n"));
    }
    if let Some(reason) = document["errorMessage"].as_str() {
        out.push_str(&format!("  reason: {reason}\n"));
    }
    for execution in document["executions"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}: {} ({} rows)",
            execution["datasource"].as_str().unwrap_or("?"),
            execution["status"].as_str().unwrap_or("?"),
            execution["rowCount"].as_i64().unwrap_or(0)
        ));
        // Why an execution failed or timed out (its redacted error).
        if let Some(reason) = execution["statusDetails"]["error"].as_str() {
            out.push_str(&format!(": {reason}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_host_port_addresses_are_taken() {
        assert_eq!(
            authority("http://127.0.0.1:4008").unwrap(),
            "127.0.0.1:4008"
        );
        assert_eq!(authority("http://worker:4008/").unwrap(), "worker:4008");
        for bad in ["https://x:1", "127.0.0.1:4008", "http://x", "http://x:1/v1"] {
            assert!(authority(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_document_is_summarised_with_its_executions() {
        let document = json!({"id": "j", "status": "canceled", "forceCanceled": true,
            "comment": "runaway",
            "executions": [{"datasource": "ledger", "status": "CANCELED", "rowCount": 12}]});
        assert_eq!(
            summary(&document),
            "Job j: canceled\n  force-canceled\n  comment: runaway\n  ledger: CANCELED (12 rows)\n"
        );
        let failed = json!({"id": "f", "status": "failed",
            "errorMessage": "extraction timed out after 2s",
            "executions": [
                {"datasource": "ledger", "status": "TIMED_OUT", "rowCount": 3,
                 "statusDetails": {"error": "extraction timed out after 2s"}},
                {"datasource": "crm", "status": "FAILED", "rowCount": 0,
                 "statusDetails": {"error": "query on datasource crm failed: no such table"}},
                {"datasource": "audit", "status": "CANCELED", "rowCount": 0, "statusDetails": {}}]});
        assert_eq!(
            summary(&failed),
            "Job f: failed\n  reason: extraction timed out after 2s\n\
             \x20 ledger: TIMED_OUT (3 rows): extraction timed out after 2s\n\
             \x20 crm: FAILED (0 rows): query on datasource crm failed: no such table\n\
             \x20 audit: CANCELED (0 rows)\n"
        );
        let (status, body) =
            parse(b"HTTP/1.1 409 Conflict\r\nx: y\r\n\r\n{\"error\":\"the job is completed\"}")
                .unwrap();
        assert_eq!(status, 409);
        assert_eq!(body["error"], "the job is completed");
    }
}
