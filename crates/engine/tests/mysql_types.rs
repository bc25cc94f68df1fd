//! MySQL/MariaDB extraction against the real server: every column type's JSON form, every
//! filter operator, schema validation, hostile identifiers and values (table key naming is
//! `result_keys.rs`).

mod support;

use contract::message::JobMessage;
use engine::{Engine, EngineError};
use serde_json::{json, Value};
use support::mysql::{MariaDb, MariaDbEngine};

/// The connection name the test engines know their database by.
const CONN: &str = "my";

/// Extracts `mapped` with `filters` (both the job body's JSON) and returns the result text.
async fn extract(engine: &Engine, mapped: Value, filters: Value) -> Result<String, EngineError> {
    let body = json!({
        "jobId": "019391a2-7c1e-7a3b-9f00-0123456789ab",
        "mappedFields": mapped,
        "filters": filters,
    });
    let job = JobMessage::parse(body.to_string().as_bytes()).expect("a valid job body");
    let extraction = engine.extract(&job.mapped_fields, &job.filters).await?;
    let text = String::from_utf8(extraction.plaintext).expect("the result is UTF-8");
    assert_eq!(
        extraction.row_count,
        count_rows(&text),
        "row count of {text}"
    );
    Ok(text)
}

fn count_rows(text: &str) -> u64 {
    let value: Value = serde_json::from_str(text).expect("the result is JSON");
    value
        .as_object()
        .into_iter()
        .flat_map(|connections| connections.values())
        .filter_map(Value::as_object)
        .flat_map(|tables| tables.values())
        .filter_map(Value::as_array)
        .map(|rows| rows.len() as u64)
        .sum()
}

/// Extracts all of `table` (its listed `fields`) and compares with `expected` exactly.
async fn assert_table(db: &MariaDb, table: &str, fields: &[&str], expected: &str) {
    let engine = db.engine(CONN);
    let text = extract(&engine, json!({ CONN: { table: fields } }), json!({}))
        .await
        .unwrap_or_else(|e| panic!("extracting {table} failed: {e}"));
    assert_eq!(
        text, expected,
        "\n--- got ---\n{text}\n--- expected ---\n{expected}"
    );
}

#[tokio::test]
async fn integers_of_every_width_are_exact_numbers() {
    let db = MariaDb::create().await;
    db.exec(
        "CREATE TABLE ints (id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT,
           siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
           bi BIGINT, biu BIGINT UNSIGNED, flag TINYINT(1), y YEAR, b1 BIT(1), b64 BIT(64),
           z INT(6) UNSIGNED ZEROFILL);
         INSERT INTO ints VALUES
           (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, 0,
            1901, b'0', b'0', 0),
           (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295,
            9223372036854775807, 18446744073709551615, 1, 2155, b'1',
            b'1111111111111111111111111111111111111111111111111111111111111111', 42),
           (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL);",
    )
    .await;
    let fields = [
        "id", "ti", "tiu", "si", "siu", "mi", "miu", "i", "iu", "bi", "biu", "flag", "y", "b1",
        "b64", "z",
    ];
    let expected = r#"{
  "my": {
    "ints": [
      {
        "b1": 0,
        "b64": 0,
        "bi": -9223372036854775808,
        "biu": 0,
        "flag": 0,
        "i": -2147483648,
        "id": 1,
        "iu": 0,
        "mi": -8388608,
        "miu": 0,
        "si": -32768,
        "siu": 0,
        "ti": -128,
        "tiu": 0,
        "y": 1901,
        "z": 0
      },
      {
        "b1": 1,
        "b64": 18446744073709551615,
        "bi": 9223372036854775807,
        "biu": 18446744073709551615,
        "flag": 1,
        "i": 2147483647,
        "id": 2,
        "iu": 4294967295,
        "mi": 8388607,
        "miu": 16777215,
        "si": 32767,
        "siu": 65535,
        "ti": 127,
        "tiu": 255,
        "y": 2155,
        "z": 42
      },
      {
        "b1": null,
        "b64": null,
        "bi": null,
        "biu": null,
        "flag": null,
        "i": null,
        "id": 3,
        "iu": null,
        "mi": null,
        "miu": null,
        "si": null,
        "siu": null,
        "ti": null,
        "tiu": null,
        "y": null,
        "z": null
      }
    ]
  }
}"#;
    assert_table(&db, "ints", &fields, expected).await;
    db.drop().await;
}

