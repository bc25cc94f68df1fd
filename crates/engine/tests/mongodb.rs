//! MongoDB datasources against the local test server (secantusdb): values, projection,
//! filters, validation and cursors on the server. The MongoDB value-mapping table of
//! `docs/datasources.md` is backed by `every_bson_type_is_written_in_its_documented_form`.

mod support;

use engine::{EngineConfig, EngineError};
use mongodb::bson::oid::ObjectId;
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{doc, Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp};
use serde_json::json;
use support::harness::job;
use support::mongo::{MongoDb, MongoEngine};

async fn extract(engine: &engine::Engine, body: serde_json::Value) -> Result<String, EngineError> {
    let message = job(body);
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await?;
    Ok(String::from_utf8(extraction.plaintext.to_vec()).expect("UTF-8"))
}

fn compact(text: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
    value.to_string()
}

#[tokio::test]
async fn every_bson_type_is_written_in_its_documented_form() {
    let db = MongoDb::create().await;
    let uuid = uuid::Uuid::parse_str("550e8400-e29b-41d4-a716-446655440000").unwrap();
    db.insert(
        "values",
        vec![doc! {
            "_id": ObjectId::parse_str("507f1f77bcf86cd799439011").unwrap(),
            "int32": -7_i32,
            "int64": 9_007_199_254_740_993_i64,
            "double": 0.1,
            "decimal": "123.4500".parse::<Decimal128>().unwrap(),
            "date": DateTime::from_millis(1_705_314_600_123),
            "timestamp": Timestamp { time: 1_700_000_000, increment: 5 },
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: uuid.as_bytes().to_vec() },
            "bytes": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 0xff] },
            "embedded": { "zeta": 1, "alpha": { "b": true, "a": Bson::Null } },
            "array": [1, "two", { "y": 2, "x": 1 }],
            "regex": Regex { pattern: "^a.c$".into(), options: "i".into() },
            "min": Bson::MinKey,
            "max": Bson::MaxKey,
            "null": Bson::Null,
            "text": "<tag> & \u{2028}",
        }],
    )
    .await;
    let engine = db.engine("docs", EngineConfig::default(), &[]);
    let fields = [
        "_id",
        "int32",
        "int64",
        "double",
        "decimal",
        "date",
        "timestamp",
        "uuid",
        "bytes",
        "embedded",
        "array",
        "regex",
        "min",
        "max",
        "null",
        "text",
    ];
    let result = extract(
        &engine,
        json!({"mappedFields": {"docs": {"values": fields}}}),
    )
    .await
    .expect("extracted");
    // Compared as the exact compact text: key order and number forms are the contract's.
    assert_eq!(
        compact(&result),
        concat!(
            r#"{"docs":{"values":[{"_id":"507f1f77bcf86cd799439011","array":[1,"two",{"x":1,"y":2}],"#,
            r#""bytes":"AQL/","date":"2024-01-15T10:30:00.123Z","decimal":"123.4500","double":0.1,"#,
            r#""embedded":{"alpha":{"a":null,"b":true},"zeta":1},"int32":-7,"int64":9007199254740993,"#,
            r#""max":{},"min":{},"null":null,"regex":{"Pattern":"^a.c$","Options":"i"},"#,
            "\"text\":\"<tag> & \u{2028}\",",
            r#""timestamp":{"T":1700000000,"I":5},"#,
            r#""uuid":"550e8400-e29b-41d4-a716-446655440000"}]}}"#
        )
    );
    // And the bytes as the Go writer writes them: indented, HTML characters escaped.
    assert!(
        result.contains(r#""text": "\u003ctag\u003e \u0026 \u2028""#),
        "{result}"
    );
    assert!(result.contains(r#""int64": 9007199254740993"#), "{result}");
    db.drop().await;
}

#[tokio::test]
async fn the_projection_holds_only_the_mapped_paths() {
    let db = MongoDb::create().await;
    db.insert(
        "people",
        vec![
            doc! { "name": "Ana", "contact": { "email": "a@x", "phone": "1" }, "secret": "s" },
            doc! { "name": "Bo", "secret": "t" },
        ],
    )
    .await;
    let engine = db.engine("crm", EngineConfig::default(), &[]);
    let result = extract(
        &engine,
        json!({"mappedFields": {"crm": {"people": ["name", "contact.email"]}}}),
    )
    .await
    .expect("extracted");
    assert_eq!(
        compact(&result),
        r#"{"crm":{"people":[{"contact":{"email":"a@x"},"name":"Ana"},{"name":"Bo"}]}}"#
    );
    let overlap = extract(
        &engine,
        json!({"mappedFields": {"crm": {"people": ["contact", "contact.email"]}}}),
    )
    .await
    .unwrap_err();
    assert!(overlap.to_string().contains("overlap"), "{overlap}");
    db.drop().await;
}

#[tokio::test]
async fn filters_map_to_their_operators_and_hostile_values_match_literally() {
    let db = MongoDb::create().await;
    let rows: Vec<Document> = (1..=6)
        .map(|i| doc! { "n": i, "s": format!("item-{i}"), "tag": if i % 2 == 0 { "even" } else { "odd" } })
        .chain([
            doc! { "n": 100, "s": "$where", "tag": "hostile" },
            doc! { "n": 101, "s": "a.c", "tag": "dot" },
            doc! { "n": 102, "s": "abc", "tag": "dot" },
        ])
        .collect();
    db.insert("items", rows).await;
    let engine = db.engine("inv", EngineConfig::default(), &[]);
    let ns = |filters: serde_json::Value| {
        let engine = engine.clone();
        async move {
            let text = extract(
                &engine,
                json!({"mappedFields": {"inv": {"items": ["n"]}}, "filters": {"inv": {"items": filters}}}),
            )
            .await?;
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut ns: Vec<i64> = value["inv"]["items"]
                .as_array()
                .map(|rows| rows.iter().map(|r| r["n"].as_i64().unwrap()).collect())
                .unwrap_or_default();
            ns.sort_unstable();
            Ok::<_, EngineError>(ns)
        }
    };
    assert_eq!(ns(json!({"n": {"eq": [3]}})).await.unwrap(), [3]);
    assert_eq!(
        ns(json!({"n": {"gt": [4], "lte": [6]}})).await.unwrap(),
        [5, 6]
    );
    assert_eq!(ns(json!({"n": {"between": [2, 3]}})).await.unwrap(), [2, 3]);
    assert_eq!(ns(json!({"n": {"in": [1, 6]}})).await.unwrap(), [1, 6]);
    assert_eq!(
        ns(json!({"tag": {"nin": ["odd", "dot", "hostile"]}}))
            .await
            .unwrap(),
        [2, 4, 6]
    );
    assert_eq!(
        ns(json!({"tag": {"ne": ["odd"]}, "n": {"lt": [7]}}))
            .await
            .unwrap(),
        [2, 4, 6]
    );
    assert_eq!(
        ns(json!({"s": {"like": ["item-%"]}, "n": {"gte": [5]}}))
            .await
            .unwrap(),
        [5, 6]
    );
    // Values are values: an operator's name matches the document holding that string, and a
    // like pattern's regex metacharacters are literals.
    assert_eq!(ns(json!({"s": {"eq": ["$where"]}})).await.unwrap(), [100]);
    assert_eq!(ns(json!({"s": {"like": ["a.c"]}})).await.unwrap(), [101]);
    assert_eq!(
        ns(json!({"s": {"like": ["a_c"]}})).await.unwrap(),
        [101, 102]
    );
    // Fields naming operators never reach the server.
    for field in ["$where", "$expr", "s.$function", "$or"] {
        let error = ns(json!({ field: {"eq": ["x"]} })).await.unwrap_err();
        assert!(
            matches!(error, EngineError::Schema { .. }),
            "{field}: {error}"
        );
    }
    let bomb = ns(json!({"s": {"like": ["%a%a%a%a%a%a%a%a%a%a%"]}}))
        .await
        .unwrap_err();
    assert!(matches!(bomb, EngineError::Filter { .. }), "{bomb}");
    db.drop().await;
}

/// `like` as the server runs it: SQL's meaning (no overlap between segments, a final line break
/// is a character), and a pattern with the most `%` runs allowed over a long value answered at
/// once. As `^.*a.*a…b$` the same query keeps the stand-in's (single) interpreter busy for ever;
/// the bound below only turns such a hang into a failure, it measures nothing.
#[tokio::test]
async fn like_matches_as_sql_and_many_runs_over_a_long_value_cost_linear_time() {
    let db = MongoDb::create().await;
    let values = ["xabab", "ababa", "abc\n", "abc", "aaaaaaab"];
    let mut docs: Vec<Document> = values
        .iter()
        .zip(1_i64..)
        .map(|(s, n)| doc! { "n": n, "s": *s })
        .collect();
    docs.push(doc! { "n": 6_i64, "s": "a".repeat(20_000) });
    db.insert("texts", docs).await;
    let engine = db.engine("t", EngineConfig::default(), &[]);
    let ns = |pattern: &'static str| {
        let engine = &engine;
        async move {
            let body = json!({
                "mappedFields": {"t": {"texts": ["n"]}},
                "filters": {"t": {"texts": {"s": {"like": [pattern]}}}},
            });
            let text =
                tokio::time::timeout(std::time::Duration::from_secs(60), extract(engine, body))
                    .await
                    .unwrap_or_else(|_| panic!("{pattern:?} still running after 60 s"))
                    .expect("extracted");
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut ns: Vec<i64> = value["t"]["texts"]
                .as_array()
                .map(|rows| rows.iter().map(|r| r["n"].as_i64().unwrap()).collect())
                .unwrap_or_default();
            ns.sort_unstable();
            ns
        }
    };
    assert_eq!(ns("%ab%ab%").await, [1, 2]);
    assert_eq!(
        ns("%aba%aba%").await,
        Vec::<i64>::new(),
        "segments share no character"
    );
    assert_eq!(ns("abc").await, [4], "a final line break is a character");
    assert_eq!(ns("abc%").await, [3, 4]);
    assert_eq!(ns("a%a").await, [2, 6]);
    assert_eq!(ns("%a%a%a%a%a%a%a%b").await, [5]);
    db.drop().await;
}

#[tokio::test]
async fn a_missing_collection_and_reserved_names_fail_validation_before_any_read() {
    let db = MongoDb::create().await;
    db.insert("present", vec![doc! { "a": 1 }]).await;
    let engine = db.engine("m", EngineConfig::default(), &[]);
    for table in [
        "absent",
        "system.users",
        "admin.system.version",
        "local.startup_log",
    ] {
        let error = extract(
            &engine,
            json!({"mappedFields": {"m": {"present": ["a"], table: ["a"]}}}),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(error, EngineError::Schema { .. }),
            "{table}: {error}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn another_database_is_read_as_db_dot_collection_only_inside_schemas() {
    let home = MongoDb::create().await;
    let other = MongoDb::create().await;
    other.insert("orders", vec![doc! { "id": 7 }]).await;
    let key = format!("{}.orders", other.name);
    let open = home.engine("m", EngineConfig::default(), &[]);
    let result = extract(&open, json!({"mappedFields": {"m": {&key: ["id"]}}}))
        .await
        .expect("extracted");
    assert_eq!(
        compact(&result),
        format!(r#"{{"m":{{"{key}":[{{"id":7}}]}}}}"#)
    );
    let home_only = home.name.clone();
    let closed = home.engine("m", EngineConfig::default(), &[("SCHEMAS", &home_only)]);
    let error = extract(&closed, json!({"mappedFields": {"m": {&key: ["id"]}}}))
        .await
        .unwrap_err();
    assert!(matches!(error, EngineError::Schema { .. }), "{error}");
    home.drop().await;
    other.drop().await;
}

#[tokio::test]
async fn a_datasource_failing_mid_read_leaves_no_cursor_on_the_server() {
    let db = MongoDb::create().await;
    // Several batches of documents, and a result cap the first batches already exceed: the read
    // fails fast with its cursor still open on the server.
    let documents: Vec<Document> = (0..3000)
        .map(|i| doc! { "i": i, "v": "x".repeat(64) })
        .collect();
    db.insert("big", documents).await;
    // The server shows an open cursor: one of ours, held mid-read.
    let mut held = db
        .db()
        .collection::<Document>("big")
        .find(doc! {})
        .batch_size(10)
        .await
        .expect("find");
    assert!(held.advance().await.expect("first batch"));
    assert_eq!(
        db.open_cursors("big").await,
        1,
        "currentOp lists an open cursor"
    );
    drop(held);
    let config = EngineConfig {
        max_result_bytes: 64 * 1024,
        ..EngineConfig::default()
    };
    let engine = db.engine("m", config, &[]);
    match extract(&engine, json!({"mappedFields": {"m": {"big": ["i", "v"]}}})).await {
        Err(EngineError::ResultTooLarge { .. }) => {}
        Err(other) => panic!("expected the result cap, got {other}"),
        Ok(result) => panic!("extracted {} bytes despite the cap", result.len()),
    }
    // The driver kills the dropped cursor in the background: wait for the server to say so.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let open = db.open_cursors("big").await;
        if open == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{open} cursors still open on the server"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    db.drop().await;
}

mod plugin_crm {
    use super::*;
    use crypto::{CrmCipher, CrmHashKey};

    const HASH_KEY: &str = "test-secret-key-for-hashing";
    const ENCRYPT_KEY: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

    fn crm_config() -> EngineConfig {
        EngineConfig {
            crm: engine::config::CrmSecrets {
                hash_key: HASH_KEY.to_owned().into(),
                encrypt_key: ENCRYPT_KEY.to_owned().into(),
            },
            ..EngineConfig::default()
        }
    }

    /// A CRM holder as the CRM stores one: sensitive fields encrypted, their HMACs under
    /// `search.*`.
    fn holder(
        cipher: &CrmCipher,
        hash: &CrmHashKey,
        n: u8,
        document: &str,
        email: &str,
    ) -> Document {
        let seal = |text: &str, salt: u8| {
            Bson::String(
                cipher.encrypt_with_nonce(text.as_bytes(), [n, salt, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            )
        };
        doc! {
            "document": seal(document, 1),
            "name": seal(&format!("Holder {n}"), 2),
            "contact": { "primary_email": seal(email, 3) },
            "status": "active",
            "search": {
                "document": hash.hash(document),
                "contact_primary_email": hash.hash(email),
            },
        }
    }

    #[tokio::test]
    async fn every_prefixed_collection_is_read_with_hashed_filters_and_decrypted_fields() {
        let db = MongoDb::create().await;
        let cipher = CrmCipher::from_hex(ENCRYPT_KEY).unwrap();
        let hash = CrmHashKey::new(HASH_KEY).unwrap();
        db.insert(
            "holders_0001",
            vec![
                holder(&cipher, &hash, 1, "12345678900", "a@x.com"),
                holder(&cipher, &hash, 2, "22222222222", "b@x.com"),
            ],
        )
        .await;
        db.insert(
            "holders_0002",
            vec![holder(&cipher, &hash, 3, "12345678900", "c@x.com")],
        )
        .await;
        // Not a holders_ collection: never read.
        db.insert(
            "holdersX",
            vec![holder(&cipher, &hash, 4, "12345678900", "d@x.com")],
        )
        .await;
        let engine = db.engine("plugin_crm", crm_config(), &[]);
        let result = extract(
            &engine,
            json!({
                "mappedFields": {"plugin_crm": {"holders": ["document", "name", "contact.primary_email"]}},
                "filters": {"plugin_crm": {"holders": {"document": {"eq": ["12345678900"]}}}}
            }),
        )
        .await
        .expect("extracted");
        assert_eq!(
            compact(&result),
            concat!(
                r#"{"plugin_crm":{"holders":["#,
                r#"{"contact":{"primary_email":"a@x.com"},"document":"12345678900","name":"Holder 1"},"#,
                r#"{"contact":{"primary_email":"c@x.com"},"document":"12345678900","name":"Holder 3"}]}}"#
            )
        );
        // Without a field that asks for decryption, rows are returned as stored.
        let stored = extract(
            &engine,
            json!({"mappedFields": {"plugin_crm": {"holders": ["status", "contact"]}}}),
        )
        .await
        .expect("extracted");
        assert!(
            !stored.contains("a@x.com") && stored.contains("active"),
            "{stored}"
        );
        db.drop().await;
    }

    #[tokio::test]
    async fn missing_collections_keys_and_unsearchable_filters_fail_the_job_clearly() {
        let db = MongoDb::create().await;
        let cipher = CrmCipher::from_hex(ENCRYPT_KEY).unwrap();
        let hash = CrmHashKey::new(HASH_KEY).unwrap();
        db.insert("holders_1", vec![holder(&cipher, &hash, 1, "1", "a@x")])
            .await;
        let engine = db.engine("plugin_crm", crm_config(), &[]);
        let error = extract(
            &engine,
            json!({"mappedFields": {"plugin_crm": {"accounts": ["name"]}}}),
        )
        .await
        .unwrap_err();
        assert!(
            error.to_string().contains(
                r#"no collections found matching prefix "accounts_" in plugin_crm database"#
            ),
            "{error}"
        );
        let error = extract(
            &engine,
            json!({
                "mappedFields": {"plugin_crm": {"holders": ["name"]}},
                "filters": {"plugin_crm": {"holders": {"document": {"like": ["1%"]}}}}
            }),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, EngineError::Filter { .. }), "{error}");
        let keyless = db.engine("plugin_crm", EngineConfig::default(), &[]);
        let error = extract(
            &keyless,
            json!({"mappedFields": {"plugin_crm": {"holders": ["name"]}}}),
        )
        .await
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("encrypt secret key not configured"),
            "{error}"
        );
        let error = extract(
            &keyless,
            json!({
                "mappedFields": {"plugin_crm": {"holders": ["status"]}},
                "filters": {"plugin_crm": {"holders": {"status": {"eq": ["active"]}}}}
            }),
        )
        .await
        .unwrap_err();
        assert!(
            error.to_string().contains("hash secret key not configured"),
            "{error}"
        );
        db.drop().await;
    }
}
