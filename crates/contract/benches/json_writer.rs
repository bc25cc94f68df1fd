//! Benchmark: streaming a 100,000-row result JSON with our Go-compatible writer versus
//! `serde_json::to_writer_pretty`, both from the same in-memory rows, in one process run.
//!
//! Run: `cargo bench -p contract --bench json_writer`. A plain harness (no criterion): warm-up,
//! then interleaved timed iterations of each writer; prints the median, throughput and ratio.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use contract::json::{JsonWriter, Style};
use serde::Serialize;

const ROWS: usize = 100_000;
const WARMUP: usize = 3;
const ITERATIONS: usize = 21;

/// One extracted row. Fields are declared in byte order of their names so that serde's derive
/// emits the same member order as our writer (Go sorts keys; the engine sorts columns once).
#[derive(Serialize)]
struct Payment {
    account_id: u64,
    amount: String,
    attempts: i64,
    created_at: String,
    id: i64,
    memo: String,
    rate: f64,
    reversed_at: Option<String>,
    settled: bool,
}

fn rows() -> Vec<Payment> {
    (0..ROWS)
        .map(|i| {
            let n = i as u64;
            Payment {
                account_id: 18_000_000_000_000_000_000 + n * 7919,
                amount: format!("{}.{:02}", (n * 7331) % 1_000_000, n % 100),
                attempts: (i % 5) as i64,
                created_at: format!(
                    "2026-07-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                    1 + i % 28,
                    i % 24,
                    i % 60,
                    (i * 7) % 60,
                    i % 1000
                ),
                id: i as i64 - 50_000,
                memo: format!("Payment <ref {i}> & settlement café №{} — ok", i % 97),
                rate: (i % 10_000) as f64 / 7.0 + 0.001,
                reversed_at: None,
                settled: i % 3 == 0,
            }
        })
        .collect()
}

/// Our streaming writer: rows are written one by one, as the extraction engine does.
fn ours(rows: &[Payment], out: &mut Vec<u8>) {
    write_ours(rows, out).expect("writing into a Vec cannot fail");
}

fn write_ours(rows: &[Payment], out: &mut Vec<u8>) -> contract::json::Result<()> {
    let mut w = JsonWriter::new(out, Style::Indented);
    w.begin_object()?;
    w.key("pg")?;
    w.begin_object()?;
    w.key("payments")?;
    w.begin_array()?;
    for row in rows {
        w.begin_object()?;
        w.key("account_id")?;
        w.u64(row.account_id)?;
        w.key("amount")?;
        w.string(&row.amount)?;
        w.key("attempts")?;
        w.i64(row.attempts)?;
        w.key("created_at")?;
        w.string(&row.created_at)?;
        w.key("id")?;
        w.i64(row.id)?;
        w.key("memo")?;
        w.string(&row.memo)?;
        w.key("rate")?;
        w.f64(row.rate)?;
        w.key("reversed_at")?;
        match &row.reversed_at {
            Some(at) => w.string(at)?,
            None => w.null()?,
        }
        w.key("settled")?;
        w.bool(row.settled)?;
        w.end_object()?;
    }
    w.end_array()?;
    w.end_object()?;
    w.end_object()?;
    w.finish().map(drop)
}

/// serde_json's pretty printer on the same rows through `#[derive(Serialize)]`.
fn serde(rows: &[Payment], out: &mut Vec<u8>) {
    let result = BTreeMap::from([("pg", BTreeMap::from([("payments", rows)]))]);
    serde_json::to_writer_pretty(out, &result).expect("writing into a Vec cannot fail");
}

fn time_ours(rows: &[Payment], out: &mut Vec<u8>) -> Duration {
    out.clear();
    let start = Instant::now();
    ours(black_box(rows), out);
    let elapsed = start.elapsed();
    black_box(out);
    elapsed
}

fn time_serde(rows: &[Payment], out: &mut Vec<u8>) -> Duration {
    out.clear();
    let start = Instant::now();
    serde(black_box(rows), out);
    let elapsed = start.elapsed();
    black_box(out);
    elapsed
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn main() {
    let rows = rows();

    // Each writer gets its own output buffer, allocated and touched once, then cleared before
    // every run: the timings measure encoding, not page faults of a fresh 35 MB allocation.
    let mut ours_out = Vec::new();
    let mut serde_out = Vec::new();
    ours(&rows, &mut ours_out);
    serde(&rows, &mut serde_out);
    // Both documents hold the same data (ours escapes `<>&`, so it is a little longer).
    let parsed_ours: serde_json::Value = serde_json::from_slice(&ours_out).unwrap();
    let parsed_serde: serde_json::Value = serde_json::from_slice(&serde_out).unwrap();
    assert_eq!(
        parsed_ours, parsed_serde,
        "both writers must encode the same data"
    );
    let (ours_len, serde_len) = (ours_out.len(), serde_out.len());

    for _ in 0..WARMUP {
        ours_out.clear();
        ours(&rows, &mut ours_out);
        serde_out.clear();
        serde(&rows, &mut serde_out);
    }
    let mut ours_times = Vec::with_capacity(ITERATIONS);
    let mut serde_times = Vec::with_capacity(ITERATIONS);
    for iteration in 0..ITERATIONS {
        // Alternate which writer goes first, so neither always runs on the other's cache state.
        if iteration % 2 == 0 {
            ours_times.push(time_ours(&rows, &mut ours_out));
            serde_times.push(time_serde(&rows, &mut serde_out));
        } else {
            serde_times.push(time_serde(&rows, &mut serde_out));
            ours_times.push(time_ours(&rows, &mut ours_out));
        }
    }
    let ours_median = median(&mut ours_times);
    let serde_median = median(&mut serde_times);

    let report = |name: &str, time: Duration, bytes: usize| {
        let ms = time.as_secs_f64() * 1e3;
        let mb_s = bytes as f64 / 1e6 / time.as_secs_f64();
        println!("{name:<34} median {ms:8.2} ms  {mb_s:8.1} MB/s  ({bytes} bytes)");
    };
    println!("json_writer: {ROWS} rows x 9 columns, indented, into a reused Vec<u8>");
    println!(
        "{WARMUP} warm-up + {ITERATIONS} timed iterations each, interleaved, order alternating"
    );
    report("contract::json::JsonWriter", ours_median, ours_len);
    report("serde_json::to_writer_pretty", serde_median, serde_len);
    println!(
        "ratio ours/serde_json (time): {:.3}",
        ours_median.as_secs_f64() / serde_median.as_secs_f64()
    );
}