#[tokio::test]
async fn decimals_are_exact_strings_and_floats_are_numbers() {
    let db = MariaDb::create().await;
    db.exec(
        "CREATE TABLE nums (id INT PRIMARY KEY, dec65 DECIMAL(65,30), num NUMERIC(10,2),
           f FLOAT, d DOUBLE);
         INSERT INTO nums VALUES
           (1, '12345678901234567890123456789012345.123456789012345678901234567890', -12.5,
            1.1, 0.1),
           (2, '-0.000000000000000000000000000001', 0, 123456789, 1e300),
           (3, 0, 99999999.99, -2.5e-7, -1.5e-7),
           (4, NULL, NULL, NULL, NULL),
           (5, NULL, NULL, -3626911.25, NULL);",
    )
    .await;
    let expected = r#"{
  "my": {
    "nums": [
      {
        "d": 0.1,
        "dec65": "12345678901234567890123456789012345.123456789012345678901234567890",
        "f": 1.1,
        "id": 1,
        "num": "-12.50"
      },
      {
        "d": 1e+300,
        "dec65": "-0.000000000000000000000000000001",
        "f": 123456790,
        "id": 2,
        "num": "0.00"
      },
      {
        "d": -1.5e-7,
        "dec65": "0.000000000000000000000000000000",
        "f": -2.5e-7,
        "id": 3,
        "num": "99999999.99"
      },
      {
        "d": null,
        "dec65": null,
        "f": null,
        "id": 4,
        "num": null
      },
      {
        "d": null,
        "dec65": null,
        "f": -3626911.2,
        "id": 5,
        "num": null
      }
    ]
  }
}"#;
    assert_table(&db, "nums", &["id", "dec65", "num", "f", "d"], expected).await;
    db.drop().await;
}

#[tokio::test]
async fn text_enum_and_set_columns_are_strings_escaped_like_go() {
    let db = MariaDb::create().await;
    db.exec(
        "CREATE TABLE texts (id INT PRIMARY KEY, c CHAR(5), vc VARCHAR(64), t TEXT,
           e ENUM('small','large'), s SET('a','b','c'), lt LONGTEXT,
           latin VARCHAR(10) CHARACTER SET latin1);
         INSERT INTO texts VALUES
           (1, 'ab', 'héllo 😀 ✓ /', '<a href=\"x\">&</a>', 'large', 'c,a', '{\"b\":1}', 'café'),
           (2, '', '', CONCAT('tab', CHAR(9), 'x', CHAR(10), 'y', CHAR(1), '\u{2028}'),
            'small', '', '', ''),
           (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL);",
    )
    .await;
    let expected = r#"{
  "my": {
    "texts": [
      {
        "c": "ab",
        "e": "large",
        "id": 1,
        "latin": "café",
        "lt": "{\"b\":1}",
        "s": [
          "a",
          "c"
        ],
        "t": "\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e",
        "vc": "héllo 😀 ✓ /"
      },
      {
        "c": "",
        "e": "small",
        "id": 2,
        "latin": "",
        "lt": "",
        "s": [],
        "t": "tab\tx\ny\u0001\u2028",
        "vc": ""
      },
      {
        "c": null,
        "e": null,
        "id": 3,
        "latin": null,
        "lt": null,
        "s": null,
        "t": null,
        "vc": null
      }
    ]
  }
}"#;
    let fields = ["id", "c", "vc", "t", "e", "s", "lt", "latin"];
    assert_table(&db, "texts", &fields, expected).await;
    db.drop().await;
}

