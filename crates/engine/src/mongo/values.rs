//! BSON values written as result JSON: the MongoDB column of the value-mapping table
//! (`docs/datasources.md`).
//!
//! Every value is written straight from the server's raw BSON, without an intermediate document.
//! Embedded documents are written with their keys sorted (as Go's `encoding/json` writes the
//! maps upstream decodes them into), and a key given twice keeps its last value.

use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{RawBsonRef, RawDocument};
use uuid::Uuid;

use crate::result;

type W = contract::json::JsonWriter<Vec<u8>>;

/// Writes one BSON value; an error names what could not be written.
pub(crate) fn write_bson(w: &mut W, value: RawBsonRef<'_>) -> Result<(), String> {
    let json = |e: contract::json::JsonError| e.to_string();
    match value {
        RawBsonRef::Double(v) => result::write_float(w, v).map_err(json),
        RawBsonRef::String(v) | RawBsonRef::Symbol(v) | RawBsonRef::JavaScriptCode(v) => {
            w.string(v).map_err(json)
        }
        RawBsonRef::Array(array) => {
            w.begin_array().map_err(json)?;
            for element in array {
                write_bson(w, element.map_err(|e| e.to_string())?)?;
            }
            w.end_array().map_err(json)
        }
        RawBsonRef::Document(document) => write_document(w, document),
        RawBsonRef::Boolean(v) => w.bool(v).map_err(json),
        RawBsonRef::Null => w.null().map_err(json),
        RawBsonRef::Undefined | RawBsonRef::MinKey | RawBsonRef::MaxKey => empty_object(w),
        RawBsonRef::RegularExpression(regex) => {
            // Go's struct order: `Pattern`, then `Options`.
            w.begin_object().map_err(json)?;
            w.key("Pattern").map_err(json)?;
            w.string(regex.pattern).map_err(json)?;
            w.key("Options").map_err(json)?;
            w.string(regex.options).map_err(json)?;
            w.end_object().map_err(json)
        }
        RawBsonRef::JavaScriptCodeWithScope(code) => {
            w.begin_object().map_err(json)?;
            w.key("Code").map_err(json)?;
            w.string(code.code).map_err(json)?;
            w.key("Scope").map_err(json)?;
            write_document(w, code.scope)?;
            w.end_object().map_err(json)
        }
        RawBsonRef::Int32(v) => w.i64(i64::from(v)).map_err(json),
        RawBsonRef::Int64(v) => w.i64(v).map_err(json),
        RawBsonRef::Timestamp(ts) => {
            // Go's struct order: `T` (seconds), then `I` (increment).
            w.begin_object().map_err(json)?;
            w.key("T").map_err(json)?;
            w.u64(u64::from(ts.time)).map_err(json)?;
            w.key("I").map_err(json)?;
            w.u64(u64::from(ts.increment)).map_err(json)?;
            w.end_object().map_err(json)
        }
        RawBsonRef::Binary(binary) => match binary.subtype {
            BinarySubtype::Uuid | BinarySubtype::UuidOld if binary.bytes.len() == 16 => {
                let mut bytes = [0u8; 16];
                bytes.copy_from_slice(binary.bytes);
                w.string(
                    Uuid::from_bytes(bytes)
                        .hyphenated()
                        .encode_lower(&mut Uuid::encode_buffer()),
                )
                .map_err(json)
            }
            _ => result::write_base64(w, binary.bytes).map_err(json),
        },
        RawBsonRef::ObjectId(id) => w.string(&id.to_hex()).map_err(json),
        RawBsonRef::DateTime(at) => {
            let millis = at.timestamp_millis();
            let at = chrono::DateTime::from_timestamp_millis(millis)
                .ok_or_else(|| format!("the date {millis} ms from 1970 is out of range"))?;
            result::write_timestamp(w, at.naive_utc()).map_err(json)
        }
        RawBsonRef::Decimal128(v) => w.string(&v.to_string()).map_err(json),
        RawBsonRef::DbPointer(_) => {
            Err("a DBPointer value (deprecated since MongoDB 1.x) cannot be written".to_owned())
        }
    }
}

/// Writes a document as an object: keys sorted by their bytes, the last of a repeated key
/// winning.
pub(crate) fn write_document(w: &mut W, document: &RawDocument) -> Result<(), String> {
    w.begin_object().map_err(|e| e.to_string())?;
    write_members(w, document)?;
    w.end_object().map_err(|e| e.to_string())
}

