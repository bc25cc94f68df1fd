//! SQL Server datasources against a private pysqlbridge per test (the TDS stand-in,
//! docs/TEST-SERVERS.md §2): login, validation before any query, `dbo` in keys, every filter
//! operator with hostile values, and the result's bytes.

mod support;

use engine::{EngineConfig, EngineError};
use serde_json::json;
use support::harness::job;
use support::sqlserver::SqlBridge;

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

fn people() -> serde_json::Value {
    json!([
        {"id": 1, "name": "Ada", "score": 0.5, "big": 9007199254740993i64, "note": "<b>&"},
        {"id": 2, "name": "Bob", "score": 1.25, "big": 1, "note": null},
    ])
}

#[tokio::test]
async fn a_table_is_read_with_its_values_and_dbo_stripped_from_the_key() {
    let server = SqlBridge::start(&[("people", people())]);
    let engine = server.engine("ledger", EngineConfig::default(), &[]);
    let result = extract(
        &engine,
        json!({"mappedFields": {"ledger": {"DBO.people": ["id", "name", "score", "big", "note"]}}}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", server.server_log()));
    assert_eq!(
        result,
        concat!(
            "{\n  \"ledger\": {\n    \"people\": [\n",
            "      {\n        \"big\": 9007199254740993,\n        \"id\": 1,\n",
            "        \"name\": \"Ada\",\n        \"note\": \"\\u003cb\\u003e\\u0026\",\n",
            "        \"score\": 0.5\n      },\n",
            "      {\n        \"big\": 1,\n        \"id\": 2,\n        \"name\": \"Bob\",\n",
            "        \"note\": null,\n        \"score\": 1.25\n      }\n    ]\n  }\n}"
        )
    );
}
