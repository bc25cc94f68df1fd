//! Benchmark: 1,000,000 rows x 8 mixed columns from PostgreSQL into the result plaintext,
//! beside `COPY (SELECT ...) TO STDOUT` of the same rows through the same server, in one run.
//!
//! Goal: extraction time at most 2x the COPY time; peak memory (VmHWM growth during the
//! extraction) at most 1.5x the plaintext size + 64 MiB.
//!
//! Run: `cargo bench -p engine --bench extract_vs_copy` (PostgreSQL at `BENCH_DATABASE_URL`,
//! default `postgres://postgres@127.0.0.1:5432/postgres`; `BENCH_ROWS` overrides the row count).

use std::str::FromStr;
use std::time::Instant;

use futures_util::TryStreamExt;
use serde_json::json;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

mod common;

use testkit::wide_table::COLUMNS;

#[tokio::main]
async fn main() {
    let url = std::env::var("BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let rows = common::bench_rows(1_000_000);
    let admin = PgConnectOptions::from_str(&url).expect("BENCH_DATABASE_URL");
    let name = format!("fetcher_bench_{}", uuid::Uuid::new_v4().simple());
    let mut conn = admin.connect().await.expect("PostgreSQL is not reachable");
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    let options = admin.clone().database(&name);

    let outcome = run(&options, &name, rows).await;

    sqlx::raw_sql(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .expect("drop database");
    if let Err(e) = outcome {
        panic!("benchmark failed: {e}");
    }
}

async fn run(options: &PgConnectOptions, database: &str, rows: u64) -> Result<(), String> {
    let mut conn = PgConnection::connect_with(options)
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    sqlx::raw_sql(&testkit::wide_table::create_sql("payments", rows))
        .execute(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql("VACUUM ANALYZE payments")
        .execute(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "fixture: {rows} rows x 8 columns in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let vars = [
        ("DATASOURCE_BENCH_TYPE", "POSTGRESQL".to_owned()),
        ("DATASOURCE_BENCH_HOST", options.get_host().to_owned()),
        ("DATASOURCE_BENCH_PORT", options.get_port().to_string()),
        ("DATASOURCE_BENCH_DATABASE", database.to_owned()),
        ("DATASOURCE_BENCH_USER", options.get_username().to_owned()),
        ("DATASOURCE_BENCH_SSLMODE", "disable".to_owned()),
    ]
    .map(|(k, v)| (k.to_owned(), v));
    let env = engine::connection::from_env_vars(vars).map_err(|e| e.to_string())?;
    let engine = engine::Engine::new(
        engine::EngineConfig {
            max_result_bytes: u64::MAX,
            ..Default::default()
        },
        engine::connection::Resolver::new(env, None),
    );
    let body = json!({
        "jobId": uuid::Uuid::new_v4().to_string(),
        "mappedFields": {"bench": {"payments": COLUMNS}},
    });
    let message =
        contract::JobMessage::parse(body.to_string().as_bytes()).map_err(|e| e.to_string())?;
    let copy_sql = format!(
        "COPY (SELECT {} FROM payments) TO STDOUT",
        COLUMNS.join(", ")
    );

    // Warm both paths (server cache, pool), then alternate, `common::RUNS` timed runs each.
    copy_out(&mut conn, &copy_sql).await?;
    drop(
        engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .map_err(|e| e.to_string())?,
    );
    let mut copy_times = Vec::new();
    let mut extract_times = Vec::new();
    let mut copy_bytes = 0;
    let mut plaintext_bytes = 0;
    let mut peak_growth = 0;
    for _ in 0..common::RUNS {
        let started = Instant::now();
        copy_bytes = copy_out(&mut conn, &copy_sql).await?;
        copy_times.push(started.elapsed());

        let before = reset_peak_rss();
        let started = Instant::now();
        let extraction = engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .map_err(|e| e.to_string())?;
        extract_times.push(started.elapsed());
        peak_growth = peak_growth.max(peak_rss().saturating_sub(before));
        plaintext_bytes = extraction.plaintext.len() as u64;
        assert_eq!(extraction.row_count, rows);
    }
    let copy = common::median(copy_times);
    let extract = common::median(extract_times);
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let budget = plaintext_bytes as f64 * 1.5 + 64.0 * 1024.0 * 1024.0;
    println!(
        "COPY TO STDOUT        median {:>8.0} ms   {:>7.1} MiB of text",
        copy.as_secs_f64() * 1e3,
        mib(copy_bytes)
    );
    println!(
        "engine extraction     median {:>8.0} ms   {:>7.1} MiB of result JSON",
        extract.as_secs_f64() * 1e3,
        mib(plaintext_bytes)
    );
    println!(
        "time ratio extraction/COPY: {:.2} (goal <= 2.0)",
        extract.as_secs_f64() / copy.as_secs_f64()
    );
    println!(
        "peak RSS growth during extraction: {:.1} MiB = {:.2}x plaintext (budget 1.5x + 64 MiB = {:.1} MiB)",
        mib(peak_growth),
        peak_growth as f64 / plaintext_bytes as f64,
        budget / (1024.0 * 1024.0),
    );
    Ok(())
}

async fn copy_out(conn: &mut PgConnection, sql: &str) -> Result<u64, String> {
    let mut stream = conn.copy_out_raw(sql).await.map_err(|e| e.to_string())?;
    let mut bytes = 0u64;
    while let Some(chunk) = stream.try_next().await.map_err(|e| e.to_string())? {
        bytes += chunk.len() as u64;
    }
    Ok(bytes)
}

/// Resets the process's peak RSS to the current RSS (Linux `clear_refs` 5) and returns it.
fn reset_peak_rss() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:") * 1024
}

fn peak_rss() -> u64 {
    status_kib("VmHWM:") * 1024
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