/// Writes a document's members into the object `w` has open, as [`write_document`] does.
pub(crate) fn write_members(w: &mut W, document: &RawDocument) -> Result<(), String> {
    let mut members: Vec<(&str, RawBsonRef<'_>)> = Vec::new();
    for member in document {
        members.push(member.map_err(|e| e.to_string())?);
    }
    // Stable: of equal keys, the last stays last, and is the one kept.
    members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (i, (key, value)) in members.iter().enumerate() {
        if members.get(i + 1).is_some_and(|next| next.0 == *key) {
            continue;
        }
        w.key(key).map_err(|e| e.to_string())?;
        write_bson(w, *value)?;
    }
    Ok(())
}

fn empty_object(w: &mut W) -> Result<(), String> {
    w.begin_object().map_err(|e| e.to_string())?;
    w.end_object().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::json::Style;
    use mongodb::bson::oid::ObjectId;
    use mongodb::bson::{doc, Binary, Bson, Decimal128, Regex, Timestamp};

    fn try_json_of(value: Bson) -> Result<String, String> {
        let document =
            mongodb::bson::RawDocumentBuf::from_document(&doc! { "v": value }).expect("raw");
        let mut w = contract::json::JsonWriter::new(Vec::new(), Style::Compact);
        write_bson(&mut w, document.get("v").unwrap().unwrap())?;
        Ok(String::from_utf8(w.finish().unwrap()).unwrap())
    }

    fn json_of(value: Bson) -> String {
        try_json_of(value).expect("written")
    }

    fn decimal(text: &str) -> Bson {
        Bson::Decimal128(text.parse::<Decimal128>().expect("decimal"))
    }

    #[test]
    fn numbers_keep_their_exact_values() {
        assert_eq!(json_of(Bson::Int32(-7)), "-7");
        assert_eq!(
            json_of(Bson::Int64(9_007_199_254_740_993)),
            "9007199254740993"
        );
        assert_eq!(json_of(Bson::Double(0.1)), "0.1");
        assert_eq!(json_of(Bson::Double(1e21)), "1e+21");
        assert_eq!(json_of(Bson::Double(f64::NAN)), "\"NaN\"");
        assert_eq!(json_of(Bson::Double(f64::NEG_INFINITY)), "\"-Infinity\"");
    }

    #[test]
    fn decimals_are_exact_strings_with_their_scale() {
        for (stored, written) in [
            ("123.45", "123.45"),
            ("123.4500", "123.4500"),
            ("1E3", "1E+3"),
            ("0.001", "0.001"),
            ("0.0000001", "1E-7"),
            ("-0", "-0"),
            (
                "1234567890123456789012345678901234",
                "1234567890123456789012345678901234",
            ),
            ("NaN", "NaN"),
        ] {
            assert_eq!(
                json_of(decimal(stored)),
                format!("\"{written}\""),
                "{stored}"
            );
        }
    }

    #[test]
    fn identifiers_binaries_and_dates_are_strings() {
        let id = ObjectId::parse_str("507f1f77bcf86cd799439011").unwrap();
        assert_eq!(json_of(Bson::ObjectId(id)), "\"507f1f77bcf86cd799439011\"");
        let uuid = Uuid::parse_str("550e8400-e29b-41d4-a716-446655440000").unwrap();
        for subtype in [BinarySubtype::Uuid, BinarySubtype::UuidOld] {
            let binary = Binary {
                subtype,
                bytes: uuid.as_bytes().to_vec(),
            };
            assert_eq!(
                json_of(Bson::Binary(binary)),
                "\"550e8400-e29b-41d4-a716-446655440000\""
            );
        }
        // Sixteen bytes of another subtype are bytes, not a UUID.
        let generic = Binary {
            subtype: BinarySubtype::Generic,
            bytes: uuid.as_bytes().to_vec(),
        };
        assert_eq!(
            json_of(Bson::Binary(generic)),
            "\"VQ6EAOKbQdSnFkRmVUQAAA==\""
        );
        let short = Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 2, 0xff],
        };
        assert_eq!(json_of(Bson::Binary(short)), "\"AQL/\"");
        let at = |ms| Bson::DateTime(mongodb::bson::DateTime::from_millis(ms));
        assert_eq!(
            json_of(at(1_705_314_600_123)),
            "\"2024-01-15T10:30:00.123Z\""
        );
        assert_eq!(json_of(at(1_705_314_600_000)), "\"2024-01-15T10:30:00Z\"");
        assert_eq!(json_of(at(-1)), "\"1969-12-31T23:59:59.999Z\"");
        let error = try_json_of(at(i64::MAX)).unwrap_err();
        assert!(error.contains("out of range"), "{error}");
    }

    #[test]
    fn documents_are_written_with_sorted_keys_and_the_last_of_a_repeated_key() {
        let nested = doc! { "zeta": 1, "alpha": { "b": 2, "a": [3, { "y": true, "x": null }] } };
        assert_eq!(
            json_of(Bson::Document(nested)),
            r#"{"alpha":{"a":[3,{"x":null,"y":true}],"b":2},"zeta":1}"#
        );
        assert_eq!(json_of(Bson::Document(doc! {})), "{}");
        assert_eq!(json_of(Bson::Array(vec![])), "[]");
        // A document with a repeated key, as a server may hold one.
        let mut raw = mongodb::bson::RawDocumentBuf::new();
        raw.append("k", 1);
        raw.append("a", 0);
        raw.append("k", 2);
        let mut w = contract::json::JsonWriter::new(Vec::new(), Style::Compact);
        write_document(&mut w, &raw).unwrap();
        assert_eq!(
            String::from_utf8(w.finish().unwrap()).unwrap(),
            r#"{"a":0,"k":2}"#
        );
    }

    #[test]
    fn special_values_are_written_as_go_writes_their_structs() {
        let ts = Timestamp {
            time: 1_700_000_000,
            increment: 5,
        };
        assert_eq!(json_of(Bson::Timestamp(ts)), r#"{"T":1700000000,"I":5}"#);
        let regex = Regex {
            pattern: "^a.c$".to_owned(),
            options: "im".to_owned(),
        };
        assert_eq!(
            json_of(Bson::RegularExpression(regex)),
            r#"{"Pattern":"^a.c$","Options":"im"}"#
        );
        assert_eq!(json_of(Bson::MinKey), "{}");
        assert_eq!(json_of(Bson::MaxKey), "{}");
        assert_eq!(json_of(Bson::Undefined), "{}");
        assert_eq!(json_of(Bson::Null), "null");
        assert_eq!(json_of(Bson::Boolean(true)), "true");
        assert_eq!(json_of(Bson::Symbol("s".into())), "\"s\"");
        assert_eq!(
            json_of(Bson::String("<&>".into())),
            r#""\u003c\u0026\u003e""#
        );
    }
}
