//! The result document assembled from connection parts, the size budget, and value writers.

use std::sync::Arc;

use chrono::NaiveDate;
use contract::json::{JsonWriter, Style};

use super::*;

/// A document through the engine's path: each connection's value written by `write` through
/// its own [`ConnectionResult`] on its own task, the parts assembled in name order as the
/// engine does. Returns the document and its rows.
pub(super) fn document<T, F, Fut>(
    parts: Vec<(String, T)>,
    budget: &Arc<Budget>,
    write: F,
) -> Result<(Vec<u8>, u64)>
where
    T: Send + 'static,
    F: Fn(ConnectionResult, T) -> Fut,
    Fut: std::future::Future<Output = Result<Part>> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (out, mut chunks) = tokio::sync::mpsc::channel(4);
        let place = SpillPlace {
            dir: std::env::temp_dir(),
            memory_bytes: 64,
        };
        let (assembly, senders) = Assembly::new(parts.len(), out, place);
        let mut tasks = tokio::task::JoinSet::new();
        for (index, ((name, data), sender)) in parts.into_iter().zip(senders).enumerate() {
            let part = ConnectionResult::new(&name, index == 0, budget.clone(), sender)?;
            let written = write(part, data);
            tasks.spawn(async move { (index, written.await.map(|part| part.rows())) });
        }
        let reader = tokio::spawn(async move {
            let mut text = Vec::new();
            while let Some(chunk) = chunks.recv().await {
                text.extend_from_slice(&chunk);
            }
            text
        });
        let (size, rows, _) = assemble::drive(assembly, tasks, budget).await?;
        let text = reader.await.expect("read");
        assert_eq!(size, text.len() as u64, "the size is what was sent");
        Ok((text, rows))
    })
}

/// Tables of ids.
type Ids = Vec<(&'static str, Vec<i64>)>;

async fn write_ids(mut out: ConnectionResult, tables: Ids) -> Result<Part> {
    for (table, ids) in tables {
        out.start_table(table)?;
        for id in ids {
            let w = out.begin_row()?;
            w.key("id").expect("key");
            w.i64(id).expect("value");
            out.end_row().await?;
        }
    }
    out.finish().await
}

#[test]
fn parts_join_into_go_indented_json_and_empty_tables_are_absent() {
    let budget = Arc::new(Budget::new(u64::MAX));
    let parts: Vec<(String, Ids)> = vec![
        ("a<b".into(), vec![("empty", vec![]), ("t", vec![1, 2])]),
        ("z".into(), vec![("none", vec![])]),
    ];
    let (plaintext, rows) = document(parts, &budget, write_ids).expect("document");
    let expected = "{\n  \"a\\u003cb\": {\n    \"t\": [\n      {\n        \"id\": 1\n      },\n      {\n        \"id\": 2\n      }\n    ]\n  },\n  \"z\": {}\n}";
    assert_eq!(String::from_utf8_lossy(&plaintext), expected);
    assert_eq!(rows, 2);
    assert_eq!(
        budget.used(),
        expected.len() as u64,
        "the budget counts every byte"
    );
}

#[test]
fn a_document_of_many_chunks_is_whole_and_in_order() {
    let budget = Arc::new(Budget::new(u64::MAX));
    // Three parts of many chunks each: the second and third spill while the first streams.
    let ids: Vec<i64> = (0..40_000).collect();
    let parts: Vec<(String, Ids)> = ["a", "b", "c"]
        .into_iter()
        .map(|name| (name.to_owned(), vec![("t", ids.clone())]))
        .collect();
    let (plaintext, rows) = document(parts, &budget, write_ids).expect("document");
    assert_eq!(rows, 120_000);
    assert!(
        plaintext.len() > 3 * CHUNK_BYTES * 4,
        "many chunks per part"
    );
    let value: serde_json::Value = serde_json::from_slice(&plaintext).expect("valid JSON");
    for name in ["a", "b", "c"] {
        let table = value[name]["t"].as_array().expect("rows");
        assert_eq!(table.len(), 40_000);
        assert_eq!(table[39_999]["id"], 39_999);
    }
    let keys: Vec<_> = value.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["a", "b", "c"]);
    assert_eq!(budget.used(), plaintext.len() as u64);
}

