//! Small jobs in the Manager mode (issue 35): the state in the Manager's MongoDB — a private
//! secantusdb run as the Manager soak runs it (replica-set mode, `--sync-on-commit`) — with the
//! Worker's connections to it through a [`StatementCounter`], so one run gives the jobs per
//! second, the MongoDB commands per job (and which) and the CPU per job of the Worker and of the
//! server.
//!
//! Jobs of three rows each, created by the Manager stand-in and then published, in a closed loop
//! that keeps twice as many outstanding as the replicas run at once (so a Worker never waits
//! for the bench's own insert and publish); their `job.completed` events are consumed. Counted
//! after a warm-up. The commands include every background pass the Worker made in the window
//! (the repairer's, the sweeper's; the heartbeats' `hello`s are counted apart, as pings).
//!
//! `BENCH_MANAGER_JOBS` (default 500, after 50 unmeasured), `BENCH_MANAGER_REPLICAS` (1) and
//! `BENCH_MANAGER_CONCURRENCY` (`RABBITMQ_NUMBERS_OF_WORKERS` of each: 5, the Worker's default;
//! the soak's replicas run 3) change the load.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Bson, Document};
use testkit::manager::{Manager, NewJob};
use testkit::secantus::PrivateSecantus;
use uuid::Uuid;

use super::knobs;
use super::procfs;
use super::stats::{ms, percentile};
use crate::harness::{free_port, Protocol, StatementCounter, Tally, WorkerProcess, World};

/// Jobs completed before the measurement starts.
const WARMUP: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with `make bench`"]
async fn manager_jobs() {
    let jobs = knobs::number("BENCH_MANAGER_JOBS", 500);
    let replicas = knobs::number("BENCH_MANAGER_REPLICAS", 1);
    let concurrency = knobs::number("BENCH_MANAGER_CONCURRENCY", 5);
    let world = World::new().await;
    let server = tokio::task::spawn_blocking(PrivateSecantus::start_durable)
        .await
        .expect("start the private secantusdb");
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?directConnection=true",
        server.port
    ))
    .await
    .expect("MongoDB client");
    let name = format!("fetcher_bench_{}", world.id);
    let manager = Manager::new(client.database(&name));
    manager.ensure_indexes().await;
    let counter = StatementCounter::start(
        SocketAddr::from(([127, 0, 0, 1], server.port)),
        Protocol::Mongo,
    )
    .await;

    let mut workers = Vec::new();
    for _ in 0..replicas {
        let port = free_port();
        let env = manager_env(&world, port, counter.port(), &name, concurrency);
        let worker = WorkerProcess::spawn(env, port);
        worker.wait_ready(Duration::from_secs(90)).await;
        workers.push(worker);
    }
    let mut events = world.listen().await;
    let total = WARMUP + jobs;
    let outstanding_target = 2 * replicas * concurrency;
    let mut outstanding: HashMap<String, Instant> = HashMap::new();
    let mut published = 0;
    while published < outstanding_target.min(total) {
        send(&world, &manager, &mut outstanding).await;
        published += 1;
    }
    let (mut done, mut latencies) = (0, Vec::with_capacity(jobs));
    let mut start: Option<(Reading, Tally)> = None;
    while done < total {
        let event = events
            .next(Duration::from_secs(120))
            .await
            .expect("a job ended within 120 s");
        let Some(sent) = outstanding.remove(&event.text("ce-subject")) else {
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
            start = Some((Reading::now(&workers, &server), counter.tally()));
        }
        if published < total {
            send(&world, &manager, &mut outstanding).await;
            published += 1;
        }
    }
    let end = Reading::now(&workers, &server);
    let tally = counter.tally();
    let (start, tally_start) = start.expect("the warm-up ended");
    let tally = tally.since(&tally_start);
    let wall = end.at.duration_since(start.at).as_secs_f64();
    drop(workers);

    let per_job = |x: f64| x / jobs as f64;
    let mut by_command: BTreeMap<&str, usize> = BTreeMap::new();
    for statement in &tally.statements {
        *by_command.entry(statement.as_str()).or_default() += 1;
    }
    println!(
        "\nManager mode, {replicas} replica(s) x {concurrency} at once, {jobs} small jobs after {WARMUP} unmeasured (load {}):",
        load_average()
    );
    println!(
        "  {:.1} jobs/s   latency p50 {:.0} ms   p99 {:.0} ms",
        jobs as f64 / wall,
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
    );
    println!(
        "  MongoDB commands per job {:.2} (round trips; besides: {:.2} pings per job)",
        per_job(tally.statements.len() as f64),
        per_job(tally.pings as f64),
    );
    for (command, count) in &by_command {
        println!("    {:>6.2}  {command}", per_job(*count as f64));
    }
    println!(
        "  CPU ms per job: Worker(s) {:.1}, secantusdb {:.1}; cores busy: Worker(s) {:.2}, secantusdb {:.2}, machine {:.2} of {}",
        per_job(end.workers - start.workers) * 1000.0,
        per_job(end.server - start.server) * 1000.0,
        (end.workers - start.workers) / wall,
        (end.server - start.server) / wall,
        (end.machine - start.machine) / wall,
        end.cpus,
    );
    drop(server);
    client.database(&name).drop().await.ok();
    world.cleanup().await;
}

