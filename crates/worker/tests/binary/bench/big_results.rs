//! Big results through the whole Worker (issue 17): one job per result size (256 MiB, 1 GiB and
//! 4 GiB of result JSON by default) over one PostgreSQL table, from the signed message on the
//! work queue to its `job.completed` at a consumer, against `psql \copy` of the same rows to
//! `/dev/null`; and the Worker's peak RSS growth during the job, from `/proc` (`VmHWM` reset
//! when the job is sent).
//!
//! Each measurement runs a fresh Worker process, this build's (`after`) and, when
//! `BENCH_BEFORE_BIN` names one, the build from before the result was a stream (`before`:
//! `scripts/bench-before.sh` builds it, `make bench` passes it). Reported: medians over
//! `BENCH_ROUNDS` (default 3) rounds, each round timing `\copy`, `after` and `before` in turn;
//! and CPU seconds of the Worker, PostgreSQL and the S3 server per job, which say what limits
//! it. `BENCH_BIG_MIB` changes the sizes (`256,1024`). The plot goes to
//! `docs/bench/memory-by-result-size.svg`.

use std::process::Command;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};
use testkit::wide_table::{self, COLUMNS};
use uuid::Uuid;

use super::knobs;
use super::plot;
use super::procfs;
use super::stats::{median, median_of, MIB};
use crate::harness::{WorkerProcess, World};

/// Rows of the calibration job, whose result size gives the bytes per row.
const CALIBRATION_ROWS: u64 = 100_000;

/// A first guess of the result JSON per row, to size the table before calibrating.
const GUESSED_BYTES_PER_ROW: f64 = 270.0;

/// How long the slowest job may take before the bench gives up.
const JOB_WITHIN: Duration = Duration::from_secs(3600);

/// One job's measurement.
struct Run {
    elapsed: Duration,
    growth_bytes: u64,
    result_bytes: u64,
    worker_cpu: f64,
    postgres_cpu: f64,
    s3_cpu: f64,
}

/// The medians of a build's runs at one size.
struct Medians {
    elapsed: Duration,
    growth_bytes: f64,
    worker_cpu: f64,
    postgres_cpu: f64,
    s3_cpu: f64,
}

impl Medians {
    fn of(runs: &[Run]) -> Medians {
        let each = |f: fn(&Run) -> f64| median_of(&runs.iter().map(f).collect::<Vec<_>>());
        Medians {
            elapsed: median(&runs.iter().map(|r| r.elapsed).collect::<Vec<_>>()),
            growth_bytes: each(|r| r.growth_bytes as f64),
            worker_cpu: each(|r| r.worker_cpu),
            postgres_cpu: each(|r| r.postgres_cpu),
            s3_cpu: each(|r| r.s3_cpu),
        }
    }
}

