//! A job over a MongoDB collection whose documents hold every common BSON type: the stored
//! result is the golden file `mongodb.json` byte for byte (the MongoDB value-mapping table of
//! `docs/datasources.md`, through the binary: indented, HTML characters escaped, keys sorted at every level).

use mongodb::bson::oid::ObjectId;
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{doc, Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp};
use serde_json::json;
use uuid::Uuid;

use super::golden_job;
use crate::harness::sources::MongoDb;
use crate::harness::World;

/// The fixture: three documents, the first with every type, the others sparse.
fn typed_documents() -> Vec<Document> {
    let uuid = Uuid::parse_str("550e8400-e29b-41d4-a716-446655440000").expect("uuid");
    vec![
        doc! {
            "_id": ObjectId::parse_str("507f1f77bcf86cd799439011").expect("oid"),
            "int32": -7_i32,
            "int64": 9_007_199_254_740_993_i64,
            "double": 0.1,
            "big_double": 1e21,
            "decimal": "12345678901234567890.1234500".parse::<Decimal128>().expect("decimal"),
            "date": DateTime::from_millis(1_705_314_600_123),
            "whole_second": DateTime::from_millis(1_705_314_600_000),
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: uuid.as_bytes().to_vec() },
            "bytes": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 0xff] },
            "embedded": { "zeta": 1, "alpha": { "b": true, "a": Bson::Null } },
            "array": [1, "two", { "y": 2, "x": 1 }, [3.5, Bson::Null]],
            "null": Bson::Null,
            "flag": false,
            "text": "<b>café</b> & \u{2028}",
            "timestamp": Timestamp { time: 1_700_000_000, increment: 5 },
            "regex": Regex { pattern: "^a.c$".into(), options: "i".into() },
            "min": Bson::MinKey,
            "max": Bson::MaxKey,
        },
        doc! {
            "_id": ObjectId::parse_str("507f1f77bcf86cd799439012").expect("oid"),
            "int32": i32::MAX,
            "int64": i64::MIN,
            "double": -2.5,
            "decimal": "-0.00".parse::<Decimal128>().expect("decimal"),
            "date": DateTime::from_millis(-1),
            "embedded": {},
            "array": [],
            "text": "",
        },
        doc! {
            "_id": ObjectId::parse_str("507f1f77bcf86cd799439013").expect("oid"),
            "text": "only text",
        },
    ]
}

/// The fields the job asks for: all of the first document's.
const FIELDS: [&str; 19] = [
    "_id",
    "int32",
    "int64",
    "double",
    "big_double",
    "decimal",
    "date",
    "whole_second",
    "uuid",
    "bytes",
    "embedded",
    "array",
    "null",
    "flag",
    "text",
    "timestamp",
    "regex",
    "min",
    "max",
];

#[tokio::test]
async fn a_mongodb_collection_of_every_bson_type_matches_its_golden_file() {
    let world = World::new().await;
    let mongo = MongoDb::create().await;
    mongo.insert("typed", typed_documents()).await;
    let worker = golden_job(
        &world,
        &[("docs", &mongo)],
        Vec::new(),
        (json!({"docs": {"typed": FIELDS}}), json!(null)),
        "mongodb.json",
    )
    .await;
    drop(worker);
    mongo.drop().await;
    world.cleanup().await;
}