#[test]
fn the_budget_fails_as_soon_as_a_row_crosses_it() {
    let budget = Arc::new(Budget::new(60));
    let parts: Vec<(String, Ids)> = vec![("pg".into(), vec![("t", (0..100).collect())])];
    let error = document(parts, &budget, write_ids).expect_err("over the budget");
    assert!(
        matches!(error, EngineError::ResultTooLarge { limit: 60 }),
        "{error}"
    );
    assert!(
        budget.used() < 120,
        "a 60-byte budget fails at the second row, not at the end: {} bytes charged",
        budget.used()
    );
}

fn written(write: impl FnOnce(&mut JsonWriter<Vec<u8>>)) -> String {
    let mut w = JsonWriter::new(Vec::new(), Style::Compact);
    write(&mut w);
    String::from_utf8(w.finish().expect("complete")).expect("UTF-8")
}

#[test]
fn timestamps_are_rfc3339_utc_with_trimmed_fractions() {
    let day = NaiveDate::from_ymd_opt(2026, 7, 13).expect("date");
    let cases = [
        (
            day.and_hms_opt(18, 4, 11).expect("t"),
            "\"2026-07-13T18:04:11Z\"",
        ),
        (
            day.and_hms_milli_opt(18, 4, 11, 200).expect("t"),
            "\"2026-07-13T18:04:11.2Z\"",
        ),
        (
            day.and_hms_micro_opt(0, 0, 0, 1).expect("t"),
            "\"2026-07-13T00:00:00.000001Z\"",
        ),
        (
            day.and_hms_nano_opt(9, 5, 7, 123_456_789).expect("t"),
            "\"2026-07-13T09:05:07.123456789Z\"",
        ),
    ];
    for (at, expected) in cases {
        assert_eq!(
            written(|w| write_timestamp(w, at).expect("write")),
            expected
        );
    }
    let early = NaiveDate::from_ymd_opt(1, 1, 1).expect("date");
    assert_eq!(
        written(|w| write_date(w, early).expect("write")),
        "\"0001-01-01\""
    );
}

#[test]
// -3626911.25 spells the exact binary value of a float32 tie (issue 18).
#[allow(clippy::excessive_precision)]
fn floats_json_cannot_hold_become_strings() {
    assert_eq!(written(|w| write_float(w, f64::NAN).expect("w")), "\"NaN\"");
    assert_eq!(
        written(|w| write_float(w, f64::INFINITY).expect("w")),
        "\"Infinity\""
    );
    assert_eq!(
        written(|w| write_float(w, f64::NEG_INFINITY).expect("w")),
        "\"-Infinity\""
    );
    assert_eq!(written(|w| write_float32(w, 0.1).expect("w")), "0.1");
    assert_eq!(
        written(|w| write_float32(w, -3626911.25).expect("w")),
        "-3626911.2"
    );
    assert_eq!(
        written(|w| write_float32(w, f32::NEG_INFINITY).expect("w")),
        "\"-Infinity\""
    );
}

proptest::proptest! {
    #[test]
    fn bytes_are_written_as_the_base64_crates_standard_encoding(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..5000),
    ) {
        use base64::Engine as _;
        let expected = format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        );
        proptest::prop_assert_eq!(written(|w| write_base64(w, &bytes).expect("w")), expected);
    }
}

#[test]
fn bytes_of_every_length_to_4096_are_written_as_the_base64_crates_standard_encoding() {
    use base64::Engine as _;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for len in 0..=4096 {
        let expected = format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(&bytes[..len])
        );
        let text = written(|w| write_base64(w, &bytes[..len]).expect("w"));
        assert_eq!(text, expected, "length {len}");
    }
}

#[test]
fn bytes_are_base64_and_json_text_is_embedded_sorted() {
    assert_eq!(
        written(|w| write_base64(w, &[0, 255, 16]).expect("w")),
        "\"AP8Q\""
    );
    assert_eq!(
        written(|w| write_json_text(w, br#"{"b":1,"a":"<"}"#).expect("w")),
        r#"{"a":"\u003c","b":1}"#
    );
    assert_eq!(
        written(|w| write_json_text(w, b"not json").expect("w")),
        "\"not json\""
    );
}
