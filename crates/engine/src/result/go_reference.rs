//! The result document against Go itself: random connections, tables and rows written through
//! the engine's own path (`ConnectionResult`, the value writers the datasources call, `join`)
//! must be byte for byte what Go's `json.MarshalIndent(v, "", "  ")` writes for the same
//! `map[string]map[string][]map[string]interface{}` holding float32, float64, int64, uint64,
//! strings (any bytes), `[]byte`, `time.Time`, decoded JSON columns, booleans and nil.
//!
//! Go 1.19's `\u0008`/`\u000c` are normalised to `\b`/`\f` (what Go 1.22+ and the Worker write);
//! nothing else is. Go is built by the contract crate's harness (`tests/go_reference/`).

#[path = "../../../contract/tests/go_reference/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::DateTime;
use serde_json::{json, Value};

use super::*;
use harness::{normalise_go_119, Answer, Rng};

/// One value of a row: how Go is told about it, and how the engine writes it.
#[derive(Clone)]
enum Leaf {
    F32(f32),
    F64(f64),
    I64(i64),
    U64(u64),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
    Time(i64, u32),
    Json(String),
    Bool(bool),
    Null,
}

impl Leaf {
    // -3626911.25 spells the exact binary value of a float32 tie (issue 18).
    #[allow(clippy::excessive_precision)]
    fn random(rng: &mut Rng) -> Leaf {
        let finite32 = |bits: u64| {
            let f = f32::from_bits(bits as u32);
            if f.is_finite() {
                f
            } else {
                -3_626_911.25
            }
        };
        let finite64 = |bits: u64| {
            let f = f64::from_bits(bits);
            if f.is_finite() {
                f
            } else {
                0.1
            }
        };
        let text = |rng: &mut Rng| {
            let pieces: [&[u8]; 12] = [
                b"a",
                b"<&>",
                b"\"\\",
                b"\x08\x0c\n\x01",
                "é😀".as_bytes(),
                b"\xe2\x80\xa8",
                b"\xff",
                b"\xed\xa0\x80",
                b"\xe2\x80",
                b"/",
                b"\x7f",
                b" ",
            ];
            (0..rng.below(6))
                .flat_map(|_| pieces[rng.below(12) as usize].to_vec())
                .collect::<Vec<u8>>()
        };
        match rng.below(10) {
            0 => Leaf::F32(finite32(rng.next_u64())),
            1 => Leaf::F64(finite64(rng.next_u64())),
            2 => Leaf::I64(rng.next_u64() as i64 >> rng.below(64)),
            3 => Leaf::U64(rng.next_u64() >> rng.below(64)),
            4 => Leaf::Str(text(rng)),
            5 => Leaf::Bytes(text(rng)),
            6 => Leaf::Time(
                rng.below(253_402_300_800) as i64 - 62_135_596_800,
                [0, 500_000_000, 123_456_000, rng.below(1_000_000_000) as u32]
                    [rng.below(4) as usize],
            ),
            7 => Leaf::Json(
                [
                    r#"{"b": [1, 2.5, -0, 1e-7, "x<y"], "a": {"z": null, "é": true}}"#,
                    r#"[1e21, 0.1, "\u2028", {}, []]"#,
                    r#""\ud83d\ude00 & \u0001""#,
                    "-12345.678e-3",
                ][rng.below(4) as usize]
                    .to_owned(),
            ),
            8 => Leaf::Bool(rng.below(2) == 0),
            _ => Leaf::Null,
        }
    }

    /// The `[KIND, ARG...]` list main.go reads.
    fn spec(&self) -> Value {
        match self {
            Leaf::F32(f) => json!(["f32", format!("{:x}", f.to_bits())]),
            Leaf::F64(f) => json!(["f64", format!("{:x}", f.to_bits())]),
            Leaf::I64(i) => json!(["i64", i.to_string()]),
            Leaf::U64(u) => json!(["u64", u.to_string()]),
            Leaf::Str(bytes) => json!(["str", harness::hex(bytes)]),
            Leaf::Bytes(bytes) => json!(["bytes", harness::hex(bytes)]),
            Leaf::Time(secs, nanos) => json!(["time", secs.to_string(), nanos.to_string()]),
            Leaf::Json(text) => json!(["json", harness::hex(text.as_bytes())]),
            Leaf::Bool(b) => json!(["bool", b.to_string()]),
            Leaf::Null => json!(["null"]),
        }
    }

