//! Every PostgreSQL column type, with edge values, into the result JSON (the value mapping of
//! `docs/datasources.md`), against the real server.

mod support;

use serde_json::json;
use support::harness::{engine_for, job};
use support::TestDb;

const FIXTURE: &str = r#"
CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE DOMAIN positive_int AS integer CHECK (VALUE > 0);
CREATE TABLE everything (
    id integer PRIMARY KEY,
    i2 smallint, i4 integer, i8 bigint, dom positive_int, oid_col oid,
    dec numeric(40,20), big_dec numeric,
    f4 real, f8 double precision,
    flag boolean,
    txt text, vc varchar(10), ch char(3),
    raw bytea,
    day date, clock time, clock_tz timetz,
    ts timestamp, tstz timestamptz, span interval,
    uid uuid, doc json, docb jsonb,
    ints integer[], texts text[], decs numeric[], floats float8[], reals real[], flags boolean[],
    feeling mood, addr inet, net cidr, mac macaddr, bits bit(4), vbits varbit
);
INSERT INTO everything VALUES (
    1,
    -32768, 2147483647, -9223372036854775808, 7, 42,
    '12345678901234567890.12345678901234567890', '-0.000000000000000000000000000001',
    0.1, 'NaN',
    true,
    '<a href="x">&amp;</a> café 日本 😀 "q" \ tab	end', '', 'ab',
    '\x00ff10',
    '2024-02-29', '13:45:30.123456', '13:45:30+02',
    '2024-01-02 03:04:05.5', '2024-01-02 03:04:05+02', '1 year 2 months 3 days 04:05:06',
    'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"b": 1, "a": [1, 2.5, "x<y"]}', '{"z": null, "y": {"k": true}}',
    '{1,NULL,3}', '{"a","b,c",NULL}', '{1.10,2}', '{1.5,Infinity}', '{0.1,-3626911.25,NULL,-Infinity}',
    '{true,false}',
    'happy', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', B'1010', B'101'
);
INSERT INTO everything (id, f4, f8, day, ts, tstz) VALUES
    (2, 'Infinity', '-Infinity', 'infinity', '-infinity', 'infinity'),
    (3, -3626911.25, 1e21, '0001-01-01', '1999-12-31 23:59:59.999999', '1970-01-01 00:00:00+00');
"#;