#[tokio::test]
async fn binary_columns_are_base64() {
    let db = MariaDb::create().await;
    db.exec(
        "CREATE TABLE bins (id INT PRIMARY KEY, bn BINARY(3), vb VARBINARY(8), bl BLOB,
           lb LONGBLOB);
         INSERT INTO bins VALUES
           (1, 0x00FF80, 0xDEADBEEF, 0xC328, ''),
           (2, 'a', '', 'hello', NULL),
           (3, NULL, NULL, NULL, NULL);",
    )
    .await;
    let expected = r#"{
  "my": {
    "bins": [
      {
        "bl": "wyg=",
        "bn": "AP+A",
        "id": 1,
        "lb": "",
        "vb": "3q2+7w=="
      },
      {
        "bl": "aGVsbG8=",
        "bn": "YQAA",
        "id": 2,
        "lb": null,
        "vb": ""
      },
      {
        "bl": null,
        "bn": null,
        "id": 3,
        "lb": null,
        "vb": null
      }
    ]
  }
}"#;
    assert_table(&db, "bins", &["id", "bn", "vb", "bl", "lb"], expected).await;
    db.drop().await;
}

#[tokio::test]
async fn dates_times_and_zero_dates_keep_their_layout_in_utc() {
    let db = MariaDb::create().await;
    // The fixture session is in +05:00: TIMESTAMP values are stored as UTC instants, and the
    // extraction (a UTC session) must write them as UTC.
    db.exec(
        "SET time_zone = '+05:00';
         CREATE TABLE times (id INT PRIMARY KEY, d DATE, dt DATETIME, dt6 DATETIME(6),
           ts TIMESTAMP(6) NULL DEFAULT NULL, tm TIME, tm6 TIME(6));
         INSERT INTO times VALUES
           (1, '2024-02-29', '2024-02-29 23:59:59', '2024-02-29 23:59:59.123456',
            '2024-03-01 05:00:00.5', '-838:59:59', '12:34:56.5'),
           (2, '1000-01-01', '9999-12-31 23:59:59', '1970-01-01 00:00:00.000001',
            '1970-01-01 05:00:01', '838:59:59', '-00:00:00.000001'),
           (3, NULL, NULL, NULL, NULL, NULL, NULL);
         SET sql_mode = '';
         INSERT INTO times VALUES
           (4, '0000-00-00', '0000-00-00 00:00:00', '2024-00-00 10:00:00',
            '0000-00-00 00:00:00', '00:00:00', NULL);",
    )
    .await;
    let expected = r#"{
  "my": {
    "times": [
      {
        "d": "2024-02-29",
        "dt": "2024-02-29T23:59:59Z",
        "dt6": "2024-02-29T23:59:59.123456Z",
        "id": 1,
        "tm": "-838:59:59",
        "tm6": "12:34:56.500000",
        "ts": "2024-03-01T00:00:00.5Z"
      },
      {
        "d": "1000-01-01",
        "dt": "9999-12-31T23:59:59Z",
        "dt6": "1970-01-01T00:00:00.000001Z",
        "id": 2,
        "tm": "838:59:59",
        "tm6": "-00:00:00.000001",
        "ts": "1970-01-01T00:00:01Z"
      },
      {
        "d": null,
        "dt": null,
        "dt6": null,
        "id": 3,
        "tm": null,
        "tm6": null,
        "ts": null
      },
      {
        "d": "0000-00-00",
        "dt": "0000-00-00T00:00:00Z",
        "dt6": "2024-00-00T10:00:00Z",
        "id": 4,
        "tm": "00:00:00",
        "tm6": null,
        "ts": "0000-00-00T00:00:00Z"
      }
    ]
  }
}"#;
    let fields = ["id", "d", "dt", "dt6", "ts", "tm", "tm6"];
    assert_table(&db, "times", &fields, expected).await;

    // The server's own zone may well be UTC, which would hide a session left in `SYSTEM`: a
    // view over a function reading the session's zone shows what the engine's session uses.
    db.exec(
        "CREATE FUNCTION session_zone() RETURNS VARCHAR(64) DETERMINISTIC
           RETURN @@session.time_zone;
         CREATE VIEW zone AS SELECT 1 AS id, session_zone() AS zone;",
    )
    .await;
    let expected = r#"{
  "my": {
    "zone": [
      {
        "id": 1,
        "zone": "+00:00"
      }
    ]
  }
}"#;
    assert_table(&db, "zone", &["id", "zone"], expected).await;
    db.drop().await;
}