    /// Writes the value as the datasources do.
    fn write(&self, w: &mut JsonWriter<Vec<u8>>) -> std::result::Result<(), JsonError> {
        match self {
            Leaf::F32(f) => write_float32(w, *f),
            Leaf::F64(f) => write_float(w, *f),
            Leaf::I64(i) => w.i64(*i),
            Leaf::U64(u) => w.u64(*u),
            Leaf::Str(bytes) => w.string_bytes(bytes),
            Leaf::Bytes(bytes) => write_base64(w, bytes),
            Leaf::Time(secs, nanos) => {
                let at = DateTime::from_timestamp(*secs, *nanos).expect("in range");
                write_timestamp(w, at.naive_utc())
            }
            Leaf::Json(text) => write_json_text(w, text.as_bytes()),
            Leaf::Bool(b) => w.bool(*b),
            Leaf::Null => w.null(),
        }
    }
}

type Row = BTreeMap<String, Leaf>;
type Document = BTreeMap<String, BTreeMap<String, Vec<Row>>>;

fn random_document(rng: &mut Rng) -> Document {
    let names = [
        "ledger",
        "crm",
        "<x>",
        "é",
        "a&b",
        "Z",
        "_",
        "with space",
        "2",
    ];
    let pick = |rng: &mut Rng| names[rng.below(names.len() as u64) as usize].to_owned();
    let mut doc = Document::new();
    for _ in 0..1 + rng.below(3) {
        let mut tables = BTreeMap::new();
        for _ in 0..rng.below(4) {
            let rows = (0..1 + rng.below(4))
                .map(|_| {
                    (0..rng.below(7))
                        .map(|_| (pick(rng), Leaf::random(rng)))
                        .collect()
                })
                .collect();
            tables.insert(pick(rng), rows);
        }
        doc.insert(pick(rng), tables);
    }
    doc
}

/// The document through the engine's result path.
fn engine_bytes(doc: &Document) -> Vec<u8> {
    let budget = Arc::new(Budget::new(u64::MAX));
    let parts: Vec<_> = doc
        .iter()
        .map(|(connection, tables)| (connection.clone(), tables.clone()))
        .collect();
    let (plaintext, _) = super::tests::document(parts, &budget, |mut out, tables| async move {
        // A table without rows is absent from the document, in Go as here.
        out.start_table("empty table")?;
        for (table, rows) in tables {
            out.start_table(&table)?;
            for row in rows {
                let w = out.begin_row()?;
                for (column, leaf) in row {
                    w.key(&column).expect("key");
                    leaf.write(w).expect("value");
                }
                out.end_row().await?;
            }
        }
        out.finish().await
    })
    .expect("document");
    plaintext
}

fn go_spec(doc: &Document) -> Value {
    let spec: BTreeMap<_, BTreeMap<_, Vec<BTreeMap<_, Value>>>> = doc
        .iter()
        .map(|(connection, tables)| {
            let tables = tables
                .iter()
                .map(|(table, rows)| {
                    let rows = rows
                        .iter()
                        .map(|row| {
                            row.iter()
                                .map(|(k, leaf)| (k.clone(), leaf.spec()))
                                .collect()
                        })
                        .collect();
                    (table.clone(), rows)
                })
                .collect();
            (connection.clone(), tables)
        })
        .collect();
    json!(spec)
}

#[test]
fn result_documents_match_go_marshal_indent() {
    let mut rng = Rng::from_env();
    let docs: Vec<Document> = (0..300).map(|_| random_document(&mut rng)).collect();
    let requests: Vec<String> = docs
        .iter()
        .map(|doc| {
            format!(
                "result {}",
                harness::hex(go_spec(doc).to_string().as_bytes())
            )
        })
        .collect();
    let answers = harness::encode(&requests);
    for (doc, answer) in docs.iter().zip(answers) {
        let ours = engine_bytes(doc);
        match answer {
            Answer::Json { indented, .. } => {
                let go = normalise_go_119(indented);
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&go),
                    "the result document differs from Go's MarshalIndent"
                );
                assert_eq!(ours, go);
            }
            Answer::Refused(e) => panic!("Go refused a document: {e}"),
        }
    }
}
