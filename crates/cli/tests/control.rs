//! `fetcherctl status | cancel | delete` as a real process, against a stand-in for the control
//! API that checks each request's signature with the Worker's own verification
//! (`contract::envelope::verify_control`) and answers as the API does.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;

use contract::envelope::{
    verify_control, ControlRoute, HeaderValue, SignatureHeaders, VerifyPolicy,
};
use uuid::Uuid;

const MASTER: &str = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8=";

/// What the stand-in saw: method, path, tenant, body, and whether the signature held.
#[derive(Debug)]
struct Seen {
    method: String,
    path: String,
    tenant: String,
    body: String,
    verified: bool,
}

/// Serves one request, answering `status` with `answer`; returns the port and what it saw.
fn stand_in(status: u16, answer: &'static str) -> (u16, thread::JoinHandle<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut line = String::new();
        reader.read_line(&mut line).expect("request line");
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let path = parts.next().unwrap_or("").to_owned();
        let mut headers = std::collections::HashMap::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).expect("header");
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').expect("header line");
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
        let length: usize = headers["content-length"].parse().expect("length");
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("body");
        let tenant = headers.get("x-tenant-id").cloned().unwrap_or_default();
        let job_id = path.split('/').nth(3).unwrap_or("").to_owned();
        let keys = crypto::KeySet::from_base64(MASTER).expect("keys");
        let text = |name: &str| headers.get(name).map(|v| HeaderValue::Text(v.as_bytes()));
        let signature = SignatureHeaders {
            signature: text("x-message-signature"),
            timestamp: text("t"),
            version: text("signature-version"),
        };
        let route = ControlRoute {
            tenant: &tenant,
            job_id: &job_id,
            method: &method,
            path: &path,
        };
        let verified = verify_control(
            &signature,
            &route,
            &body,
            &VerifyPolicy::default(),
            chrono::Utc::now().timestamp(),
            |parts, hex| keys.internal_hmac().verify_hex_parts(parts, hex),
        )
        .is_ok();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        )
        .expect("answer");
        Seen {
            method,
            path,
            tenant,
            body: String::from_utf8(body).expect("utf-8"),
            verified,
        }
    });
    (port, handle)
}

fn fetcherctl(port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fetcherctl"))
        .args(args)
        .arg("--api")
        .arg(format!("http://127.0.0.1:{port}"))
        .env("APP_ENC_KEY", MASTER)
        .env_remove("FETCHER_INTERNAL_HMAC_KEY")
        .env_remove("FETCHER_API_URL")
        .output()
        .expect("run fetcherctl")
}

#[test]
fn cancel_signs_its_request_for_the_job_method_path_and_tenant() {
    let job = Uuid::new_v4();
    let (port, seen) = stand_in(
        202,
        r#"{"id":"j","status":"cancellation_in_progress","forceCanceled":true,"executions":[]}"#,
    );
    let id = job.to_string();
    let output = fetcherctl(
        port,
        &[
            "cancel",
            &id,
            "--force",
            "--comment",
            "runaway",
            "--reason-code",
            "OPS_1",
            "--tenant",
            "acme",
        ],
    );
    let seen = seen.join().expect("stand-in");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(seen.verified, "{seen:?}");
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, format!("/v1/fetcher/{job}/cancel"));
    assert_eq!(seen.tenant, "acme");
    let body: serde_json::Value = serde_json::from_str(&seen.body).expect("JSON body");
    assert_eq!(
        body,
        serde_json::json!({"force": true, "comment": "runaway", "reasonCode": "OPS_1"})
    );
    let printed = String::from_utf8(output.stdout).expect("utf-8");
    assert!(
        printed.starts_with("Job j: cancellation_in_progress"),
        "{printed}"
    );
}

#[test]
fn status_prints_the_document_and_delete_uses_its_own_method() {
    let job = Uuid::new_v4().to_string();
    let (port, seen) = stand_in(200, r#"{"id":"j","status":"completed"}"#);
    let output = fetcherctl(port, &["status", &job, "--json"]);
    let seen = seen.join().expect("stand-in");
    assert!(output.status.success());
    assert!(
        seen.verified && seen.method == "GET" && seen.body.is_empty(),
        "{seen:?}"
    );
    let printed: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the document as JSON");
    assert_eq!(printed["status"], "completed");

    let (port, seen) = stand_in(202, r#"{"id":"j","status":"deleted"}"#);
    let output = fetcherctl(port, &["delete", &job]);
    let seen = seen.join().expect("stand-in");
    assert!(output.status.success());
    assert!(seen.verified && seen.method == "DELETE", "{seen:?}");
    assert_eq!(seen.path, format!("/v1/fetcher/{job}"));
}

/// A failed job's document as the Worker answers it: the job's reason, one execution timed
/// out and one failed, each with its redacted error in `statusDetails`.
const FAILED: &str = r#"{"id":"j","status":"failed","errorMessage":"extraction timed out after 2s",
"executions":[
 {"datasource":"crm","status":"FAILED","rowCount":0,"statusDetails":{"error":"query on datasource crm failed: relation \"x\" does not exist"}},
 {"datasource":"ledger","status":"TIMED_OUT","rowCount":7,"statusDetails":{"error":"extraction timed out after 2s"}}]}"#;

#[test]
fn status_prints_why_a_job_and_each_of_its_executions_failed() {
    let job = Uuid::new_v4().to_string();
    let (port, seen) = stand_in(200, FAILED);
    let output = fetcherctl(port, &["status", &job]);
    seen.join().expect("stand-in");
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).expect("utf-8");
    assert_eq!(
        printed,
        "Job j: failed\n  reason: extraction timed out after 2s\n  \
         crm: FAILED (0 rows): query on datasource crm failed: relation \"x\" does not exist\n  \
         ledger: TIMED_OUT (7 rows): extraction timed out after 2s\n"
    );
}

#[test]
fn a_refusal_exits_1_with_the_apis_reason_and_no_key() {
    let job = Uuid::new_v4().to_string();
    let (port, seen) = stand_in(
        409,
        r#"{"error":"the job is completed","code":"invalid_state_transition"}"#,
    );
    let output = fetcherctl(port, &["cancel", &job]);
    seen.join().expect("stand-in");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).expect("utf-8");
    assert!(
        stderr.contains("409") && stderr.contains("the job is completed"),
        "{stderr}"
    );
    assert!(!stderr.contains(MASTER));
    let refused = Command::new(env!("CARGO_BIN_EXE_fetcherctl"))
        .args(["status", &job, "--api", "https://127.0.0.1:1"])
        .env("APP_ENC_KEY", MASTER)
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("http://host:port"));
}
