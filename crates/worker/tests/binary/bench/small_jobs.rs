//! Small jobs through 1, 2 and 4 Worker replicas (issue 17): jobs of three rows each, sent in a
//! closed loop that keeps as many jobs outstanding as the replicas run at once (5 each, the
//! Worker's default `RABBITMQ_NUMBERS_OF_WORKERS`); latency from the signed message to its
//! verified `job.completed` at a consumer.
//!
//! Beside them, in the same run and at the same concurrency, the ceilings a job meets:
//! a bare `aws-sdk-s3` loop of 1 KiB `PutObject`s (each job writes one object) and the
//! PostgreSQL transactions a job commits (claim, terminal record with its outbox row, and the
//! mark of its event published), through the `outbox` crate alone. CPU seconds per second of
//! each process (Workers, PostgreSQL, RabbitMQ, the S3 server, this bench) say what saturates.
//!
//! `BENCH_SMALL_JOBS` (default 2,000 per configuration, after 100 unmeasured),
//! `BENCH_REPLICAS` (`1,2,4`) and `BENCH_AT_ONCE` (each replica's `RABBITMQ_NUMBERS_OF_WORKERS`,
//! default 5) change the load. Plots: `docs/bench/small-jobs-throughput.svg`
//! and `docs/bench/small-jobs-latency.svg`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult};
use contract::lifecycle::ExecutionStatus;
use outbox::{Claim, ClaimRequest, ExecutionReport, Recorded, TerminalOutcome, TerminalRecord};
use serde_json::{Map, Value};
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use super::knobs;
use super::plot;
use super::procfs;
use super::stats::{ms, percentile};
use crate::harness::{metric_sum, s3_client, WorkerProcess, World, SOURCE};

/// Jobs each replica runs at once: its `RABBITMQ_NUMBERS_OF_WORKERS` (which is also its
/// prefetch), `BENCH_AT_ONCE` or the Worker's default, 5.
fn per_replica() -> usize {
    knobs::number("BENCH_AT_ONCE", 5).max(1)
}

/// Jobs completed before the measurement starts (connections, caches, JIT of the servers).
const WARMUP: usize = 100;

/// Jobs outstanding with `replicas` Workers: as many as they run at once.
fn concurrency(replicas: usize) -> usize {
    replicas * per_replica()
}

/// One configuration's measurement.
pub struct Load {
    pub replicas: usize,
    pub jobs_per_second: f64,
    pub latencies: Vec<Duration>,
    pub put_objects_per_second: f64,
    pub commits_per_second: f64,
    cpu: Cpu,
    cpus: usize,
}

/// CPU of each process: seconds so far in a reading, seconds per second of wall time (cores
/// busy) over the measured window.
#[derive(Clone, Copy)]
struct Cpu {
    workers: f64,
    postgres: f64,
    /// PostgreSQL's backends of this bench's databases and its shared processes.
    postgres_ours: f64,
    /// PostgreSQL's backends of the state database alone and its shared processes (the bench's
    /// source is a second database of the same server).
    postgres_state: f64,
    rabbitmq: f64,
    s3: f64,
    bench: f64,
    /// The whole machine (all but idle and iowait).
    machine: f64,
}

/// A reading of every process's CPU seconds so far.
struct CpuReading {
    at: Instant,
    seconds: Cpu,
    cpus: usize,
}

impl CpuReading {
    fn now(world: &World, workers: &[WorkerProcess]) -> CpuReading {
        let (machine, cpus) = procfs::machine_busy_seconds();
        let seconds = Cpu {
            workers: workers
                .iter()
                .filter_map(|w| procfs::cpu_seconds(w.pid()))
                .sum(),
            postgres: procfs::cpu_seconds_of("postgres"),
            postgres_ours: procfs::postgres_cpu_seconds_for(&[&world.state_db, &world.source_db]),
            postgres_state: procfs::postgres_cpu_seconds_for(&[&world.state_db]),
            rabbitmq: procfs::cpu_seconds_of("beam.smp"),
            s3: procfs::cpu_seconds_of("s3s-fs"),
            bench: procfs::cpu_seconds(std::process::id()).unwrap_or_default(),
            machine,
        };
        CpuReading {
            at: Instant::now(),
            seconds,
            cpus,
        }
    }

