//! `fetcherctl jobs list` as a real process, against a stand-in for the control API that
//! checks each request's signature (over its path and query string) with the Worker's own
//! verification and answers pages as `GET /v1/fetcher` does.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;

use contract::envelope::{
    verify_control, ControlRoute, HeaderValue, SignatureHeaders, VerifyPolicy,
};

const MASTER: &str = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8=";

/// One request the stand-in saw: its path (with the query), tenant, and whether it verified.
#[derive(Debug)]
struct Seen {
    path: String,
    tenant: String,
    verified: bool,
}

/// Serves one request per answer, in order; returns the port and what it saw.
fn stand_in(answers: Vec<String>) -> (u16, thread::JoinHandle<Vec<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let handle = thread::spawn(move || {
        let keys = crypto::KeySet::from_base64(MASTER).expect("keys");
        let mut seen = Vec::new();
        for answer in answers {
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
            let tenant = headers.get("x-tenant-id").cloned().unwrap_or_default();
            let text = |name: &str| headers.get(name).map(|v| HeaderValue::Text(v.as_bytes()));
            let signature = SignatureHeaders {
                signature: text("x-message-signature"),
                timestamp: text("t"),
                version: text("signature-version"),
            };
            let route = ControlRoute {
                tenant: &tenant,
                job_id: "",
                method: &method,
                path: &path,
            };
            let verified = verify_control(
                &signature,
                &route,
                b"",
                &VerifyPolicy::default(),
                chrono::Utc::now().timestamp(),
                |parts, hex| keys.internal_hmac().verify_hex_parts(parts, hex),
            )
            .is_ok();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                answer.len()
            )
            .expect("answer");
            seen.push(Seen {
                path,
                tenant,
                verified,
            });
        }
        seen
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

const FIRST: &str = r#"{"items":[
  {"id":"0193e9a0-0000-7000-8000-000000000002","status":"failed","createdAt":"2026-03-01T10:02:00.000Z",
   "executions":[{"datasource":"ledger","status":"FAILED","statusDetails":{"error":"source unreachable"}}]},
  {"id":"0193e9a0-0000-7000-8000-000000000001","status":"failed","createdAt":"2026-03-01T10:01:00.000Z",
   "executions":[],"reasonCode":"OPS_1"}],
 "nextCursor":"ajEuMTc2.next"}"#;
const SECOND: &str = r#"{"items":[
  {"id":"0193e9a0-0000-7000-8000-000000000000","status":"completed","createdAt":"2026-03-01T10:00:00.000Z",
   "executions":[]}],
 "nextCursor":null}"#;

#[test]
fn jobs_list_all_follows_the_cursors_and_prints_a_table() {
    let (port, seen) = stand_in(vec![FIRST.into(), SECOND.into()]);
    let out = fetcherctl(
        port,
        &[
            "jobs", "list", "--tenant", "acme", "--status", "failed", "--limit", "2", "--all",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let seen = seen.join().expect("stand-in");
    let paths: Vec<_> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/fetcher?status=failed&limit=2",
            "/v1/fetcher?status=failed&limit=2&cursor=ajEuMTc2.next"
        ]
    );
    assert!(
        seen.iter().all(|s| s.verified && s.tenant == "acme"),
        "{seen:?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ID                                    STATUS     CREATED                   REASON\n\
         0193e9a0-0000-7000-8000-000000000002  failed     2026-03-01T10:02:00.000Z  ledger: source unreachable\n\
         0193e9a0-0000-7000-8000-000000000001  failed     2026-03-01T10:01:00.000Z  OPS_1\n\
         0193e9a0-0000-7000-8000-000000000000  completed  2026-03-01T10:00:00.000Z\n"
    );
}

#[test]
fn jobs_list_prints_one_page_and_its_cursor_or_json() {
    let (port, seen) = stand_in(vec![FIRST.into(), FIRST.into()]);
    let out = fetcherctl(
        port,
        &[
            "jobs",
            "list",
            "--created-after",
            "2026-03-01T00:00:00+01:00",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.ends_with("More: --cursor ajEuMTc2.next\n"), "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");
    let out = fetcherctl(
        port,
        &["jobs", "list", "--json", "--cursor", "ajEuMTc2.next"],
    );
    assert!(out.status.success(), "{out:?}");
    let seen = seen.join().expect("stand-in");
    assert_eq!(
        seen[0].path,
        "/v1/fetcher?createdAfter=2026-03-01T00:00:00%2B01:00"
    );
    assert_eq!(seen[1].path, "/v1/fetcher?cursor=ajEuMTc2.next");
    assert!(seen.iter().all(|s| s.verified && s.tenant.is_empty()));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["items"].as_array().unwrap().len(), 2);
    assert_eq!(json["nextCursor"], "ajEuMTc2.next");
}