#[tokio::test]
async fn json_is_embedded_with_sorted_keys_and_geometry_is_wkt() {
    let db = MariaDb::create().await;
    db.exec(
        r#"CREATE TABLE docs (id INT PRIMARY KEY, j JSON, g GEOMETRY, p POINT, poly POLYGON);
         INSERT INTO docs VALUES
           (1, '{"z":1,"a":{"y":[1,2.5,{"c":null,"b":true}],"x":"<&>"},"m":"é"}',
            ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(-1.5 2)'),
            ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')),
           (2, '[]', ST_GeomFromText('LINESTRING(0 0,1 1)'), NULL, NULL),
           (3, '"just text"', NULL, NULL, NULL),
           (4, NULL, NULL, NULL, NULL);"#,
    )
    .await;
    let expected = r#"{
  "my": {
    "docs": [
      {
        "g": "POINT(1 2)",
        "id": 1,
        "j": {
          "a": {
            "x": "\u003c\u0026\u003e",
            "y": [
              1,
              2.5,
              {
                "b": true,
                "c": null
              }
            ]
          },
          "m": "é",
          "z": 1
        },
        "p": "POINT(-1.5 2)",
        "poly": "POLYGON((0 0,1 0,1 1,0 0))"
      },
      {
        "g": "LINESTRING(0 0,1 1)",
        "id": 2,
        "j": [],
        "p": null,
        "poly": null
      },
      {
        "g": null,
        "id": 3,
        "j": "just text",
        "p": null,
        "poly": null
      },
      {
        "g": null,
        "id": 4,
        "j": null,
        "p": null,
        "poly": null
      }
    ]
  }
}"#;
    assert_table(&db, "docs", &["id", "j", "g", "p", "poly"], expected).await;
    db.drop().await;
}

/// The `payments` fixture the filter tests select from.
async fn payments(db: &MariaDb) {
    db.exec(
        "CREATE TABLE payments (id INT PRIMARY KEY, status VARCHAR(10), amount DECIMAL(10,2),
           created DATETIME, paid_on DATE, big BIGINT UNSIGNED, name VARCHAR(20),
           active TINYINT(1));
         INSERT INTO payments VALUES
           (1, 'paid', 10.00, '2024-01-01 00:00:00', '2024-01-01', 1, 'Alice', 1),
           (2, 'paid', 20.50, '2024-01-15 12:00:00', '2024-01-15', 18446744073709551615,
            'Bob', 0),
           (3, 'void', 30.00, '2024-01-31 23:59:59', '2024-01-31', 3, 'Alan', 1),
           (4, 'pending', 40.00, '2024-02-01 00:00:00', '2024-02-01', 4, 'Carol', 0),
           (5, NULL, NULL, NULL, NULL, NULL, NULL, NULL);",
    )
    .await;
}

/// The ids of `table`'s rows the filter on it lets through, sorted.
async fn ids(engine: &Engine, table: &str, filter: Value) -> Vec<i64> {
    let text = extract(
        engine,
        json!({ CONN: { table: ["id"] } }),
        json!({ CONN: { table: filter } }),
    )
    .await
    .unwrap_or_else(|e| panic!("filter failed: {e}"));
    let value: Value = serde_json::from_str(&text).expect("the result is JSON");
    let mut ids: Vec<i64> = value[CONN][table]
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["id"].as_i64()).collect())
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn every_filter_operator_selects_the_right_rows() {
    let db = MariaDb::create().await;
    payments(&db).await;
    let engine = db.engine(CONN);
    let cases: Vec<(Value, Vec<i64>)> = vec![
        (json!({"status": {"eq": ["paid"]}}), vec![1, 2]),
        (json!({"status": {"eq": ["paid", "void"]}}), vec![1, 2, 3]),
        (json!({"status": {"ne": ["paid"]}}), vec![3, 4]),
        (json!({"status": {"ne": ["paid", "void"]}}), vec![4]),
        (json!({"amount": {"gt": [20.5]}}), vec![3, 4]),
        (json!({"amount": {"gt": ["20.50"]}}), vec![3, 4]),
        (json!({"amount": {"gte": [20.5]}}), vec![2, 3, 4]),
        (json!({"amount": {"lt": [20.5]}}), vec![1]),
        (json!({"amount": {"lte": ["20.50"]}}), vec![1, 2]),
        (json!({"amount": {"gte": [10], "lt": [30]}}), vec![1, 2]),
        // A YYYY-MM-DD upper bound on a DATETIME covers the whole end day.
        (
            json!({"created": {"between": ["2024-01-01", "2024-01-31"]}}),
            vec![1, 2, 3],
        ),
        (
            json!({"created": {"between": ["2024-01-15 12:00:00", "2024-01-31 00:00:00"]}}),
            vec![2],
        ),
        (
            json!({"paid_on": {"between": ["2024-01-02", "2024-01-31"]}}),
            vec![2, 3],
        ),
        (json!({"created": {"gte": ["2024-01-31"]}}), vec![3, 4]),
        (json!({"id": {"in": [1, 3, 5]}}), vec![1, 3, 5]),
        (json!({"id": {"nin": [1, 3]}}), vec![2, 4, 5]),
        (json!({"status": {"nin": ["paid"]}}), vec![3, 4]),
        (json!({"name": {"like": ["A%"]}}), vec![1, 3]),
        (json!({"name": {"like": ["%o%"]}}), vec![2, 4]),
        (json!({"big": {"eq": [18446744073709551615u64]}}), vec![2]),
        (json!({"big": {"gt": [4]}}), vec![2]),
        (json!({"active": {"eq": [true]}}), vec![1, 3]),
        (
            json!({"status": {"eq": ["paid"]}, "amount": {"gt": [15]}}),
            vec![2],
        ),
        (json!({"status": {"eq": ["refunded"]}}), vec![]),
    ];
    for (filter, expected) in cases {
        let got = ids(&engine, "payments", filter.clone()).await;
        assert_eq!(got, expected, "filter {filter}");
    }
    db.drop().await;
}

