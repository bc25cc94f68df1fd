//! Hostile filters on a MongoDB datasource, through the binary: operators as values, `$where`,
//! `$function`, `$` keys nested in values or fields, huge value lists, regex bombs in `like`.
//! Each job either fails with a clear message of the Worker's own (not an error of the server,
//! which would mean the operator reached it) or matches literally: the collection holds
//! documents an operator reading of the filter would match too, and only the literal one comes
//! back.

use mongodb::bson::{doc, Document};
use serde_json::{json, Value};
use uuid::Uuid;

use super::job;
use crate::harness::sources::{MongoDb, SourceDb};
use crate::harness::World;

/// `n` and `s` of each document: strings an operator or regex reading would widen.
const ITEMS: [(i32, &str); 9] = [
    (1, "alpha"),
    (2, "beta"),
    (3, "$where"),
    (4, r#"{"$gt": ""}"#),
    (5, ".*"),
    (6, "(a+)+$"),
    (7, "aaaaaaaaaaaaaaaaaaaaaaaaaaaa!"),
    (8, "$function"),
    (9, "this.s.length > 0"),
];

/// What the server says when an operator reaches it (docs/TEST-SERVERS.md): none may appear.
const SERVER_ERRORS: [&str; 6] = [
    "globalScriptEngine",
    "Unrecognized expression",
    "unknown top level operator",
    "unknown operator",
    "BadValue",
    "Location",
];

#[tokio::test]
async fn hostile_mongodb_filters_fail_clearly_or_match_literally() {
    let world = World::new().await;
    let mongo = MongoDb::create().await;
    let documents: Vec<Document> = ITEMS
        .iter()
        .map(|(n, s)| doc! { "n": n, "s": s, "nested": { "k": s } })
        .collect();
    mongo.insert("items", documents).await;
    let worker = world.start_worker_with(mongo.datasource("inv")).await;
    let mut events = world.listen().await;

    let filtered = |filters: Value| json!({"inv": {"items": filters}});
    let mapped = json!({"inv": {"items": ["n"]}});
    let huge: Vec<i64> = (0..10_001).collect();
    let literal: Vec<(Value, Vec<i64>)> = vec![
        // An operator's name, or an operator document as text, is a string like any other.
        (json!({"s": {"eq": ["$where"]}}), vec![3]),
        (json!({"s": {"eq": [r#"{"$gt": ""}"#]}}), vec![4]),
        (
            json!({"nested.k": {"in": ["$function", "$where"]}}),
            vec![3, 8],
        ),
        (
            json!({"s": {"nin": ["$where", "alpha", "beta", ".*", "(a+)+$", "$function"]}, "n": {"lte": [7]}}),
            vec![4, 7],
        ),
        (json!({"s": {"eq": ["this.s.length > 0"]}}), vec![9]),
        // Regex metacharacters in `like` are literals: `.*` is not "anything", `(a+)+$` no bomb.
        (json!({"s": {"like": [".*"]}}), vec![5]),
        (json!({"s": {"like": ["(a+)+$"]}}), vec![6]),
        (json!({"s": {"like": ["$%"]}}), vec![3, 8]),
        // Within the bounds, a pattern of many wildcards is only a pattern.
        (json!({"s": {"like": ["%a%a%a%a%a%a%a%!"]}}), vec![7]),
        // A long list of values within the limit.
        (
            json!({"n": {"in": huge[..10_000]}}),
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
    ];
    let refused: Vec<(Value, &str)> = vec![
        // Operators as values: a filter value is a string, number or boolean.
        (json!({"s": {"eq": [{"$gt": ""}]}}), "invalid job message"),
        (
            json!({"s": {"in": [{"$where": "true"}]}}),
            "invalid job message",
        ),
        (
            json!({"s": {"eq": [{"a": {"$ne": null}}]}}),
            "invalid job message",
        ),
        (json!({"s": {"eq": [["$gt", ""]]}}), "invalid job message"),
        // Operators where an operator is named: only the contract's.
        (json!({"s": {"$gt": [""]}}), "invalid job message"),
        (json!({"s": {"$where": ["true"]}}), "invalid job message"),
        (json!({"s": {"$function": ["true"]}}), "invalid job message"),
        // Operators as fields, at the top or nested in a path.
        (
            json!({"$where": {"eq": ["this.n > 0"]}}),
            "names an operator",
        ),
        (json!({"$expr": {"eq": ["1"]}}), "names an operator"),
        (
            json!({"nested.$function": {"eq": ["x"]}}),
            "names an operator",
        ),
        (json!({"nested.k.$gt": {"eq": [""]}}), "names an operator"),
        // Huge arrays.
        (json!({"n": {"in": huge}}), "at most 10000"),
        // Regex bombs: too many wildcards, or too long.
        (
            json!({"s": {"like": ["%a%a%a%a%a%a%a%a%a%!"]}}),
            "runs of %",
        ),
        (
            json!({"s": {"like": ["a%".repeat(600)]}}),
            "longer than 1024",
        ),
    ];

    let mut literal_jobs = Vec::new();
    for (filters, expected) in literal {
        let job_id = Uuid::now_v7();
        world
            .submit(
                &job(job_id, mapped.clone(), filtered(filters.clone())),
                None,
                &[],
            )
            .await;
        literal_jobs.push((job_id, filters, expected));
    }
    let mut refused_jobs = Vec::new();
    for (filters, expected) in refused {
        let job_id = Uuid::now_v7();
        world
            .submit(
                &job(job_id, mapped.clone(), filtered(filters.clone())),
                None,
                &[],
            )
            .await;
        refused_jobs.push((job_id, filters, expected));
    }

    for (job_id, filters, expected) in literal_jobs {
        let result = world.completed_result(&mut events, job_id).await;
        let rows: Value = serde_json::from_slice(&result).expect("result JSON");
        let mut ns: Vec<i64> = rows["inv"]["items"]
            .as_array()
            .map(|rows| rows.iter().filter_map(|r| r["n"].as_i64()).collect())
            .unwrap_or_default();
        ns.sort_unstable();
        assert_eq!(ns, expected, "{filters}");
    }
    for (job_id, filters, expected) in refused_jobs {
        let message = world.failure_of(&mut events, job_id).await;
        assert!(
            message.contains(expected),
            "{filters}: {message:?} should say {expected:?}"
        );
        for server in SERVER_ERRORS {
            assert!(
                !message.contains(server),
                "{filters} reached the server: {message}"
            );
        }
    }

    drop(worker);
    mongo.drop().await;
    world.cleanup().await;
}
