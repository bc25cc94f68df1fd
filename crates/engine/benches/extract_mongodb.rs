//! Benchmark: documents of a MongoDB collection into the result plaintext through the engine,
//! beside a bare driver cursor reading the same documents (same projection) from the same
//! server, in one run.
//!
//! The server is the MongoDB test server (secantusdb, the stand-in of docs/TEST-SERVERS.md §1),
//! which is Python: both figures are mostly the server's, so the ratio says what the engine adds
//! on top of the driver, not how fast MongoDB is.
//!
//! Run: `cargo bench -p engine --bench extract_mongodb` (the server from `scripts/services.sh
//! mongodb`, or `TEST_MONGO_URL`; `BENCH_ROWS` overrides the document count, default 100,000).

use std::time::Instant;

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};
use futures_util::TryStreamExt;
use mongodb::bson::{doc, Document, RawDocumentBuf};
use serde_json::json;
use testkit::mongo::MongoDb;

mod common;

use common::RUNS;

const FIELDS: [&str; 5] = ["grp", "id", "name", "nested.score", "when"];

#[tokio::main]
async fn main() {
    let rows = common::bench_rows(100_000);
    let db = MongoDb::create().await;
    let seeded = Instant::now();
    let documents: Vec<Document> = (0..rows as i64)
        .map(|i| {
            doc! {
                "id": i,
                "name": format!("name-{i}"),
                "nested": { "score": i as f64 / 8.0, "skip": "not mapped" },
                "grp": (i % 10) as i32,
                "when": mongodb::bson::DateTime::from_millis(1_700_000_000_000 + i),
                "unmapped": "x".repeat(16),
            }
        })
        .collect();
    for chunk in documents.chunks(10_000) {
        db.insert("big", chunk.to_vec()).await;
    }
    println!(
        "fixture: {rows} documents in {:.1} s",
        seeded.elapsed().as_secs_f64()
    );
    let env = from_env_vars(db.vars("BENCH", "bench", &[])).expect("datasource");
    let engine = Engine::new(EngineConfig::default(), Resolver::new(env, None));
    let message = contract::JobMessage::parse(
        json!({"jobId": uuid::Uuid::new_v4(), "mappedFields": {"bench": {"big": FIELDS}}})
            .to_string()
            .as_bytes(),
    )
    .expect("job");

    let mut bare = Vec::new();
    let mut extracted = Vec::new();
    let mut bytes = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let count = bare_cursor(&db).await;
        bare.push(started.elapsed());
        assert_eq!(count, rows, "the bare cursor read every document");
        let started = Instant::now();
        let extraction = engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .expect("extraction");
        extracted.push(started.elapsed());
        assert_eq!(extraction.row_count, rows);
        bytes = extraction.plaintext.len();
    }
    db.drop().await;
    println!(
        "documents: {rows} x {} mapped paths, secantusdb, {RUNS} runs each",
        FIELDS.len()
    );
    common::report("bare driver cursor", bare, extracted, bytes);
}

/// Reads every document of `big` with the driver alone, with the engine's projection, each
/// kept as the raw BSON the server sent (as the engine reads it, so nothing is decoded twice).
async fn bare_cursor(db: &MongoDb) -> u64 {
    let mut projection = Document::new();
    for field in FIELDS {
        projection.insert(field, 1);
    }
    projection.insert("_id", 0);
    let mut cursor = db
        .db()
        .collection::<RawDocumentBuf>("big")
        .find(doc! {})
        .projection(projection)
        .await
        .expect("find");
    let mut count = 0;
    while let Some(document) = cursor.try_next().await.expect("document") {
        std::hint::black_box(document);
        count += 1;
    }
    count
}