#[tokio::test]
async fn unknown_tables_and_fields_fail_schema_validation_by_name() {
    let db = MariaDb::create().await;
    payments(&db).await;
    let engine = db.engine(CONN);
    let schema_error = |result: Result<String, EngineError>, name: &str| match result {
        Err(error @ EngineError::Schema { .. }) => {
            let text = error.to_string();
            assert!(text.contains(name), "{text} should name {name}");
            assert!(text.contains("failed schema validation"), "{text}");
        }
        other => panic!("expected a schema error naming {name}, got {other:?}"),
    };
    let no_filters = || json!({});
    schema_error(
        extract(&engine, json!({CONN: {"nope": ["id"]}}), no_filters()).await,
        "nope",
    );
    schema_error(
        extract(
            &engine,
            json!({CONN: {"payments": ["id", "ghost"]}}),
            no_filters(),
        )
        .await,
        "ghost",
    );
    schema_error(
        extract(
            &engine,
            json!({CONN: {"payments": ["id"]}}),
            json!({CONN: {"payments": {"phantom": {"eq": [1]}}}}),
        )
        .await,
        "phantom",
    );
    // Table names match exactly, as the server does on Linux.
    schema_error(
        extract(&engine, json!({CONN: {"PAYMENTS": ["id"]}}), no_filters()).await,
        "PAYMENTS",
    );
    // MySQL has no catalog part.
    schema_error(
        extract(
            &engine,
            json!({CONN: {"def.x.payments": ["id"]}}),
            no_filters(),
        )
        .await,
        "def.x.payments",
    );
    db.drop().await;
}