/// The Worker's settings for big results: a cap above the largest, time enough, and a lease
/// that a busy machine renews comfortably.
fn big_result_settings() -> Vec<(String, String)> {
    [
        ("ENGINE_MAX_RESULT_BYTES", (16u64 << 30).to_string()),
        ("ENGINE_EXTRACTION_TIMEOUT_SEC", "7200".to_owned()),
        ("JOB_LEASE_SEC", "30".to_owned()),
        ("LOG_LEVEL", "warn".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench`"]
async fn big_results() {
    let sizes_mib = knobs::list("BENCH_BIG_MIB", "256,1024,4096");
    let rounds = knobs::number("BENCH_ROUNDS", 3);
    let after = WorkerProcess::binary();
    let before = std::env::var("BENCH_BEFORE_BIN").ok();
    let world = World::new().await;
    let mut source = PgConnection::connect(world.source_url())
        .await
        .expect("source database");

    let largest = *sizes_mib.iter().max().expect("a size");
    let table_rows = (largest as f64 * MIB / GUESSED_BYTES_PER_ROW) as u64;
    let started = Instant::now();
    create_table(&mut source, table_rows).await;
    println!(
        "\nfixture: {table_rows} rows x {} columns in {:.0} s",
        COLUMNS.len(),
        started.elapsed().as_secs_f64()
    );
    let calibration_rows = CALIBRATION_ROWS.min(table_rows);
    create_view(&mut source, "calibration", calibration_rows).await;
    let calibration = run_job(&world, &after, "calibration").await;
    let bytes_per_row = calibration.result_bytes as f64 / calibration_rows as f64;
    println!("result JSON per row: {bytes_per_row:.1} bytes");

    let mut table = Vec::new();
    for &mib in &sizes_mib {
        let rows = ((mib as f64 * MIB / bytes_per_row) as u64).min(table_rows);
        let view = format!("big_{mib}");
        create_view(&mut source, &view, rows).await;
        let (mut copies, mut afters, mut befores) = (Vec::new(), Vec::new(), Vec::new());
        for round in 1..=rounds {
            copies.push(psql_copy(&world, &view));
            afters.push(run_job(&world, &after, &view).await);
            if let Some(before) = &before {
                befores.push(run_job(&world, before, &view).await);
            }
            println!(
                "{mib} MiB round {round}: \\copy {:.1} s, after {:.1} s{}",
                copies.last().expect("copy").as_secs_f64(),
                afters.last().expect("after").elapsed.as_secs_f64(),
                befores
                    .last()
                    .map(|r: &Run| format!(", before {:.1} s", r.elapsed.as_secs_f64()))
                    .unwrap_or_default()
            );
        }
        let result_mib = afters[0].result_bytes as f64 / MIB;
        table.push(Size {
            rows,
            result_mib,
            copy: median(&copies),
            after: Medians::of(&afters),
            before: (!befores.is_empty()).then(|| Medians::of(&befores)),
        });
    }
    drop(source);
    world.cleanup().await;

    println!(
        "\nbig results: one job, one PostgreSQL table of {} columns, medians of {rounds} rounds",
        COLUMNS.len()
    );
    for size in &table {
        size.print();
    }
    if before.is_none() {
        println!("before: not measured (BENCH_BEFORE_BIN unset; `make bench-before` builds it)");
    }
    plot::memory_by_result_size(
        &table
            .iter()
            .map(|s| {
                (
                    s.result_mib,
                    s.after.growth_bytes / MIB,
                    s.before.as_ref().map(|b| b.growth_bytes / MIB),
                )
            })
            .collect::<Vec<_>>(),
    );
}

/// The figures of one result size.
struct Size {
    rows: u64,
    result_mib: f64,
    copy: Duration,
    after: Medians,
    before: Option<Medians>,
}

impl Size {
    fn print(&self) {
        let copy = self.copy.as_secs_f64();
        println!(
            "{:>7.0} MiB of JSON ({} rows): psql \\copy {copy:.1} s",
            self.result_mib, self.rows
        );
        for (name, m) in [
            ("after", Some(&self.after)),
            ("before", self.before.as_ref()),
        ] {
            let Some(m) = m else { continue };
            println!(
                "  {name:<6} {:>7.1} s = {:.2}x \\copy   peak RSS growth {:>7.1} MiB   CPU s: worker {:.2} ({:.2} per GiB of JSON), postgres {:.2}, s3 {:.2}",
                m.elapsed.as_secs_f64(),
                m.elapsed.as_secs_f64() / copy,
                m.growth_bytes / MIB,
                m.worker_cpu,
                m.worker_cpu / (self.result_mib / 1024.0),
                m.postgres_cpu,
                m.s3_cpu,
            );
        }
    }
}

/// The table `big`: `rows` rows of testkit's wide table (the engine's `extract_vs_copy` rows).
async fn create_table(source: &mut PgConnection, rows: u64) {
    sqlx::raw_sql(&wide_table::create_sql("big", rows))
        .execute(&mut *source)
        .await
        .expect("the big table");
    sqlx::raw_sql("VACUUM ANALYZE big")
        .execute(source)
        .await
        .expect("vacuum");
}

/// A view of `big`'s first `rows` rows.
async fn create_view(source: &mut PgConnection, name: &str, rows: u64) {
    sqlx::raw_sql(&format!(
        "CREATE VIEW {name} AS SELECT * FROM big WHERE id <= {rows}"
    ))
    .execute(source)
    .await
    .expect("view");
}

/// `psql \copy` of the view's columns to `/dev/null`: its wall time.
fn psql_copy(world: &World, view: &str) -> Duration {
    let started = Instant::now();
    let status = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            world.source_url(),
            "-c",
        ])
        .arg(format!(
            "\\copy (SELECT {} FROM {view}) TO '/dev/null'",
            COLUMNS.join(", ")
        ))
        .status()
        .expect("psql (PostgreSQL's client)");
    let elapsed = started.elapsed();
    assert!(status.success(), "psql \\copy failed: {status}");
    elapsed
}

/// Runs one job over `view` on a fresh Worker from `binary`: time from the signed message to
/// its verified `job.completed`, peak RSS growth from the Worker's RSS when it was sent, and
/// the CPU seconds used meanwhile. The stored object is removed afterwards (disk).
async fn run_job(world: &World, binary: &str, view: &str) -> Run {
    let worker = world
        .start_worker_binary(binary, big_result_settings())
        .await;
    let pid = worker.pid();
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    let body = world.job_body(job_id, "src", view, &COLUMNS);
    let cpu = || {
        [
            procfs::cpu_seconds(pid).unwrap_or_default(),
            procfs::cpu_seconds_of("postgres"),
            procfs::cpu_seconds_of("s3s-fs"),
        ]
    };
    procfs::reset_peak(pid);
    let base = procfs::rss_bytes(pid);
    let cpu_before = cpu();
    let started = Instant::now();
    world.submit(&body, None, &[]).await;
    let event = events.event_for(job_id, JOB_WITHIN).await;
    let elapsed = started.elapsed();
    let growth_bytes = procfs::peak_bytes(pid).saturating_sub(base);
    let cpu_after = cpu();
    let document = event.body();
    assert_eq!(
        event.delivery.routing_key.as_str(),
        "job.completed",
        "{binary} did not complete the job over {view}: {document}; output:\n{}",
        worker.output()
    );
    event.verify(&world.keys).expect("the event's signature");
    let result = &document["result"];
    let path = result["path"].as_str().expect("result path");
    assert!(
        world.objects.exists(path).await.expect("head the object"),
        "the stored object {path}"
    );
    world.objects.delete(path).await.expect("delete the object");
    drop(worker);
    Run {
        elapsed,
        growth_bytes,
        result_bytes: result["sizeBytes"].as_u64().expect("sizeBytes"),
        worker_cpu: cpu_after[0] - cpu_before[0],
        postgres_cpu: cpu_after[1] - cpu_before[1],
        s3_cpu: cpu_after[2] - cpu_before[2],
    }
}
