//! The hostile-size cases: messages of 1 KiB to 100 MB, signed and unsigned, 100,000
//! datasources, 200,000 `in` values and deeply nested headers, each sent to one Worker with
//! default limits while its peak resident memory is read from `/proc`. Prints the table that
//! RELIABILITY.md records, and holds each case to the goal: peak growth at most
//! 64 MiB + prefetch × 2 × `RABBITMQ_MAX_MESSAGE_BYTES`, and 8× its size for a valid message.

use std::time::Duration;

use lapin::types::{AMQPValue, FieldTable};
use serde_json::json;
use uuid::Uuid;

use super::bodies::padded_job;
use super::memory::{self, mib};
use crate::harness::{free_port, WorkerProcess, World};
use crate::harness::{publish, signed, work_route, DeadLetters, Headers, RUN_HEADER};

const PREFETCH: u64 = 5;
const MAX_MESSAGE: u64 = 4 << 20;

/// What a case expects the Worker to do with its message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    /// Dead-lettered, the job untouched.
    DeadLettered,
    /// Dead-lettered, and the job failed.
    DeadLetteredJobFailed,
    /// The job failed (the message acknowledged).
    JobFailed,
    /// The job completed.
    JobCompleted,
}

struct Case {
    kind: &'static str,
    body: Vec<u8>,
    signed: bool,
    headers: Option<Headers>,
    expect: Outcome,
    /// A valid message held to 8× its size.
    valid: bool,
}

/// Whether the Worker under test is an optimised build (`TEST_WORKER_BIN`, the release binary).
/// An unoptimised build parses a deeply nested header with about 10 KiB of stack a level, all of
/// it resident while it parses: there the deep-header cases are held to the stack the Worker
/// gives lapin's thread (1 GiB) instead, and RELIABILITY.md records the release figures.
fn optimised() -> bool {
    std::env::var_os("TEST_WORKER_BIN").is_some()
}

/// A valid job of about `size` bytes: one `eq` filter value carries the weight.
fn valid_heavy(job_id: Uuid, size: usize) -> Vec<u8> {
    let value = "x".repeat(size - 200);
    json!({
        "jobId": job_id,
        "mappedFields": {"src": {"payments": ["id"]}},
        "filters": {"src": {"payments": {"memo": {"eq": [value]}}}},
    })
    .to_string()
    .into_bytes()
}

fn many_datasources(job_id: Uuid, n: usize) -> Vec<u8> {
    let mapped: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| (format!("ds{i}"), json!({"t": ["f"]})))
        .collect();
    json!({"jobId": job_id, "mappedFields": mapped})
        .to_string()
        .into_bytes()
}

fn many_in_values(job_id: Uuid, n: usize) -> Vec<u8> {
    let values: Vec<u32> = (0..n as u32).collect();
    json!({
        "jobId": job_id,
        "mappedFields": {"src": {"payments": ["id"]}},
        "filters": {"src": {"payments": {"id": {"in": values}}}},
    })
    .to_string()
    .into_bytes()
}

/// A header table nested `depth` levels deep.
fn deep_table(depth: usize) -> AMQPValue {
    let mut value = AMQPValue::LongString("bottom".into());
    for _ in 0..depth {
        let mut table = FieldTable::default();
        table.insert("a".into(), value);
        value = AMQPValue::FieldTable(table);
    }
    value
}

/// A header array nested `depth` levels deep (5 bytes a level: the deepest a frame can carry).
fn deep_array(depth: usize) -> AMQPValue {
    let mut value = AMQPValue::Boolean(true);
    for _ in 0..depth {
        value = AMQPValue::FieldArray(vec![value].into());
    }
    value
}

fn job_id_of(body: &[u8]) -> Option<Uuid> {
    Uuid::parse_str(&contract::envelope::signed_job_id(body)).ok()
}

