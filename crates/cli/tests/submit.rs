//! `fetcherctl submit` against the real RabbitMQ: what arrives on the queue is a signed,
//! valid job message; what is invalid is refused with the parser's message and never sent.

mod support;

use std::process::Output;
use std::time::Duration;

use contract::envelope::{verify, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use contract::JobMessage;
use lapin::message::Delivery;
use lapin::types::ShortString;
use support::Broker;
use uuid::Uuid;

fn submit(queue: &str, args: &[&str]) -> Output {
    support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .args(["submit", "--queue", queue])
        .args(args)
        .output()
        .expect("run fetcherctl")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The job id of `Submitted job <uuid>`.
fn submitted_job(output: &Output) -> Uuid {
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    let id = stdout
        .strip_prefix("Submitted job ")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected output {stdout:?}"));
    Uuid::parse_str(id).expect("a UUID")
}

/// Verifies the delivery's signature with the internal key under `tenant`, the default
/// exchange and `queue`.
fn verify_with(delivery: &Delivery, tenant: &str, queue: &str) -> bool {
    let headers = SignatureHeaders {
        signature: Some(HeaderValue::Text(support::long_string(
            delivery,
            "x-message-signature",
        ))),
        timestamp: Some(HeaderValue::Text(support::long_string(delivery, "t"))),
        version: Some(HeaderValue::Text(support::long_string(
            delivery,
            "signature-version",
        ))),
    };
    let route = Route {
        tenant,
        exchange: "",
        routing_key: queue,
    };
    let keys = support::keys();
    verify(
        &headers,
        &route,
        &delivery.data,
        &VerifyPolicy::default(),
        chrono::Utc::now().timestamp(),
        |payload, hex| keys.internal_hmac().verify_hex_parts(payload, hex),
    )
    .is_ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_from_flags_arrives_signed_persistent_and_valid() {
    let broker = Broker::connect().await;
    let queue = support::unique("queue");
    broker.declare_queue(&queue).await;

    let output = submit(
        &queue,
        &[
            "--connection",
            "ledger",
            "--table",
            "public.accounts",
            "--fields",
            "id,balance",
            "--filter",
            r#"{"status":{"eq":["active"]}}"#,
            "--metadata",
            r#"{"source":"payments"}"#,
            "--tenant",
            "acme",
            "--request-id",
            "req-7",
        ],
    );
    let job = submitted_job(&output);
    assert_eq!(job.get_version_num(), 7, "a generated v7 UUID");

    let received = broker.receive(&queue, 1, Duration::from_secs(10)).await;
    let delivery = &received[0];
    assert_eq!(delivery.exchange.as_str(), "");
    assert_eq!(delivery.routing_key.as_str(), queue);
    assert_eq!(*delivery.properties.delivery_mode(), Some(2), "persistent");
    assert_eq!(
        delivery
            .properties
            .content_type()
            .as_ref()
            .map(ShortString::as_str),
        Some("application/json")
    );
    assert_eq!(support::long_string(delivery, "signature-version"), b"v1");
    assert_eq!(
        support::long_string(delivery, "x-message-signature").len(),
        64
    );
    let t: i64 = text(support::long_string(delivery, "t"))
        .parse()
        .expect("t is decimal seconds");
    assert!((chrono::Utc::now().timestamp() - t).abs() <= 5);
    assert_eq!(support::long_string(delivery, "X-Tenant-ID"), b"acme");
    assert_eq!(support::long_string(delivery, "X-Request-Id"), b"req-7");

    assert!(verify_with(delivery, "acme", &queue), "signature verifies");
    assert!(!verify_with(delivery, "", &queue), "the tenant is signed");
    assert!(
        !verify_with(delivery, "acme", "other.queue"),
        "the queue is signed"
    );

    let message = JobMessage::parse(&delivery.data).expect("the Worker's parser accepts it");
    assert_eq!(message.job_id, job);
    assert_eq!(
        message.mapped_fields["ledger"]["public.accounts"],
        ["id", "balance"]
    );
    assert!(message.filters["ledger"]["public.accounts"].contains_key("status"));
    assert_eq!(message.metadata["source"], "payments");

    broker.delete_queue(&queue).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_is_sent_as_given_and_gets_a_job_id_only_when_it_lacks_one() {
    let broker = Broker::connect().await;
    let queue = support::unique("queue");
    broker.declare_queue(&queue).await;
    let dir = std::env::temp_dir().join(support::unique("files"));
    std::fs::create_dir_all(&dir).expect("temp dir");

    // With a job id: byte for byte.
    let given = "{\n  \"JOBID\": \"019391a2-7c1e-7a3b-9f00-0123456789ab\",\n  \"mappedFields\": {\"db\": {\"t\": [\"a\"]}}\n}\n";
    let with_id = dir.join("with-id.json");
    std::fs::write(&with_id, given).expect("write");
    let output = submit(&queue, &["--file", with_id.to_str().expect("utf-8 path")]);
    assert_eq!(
        submitted_job(&output).to_string(),
        "019391a2-7c1e-7a3b-9f00-0123456789ab"
    );

    // Without one: generated, inserted first, the rest untouched.
    let rest = " \"mappedFields\": {\"db\": {\"t\": [\"a\", \"b\"]}}, \"metadata\": {\"k\": 1} }";
    let without_id = dir.join("without-id.json");
    std::fs::write(&without_id, format!("{{{rest}")).expect("write");
    let output = submit(
        &queue,
        &["--file", without_id.to_str().expect("utf-8 path")],
    );
    let generated = submitted_job(&output);

    let received = broker.receive(&queue, 2, Duration::from_secs(10)).await;
    assert_eq!(received[0].data, given.as_bytes());
    assert!(
        support::header(&received[0], "X-Tenant-ID").is_none(),
        "no tenant header without --tenant"
    );
    assert!(verify_with(&received[0], "", &queue));

    assert_eq!(
        text(&received[1].data),
        format!("{{\"jobId\":\"{generated}\",{rest}")
    );
    assert!(verify_with(&received[1], "", &queue));
    assert_eq!(
        JobMessage::parse(&received[1].data).expect("valid").job_id,
        generated
    );

    std::fs::remove_dir_all(&dir).expect("remove temp dir");
    broker.delete_queue(&queue).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_messages_are_refused_with_the_parsers_message_and_nothing_is_sent() {
    let broker = Broker::connect().await;
    let queue = support::unique("queue");
    broker.declare_queue(&queue).await;
    let dir = std::env::temp_dir().join(support::unique("files"));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let parser_says = |body: &str| {
        JobMessage::parse(body.as_bytes())
            .expect_err("invalid")
            .to_string()
    };
    let bad_file = dir.join("bad.json");
    let bad_body = r#"{"jobId":"not-a-uuid","mappedFields":{"db":{"t":["a"]}}}"#;
    std::fs::write(&bad_file, bad_body).expect("write");
    let empty_table = dir.join("empty-table.json");
    let empty_body = r#"{"mappedFields":{"db":{"t":[]}}}"#;
    std::fs::write(&empty_table, empty_body).expect("write");

    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--file", bad_file.to_str().expect("path")],
            parser_says(bad_body),
        ),
        (
            // The generated id is inserted, then the parser refuses the table.
            vec!["--file", empty_table.to_str().expect("path")],
            parser_says(
                r#"{"jobId":"019391a2-7c1e-7a3b-9f00-0123456789ab","mappedFields":{"db":{"t":[]}}}"#,
            ),
        ),
        (
            vec![
                "--connection",
                "db",
                "--table",
                "t",
                "--fields",
                "a",
                "--metadata",
                "[1]",
            ],
            parser_says(r#"{"metadata":[1]}"#),
        ),
        (
            vec![
                "--connection",
                "db",
                "--table",
                "t",
                "--fields",
                "a",
                "--filter",
                r#"{"a":{"regex":["x"]}}"#,
            ],
            parser_says(r#"{"filters":{"db":{"t":{"a":{"regex":["x"]}}}}}"#),
        ),
    ];
    for (args, expected) in cases {
        let output = submit(&queue, &args);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(&expected),
            "{args:?}: expected {expected:?} in {stderr:?}"
        );
    }

    // Flags clap refuses: no fields, or a file together with flags.
    for args in [
        vec!["--connection", "db", "--table", "t"],
        vec!["--file", "x.json", "--connection", "db"],
        vec![
            "--connection",
            "db",
            "--table",
            "t",
            "--fields",
            "a",
            "--filter",
            "{oops",
        ],
    ] {
        let output = submit(&queue, &args);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(output.stdout.is_empty());
    }

    // The master key is required, and its value is never echoed.
    let output = support::fetcherctl()
        .env("APP_ENC_KEY", "not base64!")
        .args([
            "submit",
            "--queue",
            &queue,
            "--connection",
            "db",
            "--table",
            "t",
            "--fields",
            "a",
        ])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("APP_ENC_KEY") && !stderr.contains("not base64!"),
        "{stderr}"
    );

    assert_eq!(broker.depth(&queue).await, 0, "nothing was published");
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
    broker.delete_queue(&queue).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unroutable_message_fails_and_no_uri_is_ever_printed() {
    let missing = support::unique("missing-queue");
    let output = submit(
        &missing,
        &["--connection", "db", "--table", "t", "--fields", "a"],
    );
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("unroutable"), "{stderr}");
    assert!(!stderr.contains(&support::amqp_uri()), "{stderr}");

    // A broker that cannot be reached: the error names neither the password nor the URI.
    let uri = "amqp://fetcher:pw-sentinel-42@127.0.0.1:1/%2f";
    let output = support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .env("AMQP_URI", uri)
        .args([
            "submit",
            "--queue",
            "q",
            "--connection",
            "db",
            "--table",
            "t",
            "--fields",
            "a",
        ])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(all.contains("Failed to connect"), "{all}");
    assert!(!all.contains("pw-sentinel-42"), "{all}");
}

/// `submit` with the internal HMAC key instead of the master key; `via_env` passes it in
/// `FETCHER_INTERNAL_HMAC_KEY` rather than `--hmac-key`.
fn submit_with_hmac_key(queue: &str, hex: &str, via_env: bool, args: &[&str]) -> Output {
    let mut command = support::fetcherctl();
    command.args(["submit", "--queue", queue]);
    if via_env {
        command.env("FETCHER_INTERNAL_HMAC_KEY", hex);
    } else {
        command.args(["--hmac-key", hex]);
    }
    command.args(args).output().expect("run fetcherctl")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_internal_key_alone_signs_exactly_as_the_master_key_does() {
    let broker = Broker::connect().await;
    let queue = support::unique("queue");
    broker.declare_queue(&queue).await;
    let internal = support::keys().internal_hmac().reveal_hex();
    let job = Uuid::new_v4().to_string();
    let flags = [
        "--connection",
        "db",
        "--table",
        "t",
        "--fields",
        "a",
        "--job-id",
        &job,
        "--tenant",
        "acme",
    ];

    let outputs = [
        submit(&queue, &flags),
        submit_with_hmac_key(&queue, &internal, false, &flags),
        submit_with_hmac_key(&queue, &internal.to_uppercase(), true, &flags),
    ];
    for output in &outputs {
        assert_eq!(submitted_job(output).to_string(), job);
        let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(!all.contains(&internal), "the key is never printed: {all}");
    }

    let received = broker.receive(&queue, 3, Duration::from_secs(10)).await;
    for delivery in &received {
        assert!(
            verify_with(delivery, "acme", &queue),
            "verifies with the internal key"
        );
        // Recomputed from the delivery's own t: the same key makes the same signature.
        let t = text(support::long_string(delivery, "t"));
        let route = Route {
            tenant: "acme",
            exchange: "",
            routing_key: &queue,
        };
        let expected = contract::envelope::signing_payload(&t, &route, &delivery.data);
        assert_eq!(
            text(support::long_string(delivery, "x-message-signature")),
            support::keys().internal_hmac().sign_hex(&expected)
        );
    }

    broker.delete_queue(&queue).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_one_of_the_master_key_and_the_internal_key_is_taken() {
    let broker = Broker::connect().await;
    let queue = support::unique("queue");
    broker.declare_queue(&queue).await;
    let internal = support::keys().internal_hmac().reveal_hex();
    let flags = ["--connection", "db", "--table", "t", "--fields", "a"];

    // Both: refused, neither echoed.
    let output = support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .args(["submit", "--queue", &queue, "--hmac-key", &internal])
        .args(flags)
        .output()
        .expect("run");
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("APP_ENC_KEY")
            && stderr.contains("--hmac-key")
            && stderr.contains("not both"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(&internal) && !stderr.contains(support::MASTER),
        "{stderr}"
    );

    // Neither: says which ones it takes.
    let output = support::fetcherctl()
        .args(["submit", "--queue", &queue])
        .args(flags)
        .output()
        .expect("run");
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("APP_ENC_KEY")
            && stderr.contains("--hmac-key")
            && stderr.contains("FETCHER_INTERNAL_HMAC_KEY"),
        "{stderr}"
    );

    // Not 64 hex characters: refused without echoing it.
    let almost = format!("{}zz", &internal[..62]);
    for bad in ["abc", almost.as_str()] {
        let output = submit_with_hmac_key(&queue, bad, false, &flags);
        assert!(!output.status.success(), "{output:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains("internal HMAC key"), "{stderr}");
        assert!(!stderr.contains(bad), "{stderr}");
    }

    assert_eq!(broker.depth(&queue).await, 0, "nothing was published");
    broker.delete_queue(&queue).await;
    broker.close().await;
}
