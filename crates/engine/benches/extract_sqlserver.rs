//! Benchmark: rows of a SQL Server table into the result plaintext through the engine, beside a
//! bare tiberius query reading the same rows from the same server, in one run.
//!
//! The server is a private pysqlbridge (the stand-in of docs/TEST-SERVERS.md §2), which is
//! Python and computes each request fully before replying: both figures are dominated by it, so
//! the ratio says what the engine adds on top of the driver, not how fast SQL Server is.
//!
//! Run: `cargo bench -p engine --bench extract_sqlserver` (pysqlbridge from
//! `scripts/services.sh sqlserver`; `BENCH_ROWS` overrides the row count, default 100,000).

use std::time::Instant;

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};
use futures_util::TryStreamExt;
use serde_json::json;
use testkit::sqlbridge::{SqlBridge, PASSWORD, USER};
use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::TokioAsyncWriteCompatExt;

mod common;

use common::RUNS;

#[tokio::main]
async fn main() {
    let rows = common::bench_rows(100_000);
    let table: Vec<serde_json::Value> = (0..rows)
        .map(|i| json!({"id": i, "name": format!("name-{i}"), "score": i as f64 / 8.0, "grp": i % 10}))
        .collect();
    let server = SqlBridge::start(&[("big", json!(table))]);
    let env = from_env_vars(server.vars("BENCH", "bench", &[("SSLMODE", "disable")]))
        .expect("datasource");
    let engine = Engine::new(EngineConfig::default(), Resolver::new(env, None));
    let message = contract::JobMessage::parse(
        json!({"jobId": uuid::Uuid::new_v4(), "mappedFields": {"bench": {"big": ["grp", "id", "name", "score"]}}})
            .to_string()
            .as_bytes(),
    )
    .expect("job");

    let mut bare = Vec::new();
    let mut extracted = Vec::new();
    let mut bytes = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let count = bare_query(server.port).await;
        bare.push(started.elapsed());
        assert_eq!(count, rows, "the bare query read every row");
        let started = Instant::now();
        let extraction = engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .expect("extraction");
        extracted.push(started.elapsed());
        assert_eq!(extraction.row_count, rows);
        bytes = extraction.plaintext.len();
    }
    println!("rows: {rows} x 4 columns, pysqlbridge, login-only TLS, {RUNS} runs each");
    common::report("bare tiberius query", bare, extracted, bytes);
}

/// Reads every row of `big` with tiberius alone, as the engine's statement would.
async fn bare_query(port: u16) -> u64 {
    let mut config = Config::new();
    config.host("127.0.0.1");
    config.port(port);
    config.authentication(AuthMethod::sql_server(USER, PASSWORD));
    config.encryption(EncryptionLevel::Off);
    config.trust_cert();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("tcp");
    tcp.set_nodelay(true).expect("nodelay");
    let mut client = Client::connect(config, tcp.compat_write())
        .await
        .expect("login");
    let mut rows = client
        .query("SELECT [grp], [id], [name], [score] FROM [dbo].[big]", &[])
        .await
        .expect("query")
        .into_row_stream();
    let mut count = 0;
    while let Some(row) = rows.try_next().await.expect("row") {
        std::hint::black_box(row);
        count += 1;
    }
    count
}