#[tokio::test]
async fn hostile_sizes_stay_within_the_memory_goal() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    env.insert("RABBITMQ_NUMBERS_OF_WORKERS".into(), PREFETCH.to_string());
    let worker = WorkerProcess::spawn(env, port);
    worker.wait_ready(Duration::from_secs(60)).await;
    let mut dead = DeadLetters::tap(&world).await;
    let pid = worker.child.id();

    let kib = |n: usize| n << 10;
    let mb = |n: usize| n * 1_000_000;
    let mut cases = Vec::new();
    for size in [kib(1), kib(1024), kib(4096), mb(16), mb(64), mb(100)] {
        cases.push(Case {
            kind: "unsigned job, metadata padding",
            body: padded_job(Uuid::new_v4(), size),
            signed: false,
            headers: None,
            expect: Outcome::DeadLettered,
            valid: false,
        });
    }
    for (size, expect) in [
        (kib(1), Outcome::JobCompleted),
        (kib(1024), Outcome::JobFailed),
        (kib(4000), Outcome::JobFailed),
    ] {
        cases.push(Case {
            kind: "signed job, metadata padding",
            body: padded_job(Uuid::new_v4(), size),
            signed: true,
            headers: None,
            expect,
            valid: false,
        });
    }
    for size in [mb(8), mb(100)] {
        cases.push(Case {
            kind: "signed job over the limit",
            body: padded_job(Uuid::new_v4(), size),
            signed: true,
            headers: None,
            expect: Outcome::DeadLetteredJobFailed,
            valid: false,
        });
    }
    cases.push(Case {
        kind: "signed valid job, one 4 MiB filter value",
        body: valid_heavy(Uuid::new_v4(), kib(4096) - 64),
        signed: true,
        headers: None,
        // No row matches: an empty result, stored.
        expect: Outcome::JobCompleted,
        valid: true,
    });
    cases.push(Case {
        kind: "signed job, 100,000 datasources",
        body: many_datasources(Uuid::new_v4(), 100_000),
        signed: true,
        headers: None,
        expect: Outcome::JobFailed,
        valid: false,
    });
    cases.push(Case {
        kind: "signed job, 200,000 `in` values",
        body: many_in_values(Uuid::new_v4(), 200_000),
        signed: true,
        headers: None,
        expect: Outcome::JobFailed,
        valid: false,
    });
    cases.push(Case {
        kind: "unsigned job, header table nested 18,000 deep",
        body: padded_job(Uuid::new_v4(), kib(1)),
        signed: false,
        headers: Some(Headers::default().value("x-deep", deep_table(18_000))),
        expect: Outcome::DeadLettered,
        valid: false,
    });
    cases.push(Case {
        kind: "unsigned job, header array nested 25,000 deep",
        body: padded_job(Uuid::new_v4(), kib(1)),
        signed: false,
        headers: Some(Headers::default().value("x-deep", deep_array(25_000))),
        expect: Outcome::DeadLettered,
        valid: false,
    });

    // Memory the allocator kept from a large case would hide a later case's cost: the
    // many-small-values cases run first, the deep headers (whose stack stays resident) last.
    let structural: Vec<Case> = cases
        .extract_if(.., |case| {
            case.kind.contains("datasources") || case.kind.contains("`in`")
        })
        .collect();
    cases.splice(0..0, structural);

    // `TEST_SIZES_KINDS=<prefix>` keeps the cases whose kind starts with it: to measure another
    // build (`TEST_WORKER_BIN`) on the cases it handles alike, such as the unsigned ones.
    if let Ok(prefix) = std::env::var("TEST_SIZES_KINDS") {
        cases.retain(|case| case.kind.starts_with(&prefix));
    }

    let bound = (64 << 20) + PREFETCH * 2 * MAX_MESSAGE;
    let mut table =
        String::from("| kind | size | outcome | peak RSS growth |\n|---|---|---|---|\n");
    let mut failures = Vec::new();
    for case in &cases {
        let t = chrono::Utc::now().timestamp();
        let mut headers = if case.signed {
            signed(&world, t, &work_route(&world, ""), &case.body, None)
        } else {
            Headers::default()
                .text(RUN_HEADER, &world.id)
                .text("x-message-signature", &"0".repeat(64))
                .text("t", &t.to_string())
                .text("signature-version", "v1")
        };
        if let Some(extra) = &case.headers {
            headers.0.extend(extra.0.iter().cloned());
        }
        let job_id = job_id_of(&case.body);
        let growth = memory::peak_growth(pid, async {
            publish(
                &world.broker.channel,
                "",
                &world.queue,
                &case.body,
                &headers,
            )
            .await;
            match case.expect {
                Outcome::DeadLettered | Outcome::DeadLetteredJobFailed => {
                    assert_eq!(
                        dead.collect(1, Duration::from_secs(120)).await.len(),
                        1,
                        "{}: not dead-lettered",
                        case.kind
                    );
                }
                Outcome::JobFailed | Outcome::JobCompleted => {}
            }
            let status = match case.expect {
                Outcome::DeadLettered => None,
                Outcome::JobCompleted => Some("completed"),
                Outcome::JobFailed | Outcome::DeadLetteredJobFailed => Some("failed"),
            };
            if let Some(status) = status {
                let job_id = job_id.expect("a job id");
                world
                    .wait_status(job_id, status, Duration::from_secs(120))
                    .await;
            }
        })
        .await;
        if case.expect == Outcome::DeadLettered {
            if let Some(job_id) = job_id {
                assert_eq!(world.job_status(job_id).await, None, "{}", case.kind);
            }
        }
        let size = case.body.len() as u64;
        let deep_header = case.headers.is_some();
        let limit = match (case.valid, deep_header && !optimised()) {
            (_, true) => 1 << 30,
            (true, false) => bound.min(8 * size),
            (false, false) => bound,
        };
        if growth > limit {
            failures.push(format!(
                "{} ({size} bytes): {:.1} MiB > {:.1} MiB",
                case.kind,
                mib(growth),
                mib(limit)
            ));
        }
        let row = format!(
            "| {} | {} | {:?} | {:.1} MiB |\n",
            case.kind,
            human(size),
            case.expect,
            mib(growth)
        );
        // Each row as it is measured, so a case that fails still leaves the ones before it.
        eprint!("{row}");
        table.push_str(&row);
    }
    println!("{table}");
    eprintln!("{table}");
    assert!(
        worker.get("/health").is_some_and(|(code, _)| code == 200),
        "the Worker did not survive:\n{}",
        worker.output()
    );
    assert!(
        failures.is_empty(),
        "over the goal:\n{}\n{table}",
        failures.join("\n")
    );
    drop(worker);
    world.cleanup().await;
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 && b % 1_000_000 == 0 => format!("{} MB", b / 1_000_000),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