    /// Cores busy per process between `start` and this reading.
    fn since(&self, start: &CpuReading) -> Cpu {
        let wall = self.at.duration_since(start.at).as_secs_f64();
        let (a, b) = (&start.seconds, &self.seconds);
        let rate = |x: f64, y: f64| (y - x) / wall;
        Cpu {
            workers: rate(a.workers, b.workers),
            postgres: rate(a.postgres, b.postgres),
            postgres_ours: rate(a.postgres_ours, b.postgres_ours),
            postgres_state: rate(a.postgres_state, b.postgres_state),
            rabbitmq: rate(a.rabbitmq, b.rabbitmq),
            s3: rate(a.s3, b.s3),
            bench: rate(a.bench, b.bench),
            machine: rate(a.machine, b.machine),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench`"]
async fn small_jobs() {
    let jobs = knobs::number("BENCH_SMALL_JOBS", 2_000);
    let replica_counts = knobs::list("BENCH_REPLICAS", "1,2,4");
    let world = World::new().await;
    let mut loads = Vec::new();
    for replicas in replica_counts.into_iter().map(|n| n as usize) {
        let (jobs_per_second, latencies, cpu, cpus) = run_replicas(&world, replicas, jobs).await;
        let concurrency = concurrency(replicas);
        let put_objects_per_second = put_object_rate(&world.bucket, concurrency, jobs).await;
        let commits_per_second = commit_rate(&world, concurrency, jobs).await;
        loads.push(Load {
            replicas,
            jobs_per_second,
            latencies,
            put_objects_per_second,
            commits_per_second,
            cpu,
            cpus,
        });
    }
    world.cleanup().await;

    println!("\nsmall jobs (3 rows each), {jobs} per configuration after {WARMUP} unmeasured:");
    let one = loads[0].jobs_per_second;
    for load in &loads {
        let cpu = &load.cpu;
        println!(
            "{} replica(s), {} at once: {:>6.0} jobs/s ({:.2}x one replica)   p50 {:>5.1} ms   p99 {:>6.1} ms",
            load.replicas,
            concurrency(load.replicas),
            load.jobs_per_second,
            load.jobs_per_second / one,
            ms(percentile(&load.latencies, 0.5)),
            ms(percentile(&load.latencies, 0.99)),
        );
        println!(
            "    bare 1 KiB PutObject {:>6.0}/s (jobs = {:.2}x)   PostgreSQL claim + terminal + published {:>6.0}/s",
            load.put_objects_per_second,
            load.jobs_per_second / load.put_objects_per_second,
            load.commits_per_second,
        );
        println!(
            "    CPU (cores busy of {}): machine {:.2} = workers {:.2}, postgres {:.2}, rabbitmq {:.2}, s3 {:.2}, bench {:.2}, other {:.2}",
            load.cpus,
            cpu.machine,
            cpu.workers,
            cpu.postgres,
            cpu.rabbitmq,
            cpu.s3,
            cpu.bench,
            cpu.machine - cpu.workers - cpu.postgres - cpu.rabbitmq - cpu.s3 - cpu.bench,
        );
        // Cores busy divided by jobs per second: CPU seconds per job.
        let per_job = |cores: f64| cores / load.jobs_per_second * 1000.0;
        println!(
            "    CPU ms per job: workers {:.2}, postgres {:.2} (this bench's backends and the shared processes; all backends {:.2}; the state database's backends and the shared processes {:.2}), rabbitmq {:.2}, s3 {:.2}",
            per_job(cpu.workers),
            per_job(cpu.postgres_ours),
            per_job(cpu.postgres),
            per_job(cpu.postgres_state),
            per_job(cpu.rabbitmq),
            per_job(cpu.s3),
        );
    }
    plot::small_jobs(&loads);
}

/// Runs `jobs` (after [`WARMUP`]) through `replicas` fresh Workers with `replicas x
/// per_replica()` outstanding: jobs per second, each job's latency, and the CPU used.
async fn run_replicas(
    world: &World,
    replicas: usize,
    jobs: usize,
) -> (f64, Vec<Duration>, Cpu, usize) {
    let settings = vec![
        (
            "RABBITMQ_NUMBERS_OF_WORKERS".to_owned(),
            per_replica().to_string(),
        ),
        // The defaults: the world's are the tests' faster ones.
        ("JOB_LEASE_SEC".to_owned(), "30".to_owned()),
        ("OUTBOX_REPAIR_INTERVAL_SEC".to_owned(), "30".to_owned()),
        ("OUTBOX_REPAIR_GRACE_SEC".to_owned(), "10".to_owned()),
    ];
    let mut workers = Vec::new();
    for _ in 0..replicas {
        workers.push(
            world
                .start_worker_binary(&WorkerProcess::binary(), settings.clone())
                .await,
        );
    }
    let mut events = world.listen().await;
    let total = WARMUP + jobs;
    let mut outstanding: HashMap<String, Instant> = HashMap::new();
    let mut published = 0;
    while published < concurrency(replicas) {
        send(world, &mut outstanding).await;
        published += 1;
    }
    let (mut done, mut latencies, mut start) = (0, Vec::with_capacity(jobs), None);
    while done < total {
        let event = events
            .next(Duration::from_secs(60))
            .await
            .expect("a job ended within 60 s");
        let subject = event.text("ce-subject");
        let Some(sent) = outstanding.remove(&subject) else {
            continue;
        };
        assert_eq!(
            event.delivery.routing_key.as_str(),
            "job.completed",
            "{}",
            event.body()
        );
        done += 1;
        if done > WARMUP {
            latencies.push(sent.elapsed());
        } else if done == WARMUP {
            start = Some(CpuReading::now(world, &workers));
        }
        if published < total {
            send(world, &mut outstanding).await;
            published += 1;
        }
    }
    let end = CpuReading::now(world, &workers);
    let start = start.expect("the warm-up ended");
    let rate = jobs as f64 / end.at.duration_since(start.at).as_secs_f64();
    print_stages(replicas, &workers);
    drop(workers);
    (rate, latencies, end.since(&start), end.cpus)
}

/// The mean time of each stage of a job in the Workers (`fetcher_job_stage_duration_seconds`, warm-up
/// included): where a small job's time goes.
fn print_stages(replicas: usize, workers: &[WorkerProcess]) {
    let metrics: Vec<String> = workers
        .iter()
        .map(|w| w.get("/metrics").expect("metrics").1)
        .collect();
    let mean_ms = |stage: &str| {
        let label = format!("stage=\"{stage}\"");
        let sum = |name: &str| -> f64 { metrics.iter().map(|m| metric_sum(m, name, &label)).sum() };
        sum("fetcher_job_stage_duration_seconds_sum")
            / sum("fetcher_job_stage_duration_seconds_count")
            * 1000.0
    };
    let stages: Vec<String> = ["extract", "seal", "store", "record", "publish"]
        .iter()
        .map(|stage| format!("{stage} {:.1}", mean_ms(stage)))
        .collect();
    println!(
        "{replicas} replica(s): mean ms per stage in the Workers: {}",
        stages.join(", ")
    );
}

/// Sends one small job, noting when.
async fn send(world: &World, outstanding: &mut HashMap<String, Instant>) {
    let job_id = Uuid::now_v7();
    let body = world.job_body(job_id, "src", "payments", &["id", "amount", "memo"]);
    outstanding.insert(job_id.to_string(), Instant::now());
    world.submit(&body, None, &[]).await;
}

/// 1 KiB `PutObject`s from one `aws-sdk-s3` client, `concurrency` at once, `count` of them
/// (after one per task unmeasured): objects per second. Each task overwrites its own key.
async fn put_object_rate(bucket: &str, concurrency: usize, count: usize) -> f64 {
    let client = s3_client();
    let body = vec![b'x'; 1024];
    let put = |task: usize| {
        client
            .put_object()
            .bucket(bucket)
            .key(format!("bench/put-{task}"))
            .body(body.clone().into())
            .send()
    };
    for task in 0..concurrency {
        put(task).await.expect("PutObject");
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks = (0..concurrency).map(|task| {
        let next = next.clone();
        let put = &put;
        async move {
            while next.fetch_add(1, Ordering::Relaxed) < count {
                put(task).await.expect("PutObject");
            }
        }
    });
    futures_util::future::join_all(tasks).await;
    count as f64 / started.elapsed().as_secs_f64()
}

/// The PostgreSQL transactions of `count` jobs, `concurrency` at once through the `outbox`
/// crate (as a Worker's pool would): per job a claim, the terminal record with one succeeded
/// execution and the outbox row, and the outbox row marked published. Jobs per second.
async fn commit_rate(world: &World, concurrency: usize, count: usize) -> f64 {
    let pool = PgPoolOptions::new()
        .max_connections(concurrency as u32)
        .connect(world.state_url())
        .await
        .expect("state database");
    let store = outbox::Store::new(pool.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks = (0..concurrency).map(|_| {
        let (next, store) = (next.clone(), &store);
        async move {
            while next.fetch_add(1, Ordering::Relaxed) < count {
                one_job_commits(store).await;
            }
        }
    });
    futures_util::future::join_all(tasks).await;
    let rate = count as f64 / started.elapsed().as_secs_f64();
    store.close().await;
    rate
}

async fn one_job_commits(store: &outbox::Store) {
    let job_id = Uuid::now_v7();
    let owner = format!("bench-{job_id}");
    let mut metadata = Map::new();
    metadata.insert("source".into(), Value::String("bench".into()));
    let claim = store
        .claim(&ClaimRequest {
            job_id,
            tenant: None,
            request_id: None,
            metadata: &metadata,
            spec: None,
            message_sha256: None,
            timeout_seconds: None,
            owner: &owner,
            lease: Duration::from_secs(30),
            traceparent: None,
        })
        .await
        .expect("claim");
    assert!(matches!(claim, Claim::Acquired { .. }), "{claim:?}");
    let result = StoredResult {
        path: format!("external-data/{job_id}.json"),
        size_bytes: 120,
        row_count: 3,
        hmac: "9f1c".repeat(16),
    };
    let outcome = Outcome::Completed {
        result: &result,
        execution_time_ms: 5,
        completed_at: Utc::now(),
    };
    let attributes = CloudEventAttributes::new(outcome.status(), job_id, SOURCE, None, Utc::now());
    let event =
        OutboundEvent::new(job_id, &metadata, &outcome, attributes, None).expect("event body");
    let now = Utc::now();
    let recorded = store
        .record_terminal(&TerminalRecord {
            job_id,
            owner: Some(&owner),
            tenant: None,
            outcome: TerminalOutcome::Completed { result },
            event: &event,
            metadata: &metadata,
            leaves_object: false,
            publisher: &owner,
            lease: Duration::from_secs(30),
            executions: &[ExecutionReport {
                datasource: "src".into(),
                status: ExecutionStatus::Succeeded,
                row_count: 3,
                started_at: Some(now),
                ended_at: Some(now),
                error: None,
                attempts: 1,
                last_error: None,
            }],
            close: Some(outbox::Close::CANCELED),
        })
        .await
        .expect("terminal record");
    let Recorded::Inserted { outbox_id, .. } = recorded else {
        panic!("not recorded: {recorded:?}");
    };
    store
        .mark_published(&[outbox_id.serial().expect("a PostgreSQL row")], &owner)
        .await
        .expect("published");
}
