//! Every SQL Server type of docs/datasources.md's value mapping table, from tiberius' own values.

use std::borrow::Cow;

use chrono::NaiveDate;
use contract::json::{JsonWriter, Style};
use tiberius::numeric::Numeric;
use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};
use tiberius::xml::XmlData;
use tiberius::{ColumnData, Uuid};

use super::*;

fn json(data: ColumnData<'_>) -> String {
    let mut w = JsonWriter::new(Vec::new(), Style::Compact);
    write_value(&mut w, &data).unwrap();
    String::from_utf8(w.finish().unwrap()).unwrap()
}

fn days_since(base: (i32, u32, u32), day: (i32, u32, u32)) -> i64 {
    let base = NaiveDate::from_ymd_opt(base.0, base.1, base.2).unwrap();
    let day = NaiveDate::from_ymd_opt(day.0, day.1, day.2).unwrap();
    (day - base).num_days()
}

/// 2024-07-05 as tiberius' `date` (days since 0001-01-01).
fn july_5th() -> Date {
    Date::new(days_since((1, 1, 1), (2024, 7, 5)) as u32)
}

/// `h:m:s` plus `fraction` increments, at scale 7 (100 ns).
fn time7(h: u64, m: u64, s: u64, fraction: u64) -> Time {
    Time::new((h * 3600 + m * 60 + s) * 10_000_000 + fraction, 7)
}

#[test]
fn integers_of_every_width_are_numbers() {
    assert_eq!(json(ColumnData::U8(Some(255))), "255");
    assert_eq!(json(ColumnData::I16(Some(-32768))), "-32768");
    assert_eq!(json(ColumnData::I32(Some(i32::MIN))), "-2147483648");
    assert_eq!(
        json(ColumnData::I64(Some(9_007_199_254_740_993))),
        "9007199254740993"
    );
}