#[tokio::test]
async fn hostile_identifiers_and_values_are_quoted_and_bound() {
    let db = MariaDb::create().await;
    payments(&db).await;
    let table = "we`ird; DROP TABLE payments; -- /*";
    let column = "va`l'; --*/";
    db.exec(
        "CREATE TABLE `we``ird; DROP TABLE payments; -- /*` (id INT PRIMARY KEY,
           `va``l'; --*/` VARCHAR(64));
         INSERT INTO `we``ird; DROP TABLE payments; -- /*` VALUES
           (1, 'x''; DROP TABLE payments; --'), (2, 'a`b /* c */'), (3, 'plain');",
    )
    .await;
    let engine = db.engine(CONN);

    let text = extract(
        &engine,
        json!({CONN: {table: ["id", column]}}),
        json!({CONN: {table: {column: {"eq": ["x'; DROP TABLE payments; --"]}}}}),
    )
    .await
    .expect("the hostile table is extracted");
    let expected = r#"{
  "my": {
    "we`ird; DROP TABLE payments; -- /*": [
      {
        "id": 1,
        "va`l'; --*/": "x'; DROP TABLE payments; --"
      }
    ]
  }
}"#;
    assert_eq!(text, expected);

    let hostile_values: Vec<(Value, Vec<i64>)> = vec![
        (
            json!({column: {"in": ["a`b /* c */", "') OR 1=1 --"]}}),
            vec![2],
        ),
        (json!({column: {"like": ["%' OR '1'='1"]}}), vec![]),
        (
            json!({column: {"ne": ["plain", "\\' OR 1 --"]}}),
            vec![1, 2],
        ),
    ];
    for (filter, expected) in hostile_values {
        assert_eq!(
            ids(&engine, table, filter.clone()).await,
            expected,
            "filter {filter}"
        );
    }
    let result = extract(
        &engine,
        json!({CONN: {"payments`; DROP TABLE payments; --": ["id"]}}),
        json!({}),
    )
    .await;
    assert!(
        matches!(result, Err(EngineError::Schema { .. })),
        "{result:?}"
    );
    let result = extract(
        &engine,
        json!({CONN: {"payments": ["id`, (SELECT 1) AS `x"]}}),
        json!({}),
    )
    .await;
    assert!(
        matches!(result, Err(EngineError::Schema { .. })),
        "{result:?}"
    );

    assert!(db.has_table("payments").await, "payments was dropped");
    assert!(db.has_table(table).await);
    assert_eq!(
        ids(&engine, "payments", json!({})).await,
        vec![1, 2, 3, 4, 5]
    );
    db.drop().await;
}

#[tokio::test]
async fn tables_without_rows_are_absent() {
    let db = MariaDb::create().await;
    payments(&db).await;
    db.exec("CREATE TABLE empty (id INT);").await;
    let engine = db.engine(CONN);

    let text = extract(
        &engine,
        json!({CONN: {"empty": ["id"], "payments": ["id"]}}),
        json!({CONN: {"payments": {"id": {"eq": [4]}}}}),
    )
    .await
    .expect("extracts");
    assert_eq!(
        text,
        "{\n  \"my\": {\n    \"payments\": [\n      {\n        \"id\": 4\n      }\n    ]\n  }\n}"
    );

    let text = extract(&engine, json!({CONN: {"empty": ["id"]}}), json!({}))
        .await
        .expect("extracts");
    assert_eq!(text, "{\n  \"my\": {}\n}");
    db.drop().await;
}

#[tokio::test]
async fn types_without_a_mapping_are_the_servers_text() {
    let db = MariaDb::create().await;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&db.pool)
        .await
        .expect("the server has a version");
    // MariaDB has UUID and INET6 types; MySQL's nearest unmapped type is none of these, so
    // there the fixture is a spatial type read through the same fallback's sibling.
    let (create, expected) = if version.to_ascii_lowercase().contains("mariadb") {
        (
            "CREATE TABLE odd (id INT PRIMARY KEY, u UUID, ip INET6);
             INSERT INTO odd VALUES (1, '123e4567-e89b-12d3-a456-426614174000', '::1'),
               (2, NULL, '2001:db8::ff00:42:8329');",
            r#"{
  "my": {
    "odd": [
      {
        "id": 1,
        "ip": "::1",
        "u": "123e4567-e89b-12d3-a456-426614174000"
      },
      {
        "id": 2,
        "ip": "2001:db8::ff00:42:8329",
        "u": null
      }
    ]
  }
}"#,
        )
    } else {
        (
            "CREATE TABLE odd (id INT PRIMARY KEY, u MULTIPOINT, ip LINESTRING);
             INSERT INTO odd VALUES (1, ST_GeomFromText('MULTIPOINT((1 2))'),
               ST_GeomFromText('LINESTRING(0 0,1 1)')), (2, NULL, NULL);",
            r#"{
  "my": {
    "odd": [
      {
        "id": 1,
        "ip": "LINESTRING(0 0,1 1)",
        "u": "MULTIPOINT((1 2))"
      },
      {
        "id": 2,
        "ip": null,
        "u": null
      }
    ]
  }
}"#,
        )
    };
    db.exec(create).await;
    assert_table(&db, "odd", &["id", "u", "ip"], expected).await;
    db.drop().await;
}
