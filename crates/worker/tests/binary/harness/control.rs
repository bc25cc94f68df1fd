//! Requests to a Worker's control API (lifecycle §3), signed with the world's internal key as
//! `fetcherctl` signs them, or deliberately not.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use contract::envelope::{sign_control, ControlRoute};
use uuid::Uuid;

/// How a request is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// Signed now, for what it asks.
    Valid,
    /// No signature headers.
    Unsigned,
    /// Signed for another method than it uses.
    OtherMethod,
    /// Signed ten minutes ago.
    Stale,
}

/// A control API client for one Worker.
pub struct ControlClient {
    pub port: u16,
    pub keys: crypto::KeySet,
}

impl ControlClient {
    /// Sends `method` on `/v1/fetcher/<job_id><suffix>`; the answer's status and JSON body.
    pub fn send(
        &self,
        method: &str,
        job_id: Uuid,
        suffix: &str,
        tenant: Option<&str>,
        body: &[u8],
        signing: Signing,
    ) -> (u16, serde_json::Value) {
        self.try_send(method, job_id, suffix, tenant, body, signing)
            .unwrap_or_else(|e| panic!("control API: {e}"))
    }

    /// [`send`](Self::send), with a connection that failed (a Worker not up) as an error.
    pub fn try_send(
        &self,
        method: &str,
        job_id: Uuid,
        suffix: &str,
        tenant: Option<&str>,
        body: &[u8],
        signing: Signing,
    ) -> Result<(u16, serde_json::Value), std::io::Error> {
        let request = self.request(method, job_id, suffix, tenant, body, signing);
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(15)))?;
        stream.write_all(&request)?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        answer(&response)
    }

    /// A validly signed request sent from the local address `source` (`127.0.0.2`: another
    /// client than the tests' usual `127.0.0.1`), without blocking the test's runtime.
    pub async fn send_from(
        &self,
        source: IpAddr,
        method: &str,
        job_id: Uuid,
        suffix: &str,
    ) -> Result<(u16, serde_json::Value), std::io::Error> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let request = self.request(method, job_id, suffix, None, b"", Signing::Valid);
        let mut stream = super::connect_from(source, self.port).await?;
        let exchange = async {
            stream.write_all(&request).await?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        let response = tokio::time::timeout(Duration::from_secs(15), exchange)
            .await
            .map_err(|_| std::io::Error::other("no answer within 15 s"))??;
        answer(&String::from_utf8_lossy(&response))
    }

    /// The request's bytes, signed as `signing` says.
    fn request(
        &self,
        method: &str,
        job_id: Uuid,
        suffix: &str,
        tenant: Option<&str>,
        body: &[u8],
        signing: Signing,
    ) -> Vec<u8> {
        let id = job_id.to_string();
        let path = format!("/v1/fetcher/{id}{suffix}");
        self.request_to(method, &id, &path, &path, tenant, body, signing)
    }

    /// `GET /v1/fetcher<query>` (finding jobs: no job id), validly signed for `signed_query`
    /// (another than `query` is a tampered request).
    pub fn list(
        &self,
        query: &str,
        signed_query: &str,
        tenant: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let path = format!("/v1/fetcher{query}");
        let signed = format!("/v1/fetcher{signed_query}");
        let request = self.request_to("GET", "", &path, &signed, tenant, b"", Signing::Valid);
        let exchange = || -> Result<_, std::io::Error> {
            let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
            stream.set_read_timeout(Some(Duration::from_secs(15)))?;
            stream.write_all(&request)?;
            let mut response = String::new();
            stream.read_to_string(&mut response)?;
            answer(&response)
        };
        exchange().unwrap_or_else(|e| panic!("control API: {e}"))
    }

    /// A request on `path` signed, as `signing` says, for job `id` and `signed_path`.
    #[allow(clippy::too_many_arguments)]
    fn request_to(
        &self,
        method: &str,
        id: &str,
        path: &str,
        signed_path: &str,
        tenant: Option<&str>,
        body: &[u8],
        signing: Signing,
    ) -> Vec<u8> {
        let now = chrono::Utc::now().timestamp();
        let (signed_method, at) = match signing {
            Signing::OtherMethod => (if method == "POST" { "DELETE" } else { "POST" }, now),
            Signing::Stale => (method, now - 600),
            Signing::Valid | Signing::Unsigned => (method, now),
        };
        let route = ControlRoute {
            tenant: tenant.unwrap_or(""),
            job_id: id,
            method: signed_method,
            path: signed_path,
        };
        let signature = sign_control(at, &route, body, |p| self.keys.internal_hmac().sign_hex(p));
        let mut request = format!(
            "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        if signing != Signing::Unsigned {
            request.push_str(&format!(
                "x-message-signature: {}\r\nt: {}\r\nsignature-version: {}\r\n",
                signature.signature, signature.timestamp, signature.version
            ));
        }
        if let Some(tenant) = tenant {
            request.push_str(&format!("X-Tenant-ID: {tenant}\r\n"));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        bytes
    }
}

/// An HTTP/1.0 response's status and JSON body (a body that is not JSON, as a string).
fn answer(response: &str) -> Result<(u16, serde_json::Value), std::io::Error> {
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {response:?}")))?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    let json = serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.into()));
    Ok((status, json))
}