#[test]
fn decimals_numerics_and_money_are_exact_strings() {
    let n = |value, scale| {
        json(ColumnData::Numeric(Some(Numeric::new_with_scale(
            value, scale,
        ))))
    };
    assert_eq!(n(150_000, 2), r#""1500.00""#);
    assert_eq!(n(-50, 2), r#""-0.50""#);
    assert_eq!(n(-150, 2), r#""-1.50""#);
    assert_eq!(n(123_400, 4), r#""12.3400""#);
    assert_eq!(n(7, 0), r#""7""#);
    assert_eq!(n(-7, 0), r#""-7""#);
    assert_eq!(n(5, 3), r#""0.005""#);
    let max = 10i128.pow(38) - 1;
    assert_eq!(n(max, 0), format!("\"{max}\""));
    assert_eq!(n(-max, 37), r#""-9.9999999999999999999999999999999999999""#);
    // tiberius' own Display is not the decimal: this is why the text is built by hand.
    assert_ne!(
        Numeric::new_with_scale(-50, 2).to_string(),
        numeric_text(Numeric::new_with_scale(-50, 2))
    );
    assert_eq!(json(ColumnData::Numeric(None)), "null");
}

#[test]
fn floats_and_reals_are_numbers_as_go_writes_them() {
    assert_eq!(json(ColumnData::F64(Some(0.1))), "0.1");
    assert_eq!(json(ColumnData::F64(Some(1e21))), "1e+21");
    assert_eq!(json(ColumnData::F32(Some(0.1))), "0.1");
    assert_eq!(json(ColumnData::F64(Some(f64::NAN))), r#""NaN""#);
}

#[test]
fn bits_are_booleans() {
    assert_eq!(json(ColumnData::Bit(Some(true))), "true");
    assert_eq!(json(ColumnData::Bit(Some(false))), "false");
}

#[test]
fn text_types_are_strings_padding_kept() {
    assert_eq!(
        json(ColumnData::String(Some(Cow::Borrowed("ab  ")))),
        r#""ab  ""#
    );
    assert_eq!(
        json(ColumnData::String(Some(Cow::Borrowed("ação \"q\"")))),
        r#""ação \"q\"""#
    );
    assert_eq!(json(ColumnData::String(None)), "null");
}

#[test]
fn binaries_are_base64() {
    assert_eq!(
        json(ColumnData::Binary(Some(Cow::Borrowed(&[1, 2, 3])))),
        r#""AQID""#
    );
    assert_eq!(json(ColumnData::Binary(Some(Cow::Borrowed(&[])))), r#""""#);
}

#[test]
fn uniqueidentifiers_are_canonical_lowercase_strings() {
    let id = Uuid::parse_str("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
    assert_eq!(
        json(ColumnData::Guid(Some(id))),
        r#""6f9619ff-8b86-d011-b42d-00c04fc964ff""#
    );
}

#[test]
fn xml_is_a_string_with_go_html_escapes() {
    let xml = XmlData::new("<a b=\"1\">x</a>");
    assert_eq!(
        json(ColumnData::Xml(Some(Cow::Owned(xml)))),
        r#""\u003ca b=\"1\"\u003ex\u003c/a\u003e""#
    );
}

#[test]
fn dates_are_midnight_utc() {
    assert_eq!(
        json(ColumnData::Date(Some(july_5th()))),
        r#""2024-07-05T00:00:00Z""#
    );
    assert_eq!(
        json(ColumnData::Date(Some(Date::new(0)))),
        r#""0001-01-01T00:00:00Z""#
    );
}

#[test]
fn datetimes_round_ticks_to_milliseconds_as_go_does() {
    let days = days_since((1900, 1, 1), (2024, 7, 5)) as i32;
    let at = |ticks| json(ColumnData::DateTime(Some(DateTime::new(days, ticks))));
    let nine = 9 * 3600 * 300;
    assert_eq!(at(nine), r#""2024-07-05T09:00:00Z""#);
    assert_eq!(at(nine + 299), r#""2024-07-05T09:00:00.997Z""#);
    assert_eq!(at(nine + 1), r#""2024-07-05T09:00:00.003Z""#);
    assert_eq!(at(nine + 2), r#""2024-07-05T09:00:00.007Z""#);
    assert_eq!(at(nine + 150), r#""2024-07-05T09:00:00.5Z""#);
    let before_1900 = json(ColumnData::DateTime(Some(DateTime::new(-1, 0))));
    assert_eq!(before_1900, r#""1899-12-31T00:00:00Z""#);
    let small = SmallDateTime::new(days as u16, 9 * 60 + 1);
    assert_eq!(
        json(ColumnData::SmallDateTime(Some(small))),
        r#""2024-07-05T09:01:00Z""#
    );
}

#[test]
fn datetime2_keeps_100_nanoseconds_trimmed() {
    let at = DateTime2::new(july_5th(), time7(9, 0, 0, 1_234_567));
    assert_eq!(
        json(ColumnData::DateTime2(Some(at))),
        r#""2024-07-05T09:00:00.1234567Z""#
    );
    let scale0 = DateTime2::new(july_5th(), Time::new(9 * 3600, 0));
    assert_eq!(
        json(ColumnData::DateTime2(Some(scale0))),
        r#""2024-07-05T09:00:00Z""#
    );
}

#[test]
fn datetimeoffsets_keep_their_offset() {
    let utc = DateTime2::new(july_5th(), time7(9, 0, 0, 0));
    let at = |offset| {
        json(ColumnData::DateTimeOffset(Some(DateTimeOffset::new(
            utc, offset,
        ))))
    };
    assert_eq!(at(120), r#""2024-07-05T11:00:00+02:00""#);
    assert_eq!(at(-330), r#""2024-07-05T03:30:00-05:30""#);
    assert_eq!(at(0), r#""2024-07-05T09:00:00Z""#);
}

#[test]
fn times_are_on_day_one() {
    assert_eq!(
        json(ColumnData::Time(Some(time7(13, 45, 30, 1_000_000)))),
        r#""0001-01-01T13:45:30.1Z""#
    );
    assert_eq!(
        json(ColumnData::Time(Some(Time::new(13 * 3600 * 1000 + 5, 3)))),
        r#""0001-01-01T13:00:00.005Z""#
    );
}

#[test]
fn nulls_of_every_type_are_null() {
    for data in [
        ColumnData::I32(None),
        ColumnData::Bit(None),
        ColumnData::Guid(None),
        ColumnData::Binary(None),
        ColumnData::Xml(None),
        ColumnData::DateTime(None),
        ColumnData::DateTimeOffset(None),
        ColumnData::Time(None),
    ] {
        assert_eq!(json(data), "null");
    }
}