#[tokio::test]
async fn every_column_type_maps_to_its_documented_json() {
    let db = TestDb::create().await;
    sqlx::raw_sql(FIXTURE)
        .execute(&db.pool)
        .await
        .expect("fixture");
    let columns = [
        "addr", "big_dec", "bits", "ch", "clock", "clock_tz", "day", "dec", "decs", "doc", "docb",
        "dom", "f4", "f8", "feeling", "flag", "flags", "floats", "i2", "i4", "i8", "id", "ints",
        "mac", "net", "oid_col", "raw", "reals", "span", "texts", "ts", "tstz", "txt", "uid",
        "vbits", "vc",
    ];
    let message = job(json!({"mappedFields": {"pg": {"everything": columns.to_vec()}}}));
    let engine = engine_for(&[("pg", &db)], Default::default());
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("extraction");

    let row1 = json!({
        "addr": "192.168.0.1/24",
        "big_dec": "-0.000000000000000000000000000001",
        "bits": "1010",
        "ch": "ab",
        "clock": "13:45:30.123456",
        "clock_tz": "13:45:30+02",
        "day": "2024-02-29",
        "dec": "12345678901234567890.12345678901234567890",
        "decs": ["1.10", "2"],
        "doc": {"a": [1, 2.5, "x<y"], "b": 1},
        "docb": {"y": {"k": true}, "z": null},
        "dom": 7,
        "f4": 0.1,
        "f8": "NaN",
        "feeling": "happy",
        "flag": true,
        "flags": [true, false],
        "floats": [1.5, "Infinity"],
        "i2": -32768,
        "i4": 2147483647,
        "i8": -9223372036854775808i64,
        "id": 1,
        "ints": [1, null, 3],
        "mac": "08:00:2b:01:02:03",
        "net": "10.0.0.0/8",
        "oid_col": 42,
        "raw": "AP8Q",
        // Single precision as Go writes a float32: its own shortest digits, ties as Go breaks
        // them (-3626911.25 is exact; Go writes .2, not .3).
        "reals": [0.1, -3626911.2, null, "-Infinity"],
        "span": "P1Y2M3DT4H5M6S",
        "texts": ["a", "b,c", null],
        "ts": "2024-01-02T03:04:05.5Z",
        "tstz": "2024-01-02T01:04:05Z",
        "txt": "<a href=\"x\">&amp;</a> café 日本 😀 \"q\" \\ tab\tend",
        "uid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "vbits": "101",
        "vc": "",
    });
    let mut null_row = serde_json::Map::new();
    for column in columns {
        null_row.insert(column.to_owned(), serde_json::Value::Null);
    }
    let mut row2 = null_row.clone();
    row2.insert("id".into(), json!(2));
    row2.insert("f4".into(), json!("Infinity"));
    row2.insert("f8".into(), json!("-Infinity"));
    row2.insert("day".into(), json!("infinity"));
    row2.insert("ts".into(), json!("-infinity"));
    row2.insert("tstz".into(), json!("infinity"));
    let mut row3 = null_row;
    row3.insert("id".into(), json!(3));
    row3.insert("f4".into(), json!(-3626911.2));
    row3.insert("f8".into(), json!(1e21));
    row3.insert("day".into(), json!("0001-01-01"));
    row3.insert("ts".into(), json!("1999-12-31T23:59:59.999999Z"));
    row3.insert("tstz".into(), json!("1970-01-01T00:00:00Z"));

    let expected = json!({"pg": {"everything": [row1, row2, row3]}});
    let expected_text = contract::json::to_vec_indented(&expected).expect("expected JSON");
    let actual = String::from_utf8(extraction.plaintext.clone()).expect("UTF-8");
    assert_eq!(actual, String::from_utf8(expected_text).expect("UTF-8"));
    assert_eq!(extraction.row_count, 3);
    assert_eq!(extraction.size_bytes(), actual.len() as u64);
    // The Go escapes are in the bytes, not just equal after parsing.
    assert!(actual.contains(r#"\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e"#));
    assert!(actual.contains(r#""i8": -9223372036854775808"#));
    assert!(actual.contains(r#""f8": 1e+21"#));
    assert!(actual.contains(r#""f4": -3626911.2,"#));
    db.drop().await;
}

/// Arrays read from a copy and from a statement's rows (a filter binds a value, which a copy
/// cannot take) come out alike: an empty one as `[]`; one of two dimensions, or one not
/// starting at 1, fails the job naming the column.
#[tokio::test]
async fn empty_arrays_are_empty_and_other_shapes_are_refused_on_both_reads() {
    let db = TestDb::create().await;
    sqlx::raw_sql(
        "CREATE TABLE empty (id int, ints integer[], texts text[]);
         INSERT INTO empty VALUES (1, '{}', '{}');
         CREATE TABLE grid (id int, ints integer[]);
         INSERT INTO grid VALUES (1, '{{1,2},{3,4}}');
         CREATE TABLE shifted (id int, ints integer[]);
         INSERT INTO shifted VALUES (1, '[0:1]={1,2}');",
    )
    .execute(&db.pool)
    .await
    .expect("fixture");
    let engine = engine_for(&[("pg", &db)], Default::default());
    for filters in [json!({}), json!({"pg": {"TABLE": {"id": {"eq": [1]}}}})] {
        let read = |table: &str| {
            let filters = serde_json::to_string(&filters)
                .expect("filters")
                .replace("TABLE", table);
            let fields = if table == "empty" {
                json!(["ints", "texts"])
            } else {
                json!(["ints"])
            };
            job(json!({
                "mappedFields": {"pg": {table: fields}},
                "filters": serde_json::from_str::<serde_json::Value>(&filters).expect("filters"),
            }))
        };
        let message = read("empty");
        let extraction = engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .expect("extraction");
        let result: serde_json::Value =
            serde_json::from_slice(&extraction.plaintext).expect("JSON");
        assert_eq!(
            result,
            json!({"pg": {"empty": [{"ints": [], "texts": []}]}}),
            "{filters}"
        );
        for table in ["grid", "shifted"] {
            let message = read(table);
            let error = engine
                .extract(&message.mapped_fields, &message.filters)
                .await
                .expect_err("refused");
            assert!(
                error.to_string().contains(
                    "column \"ints\": array value could not be decoded (only one-dimensional arrays are supported)"
                ),
                "{table} {filters}: {error}"
            );
        }
    }
    db.drop().await;
}

/// A copy runs in the simple query protocol, where a `;` would end one statement and start
/// another: a table or column named with a `;` (quoted, as every name is) is read by the
/// prepared `SELECT` instead, one statement per message, and its rows come back as any other's.
#[tokio::test]
async fn names_with_a_semicolon_are_read_by_the_prepared_select() {
    let db = TestDb::create().await;
    sqlx::raw_sql(
        r#"CREATE TABLE "semi;colon" ("x;y" int, "z" text);
           INSERT INTO "semi;colon" VALUES (1, 'a'), (2, 'b');"#,
    )
    .execute(&db.pool)
    .await
    .expect("fixture");
    let engine = engine_for(&[("pg", &db)], Default::default());
    let message = job(json!({"mappedFields": {"pg": {"semi;colon": ["x;y", "z"]}}}));
    let extraction = engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .expect("extraction");
    let result: serde_json::Value = serde_json::from_slice(&extraction.plaintext).expect("JSON");
    assert_eq!(
        result,
        json!({"pg": {"semi;colon": [{"x;y": 1, "z": "a"}, {"x;y": 2, "z": "b"}]}})
    );
    let statements: Vec<String> = sqlx::query_scalar(
        "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%semi;colon%'",
    )
    .fetch_all(&db.pool)
    .await
    .expect("pg_stat_activity");
    assert!(
        statements.iter().all(|query| !query.starts_with("COPY")),
        "{statements:?}"
    );
    db.drop().await;
}
