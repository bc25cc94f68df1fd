//! The result document assembled from connection parts, the size budget, and value writers.

use std::sync::Arc;

use chrono::NaiveDate;
use contract::json::{JsonWriter, Style};

use super::*;

fn part(name: &str, first: bool, budget: &Arc<Budget>, tables: &[(&str, &[i64])]) -> Part {
    let mut out = ConnectionResult::new(name, first, budget.clone()).expect("new");
    for (table, ids) in tables {
        out.start_table(table).expect("table");
        for id in *ids {
            let w = out.begin_row().expect("row");
            w.key("id").expect("key");
            w.i64(*id).expect("value");
            out.end_row().expect("end row");
        }
    }
    out.finish().expect("finish")
}

#[test]
fn parts_join_into_go_indented_json_and_empty_tables_are_absent() {
    let budget = Arc::new(Budget::new(u64::MAX));
    let a = part("a<b", true, &budget, &[("empty", &[]), ("t", &[1, 2])]);
    let b = part("z", false, &budget, &[("none", &[])]);
    let extraction = join(vec![a, b], &budget).expect("join");
    let expected = "{\n  \"a\\u003cb\": {\n    \"t\": [\n      {\n        \"id\": 1\n      },\n      {\n        \"id\": 2\n      }\n    ]\n  },\n  \"z\": {}\n}";
    assert_eq!(String::from_utf8_lossy(&extraction.plaintext), expected);
    assert_eq!(extraction.row_count, 2);
    assert_eq!(
        budget.used(),
        expected.len() as u64,
        "the budget counts every byte"
    );
}

#[test]
fn the_budget_fails_as_soon_as_a_row_crosses_it() {
    let budget = Arc::new(Budget::new(60));
    let mut out = ConnectionResult::new("pg", true, budget.clone()).expect("new");
    out.start_table("t").expect("table");
    let mut failed_at = None;
    for id in 0..100 {
        let w = out.begin_row().expect("row");
        w.key("id").expect("key");
        w.i64(id).expect("value");
        if out.end_row().is_err() {
            failed_at = Some(id);
            break;
        }
    }
    assert_eq!(
        failed_at,
        Some(1),
        "a 60-byte budget holds the opening and one row"
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
