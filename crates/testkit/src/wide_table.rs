//! The benchmarks' PostgreSQL table: eight columns of the kinds a settlement row has (integers,
//! a numeric amount, text with markup and a non-ASCII letter, a timestamp, a boolean, a float
//! and a uuid), generated server-side, so the engine's `extract_vs_copy` and the Worker's
//! `big_results` read the same rows.

/// The table's columns, in the order a job maps them.
pub const COLUMNS: [&str; 8] = [
    "id",
    "tries",
    "amount",
    "label",
    "created_at",
    "settled",
    "rate",
    "ref",
];

/// `CREATE TABLE <name> AS …` of `rows` rows, `id` running from 1 (run `VACUUM ANALYZE` after).
pub fn create_sql(name: &str, rows: u64) -> String {
    format!(
        "CREATE TABLE {name} AS SELECT
            i::bigint AS id,
            (i % 7)::integer AS tries,
            round((i * 1.37)::numeric, 2)::numeric(14,2) AS amount,
            'payment <' || i || '> for café' AS label,
            timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second' AS created_at,
            (i % 2 = 0) AS settled,
            i / 3.0::float8 AS rate,
            md5(i::text)::uuid AS ref
         FROM generate_series(1, {rows}) i"
    )
}