/// The world's environment in the Manager mode, the Worker's MongoDB at `mongo_port`.
fn manager_env(
    world: &World,
    port: u16,
    mongo_port: u16,
    name: &str,
    concurrency: usize,
) -> BTreeMap<String, String> {
    let mut env = world.env(port);
    env.remove("DATABASE_URL");
    env.remove("API_PORT");
    for (key, value) in [
        ("MONGO_URI", "mongodb".to_owned()),
        ("MONGO_HOST", "127.0.0.1".to_owned()),
        ("MONGO_PORT", mongo_port.to_string()),
        ("MONGO_NAME", name.to_owned()),
        // The replica set advertises the server's own address; the driver must keep to the
        // counter's.
        ("MONGO_PARAMETERS", "directConnection=true".to_owned()),
        ("MONGO_MAX_POOL_SIZE", "10".to_owned()),
        ("ALLOW_INSECURE_TLS", "true".to_owned()),
        ("RABBITMQ_NUMBERS_OF_WORKERS", concurrency.to_string()),
        // The defaults: the world's are the tests' faster ones.
        ("JOB_LEASE_SEC", "30".to_owned()),
        ("OUTBOX_REPAIR_INTERVAL_SEC", "30".to_owned()),
        ("OUTBOX_REPAIR_GRACE_SEC", "10".to_owned()),
        ("LOG_LEVEL", "warn".to_owned()),
    ] {
        env.insert(key.to_owned(), value);
    }
    env
}

/// Creates one small job as the Manager does, then publishes its message, noting when.
async fn send(world: &World, manager: &Manager, outstanding: &mut HashMap<String, Instant>) {
    let job_id = Uuid::now_v7();
    let fields: Vec<Bson> = ["id", "amount", "memo"]
        .into_iter()
        .map(Bson::from)
        .collect();
    let request = NewJob {
        mapped_fields: doc! {"src": {"payments": fields}},
        filters: Document::new(),
        metadata: doc! {"source": "bench", "benchJob": job_id.to_string()},
    };
    manager
        .create_job_as(job_id, &request)
        .await
        .expect("the Manager creates the job");
    let body = world.job_body(job_id, "src", "payments", &["id", "amount", "memo"]);
    outstanding.insert(job_id.to_string(), Instant::now());
    world.submit(&body, None, &[]).await;
}

/// CPU seconds so far of the Workers, the server and the machine.
struct Reading {
    at: Instant,
    workers: f64,
    server: f64,
    machine: f64,
    cpus: usize,
}

impl Reading {
    fn now(workers: &[WorkerProcess], server: &PrivateSecantus) -> Reading {
        let (machine, cpus) = procfs::machine_busy_seconds();
        Reading {
            at: Instant::now(),
            workers: workers
                .iter()
                .filter_map(|w| procfs::cpu_seconds(w.pid()))
                .sum(),
            server: server
                .pid()
                .and_then(procfs::cpu_seconds)
                .unwrap_or_default(),
            machine,
            cpus,
        }
    }
}

/// `/proc/loadavg`'s three averages, for the report (other builds share the machine).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
