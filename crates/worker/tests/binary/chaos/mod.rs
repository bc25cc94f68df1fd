//! Chaos soak: 3 Worker replicas, each reaching PostgreSQL (state and datasource), RabbitMQ and
//! S3 through its own fault proxies, process a seeded mix of jobs while RabbitMQ restarts twice,
//! PostgreSQL (state database and datasource) restarts once, the S3 server is down for 20 s, a
//! replica is SIGKILLed three times and proxies cut, reset, stall and slow connections, and
//! cancels and deletes are sent to the replicas' control APIs (`controls.rs`). At the end every
//! job must be at its end, with exactly the events of its history (by ce-id), every accepted
//! cancel and delete must have reached its end, every completed job's object must open and
//! match its HMAC, and no other job may have an object.
//!
//! Long: `#[ignore]`d; run with `make chaos` (or
//! `cargo test -p worker --test binary -- --ignored --nocapture chaos::`). Knobs: `CHAOS_SEED` (42),
//! `CHAOS_JOBS` (2000), `CHAOS_RATE` (jobs per second submitted, 25), `CHAOS_CONTROLS` (1; 0
//! leaves out the slow jobs and the cancels and deletes of `controls.rs`), `CHAOS_RABBIT_RESTARTS`
//! (1; 0 leaves RabbitMQ running: its restarts disturb every other test on the machine),
//! `CHAOS_S3_OUTAGE` (1; 0 leaves S3 up), `CHAOS_SETTLE_SEC` (how long the end waits for every
//! job and event: 240, 720 in the Manager mode).
//!
//! The same scenario, checks and report run in the Manager mode (`manager.rs`): state in a
//! private MongoDB (secantusdb) that is stopped and started instead of PostgreSQL.

mod controls;
mod cuts;
mod manager;
mod mirror;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::FaultProxy;
use crate::harness::{self, Event, WorkerProcess, World};
use contract::envelope::{self, Route};
use futures_util::StreamExt;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use uuid::Uuid;

/// A seeded xorshift64* generator: the same seed, the same scenario.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range_ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Success,
    /// Reads the 6 s `slow` view: canceled or force-deleted while it runs.
    Slow,
    UnknownTable,
    UnknownConnection,
    InvalidBody,
    Unparseable,
}

struct Job {
    id: Uuid,
    kind: Kind,
    body: Vec<u8>,
}

/// `controls`: whether slow jobs (to be canceled or deleted while they run) are in the mix.
fn make_jobs(world: &World, rng: &mut Rng, count: usize, controls: bool) -> Vec<Job> {
    (0..count)
        .map(|_| {
            let id = Uuid::now_v7();
            let roll = rng.below(100);
            let (kind, body) = match roll {
                0..=57 => (
                    Kind::Success,
                    world.job_body(id, "src", "payments", &["id", "amount", "memo"]),
                ),
                58..=59 if controls => (Kind::Slow, world.job_body(id, "src", "slow", &["id"])),
                58..=59 => (
                    Kind::Success,
                    world.job_body(id, "src", "payments", &["id", "amount", "memo"]),
                ),
                60..=71 => (
                    Kind::UnknownTable,
                    world.job_body(id, "src", "missing_table", &["id"]),
                ),
                72..=81 => (
                    Kind::UnknownConnection,
                    world.job_body(id, "nope", "payments", &["id"]),
                ),
                82..=92 => (
                    Kind::InvalidBody,
                    format!(r#"{{"jobId":"{id}","mappedFields":{{}}}}"#).into_bytes(),
                ),
                _ => (
                    Kind::Unparseable,
                    format!(r#"{{"jobId":"{id}","mappedFields": {{"src": [broken"#).into_bytes(),
                ),
            };
            Job { id, kind, body }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Replicas behind proxies

struct Replica {
    index: usize,
    /// To PostgreSQL: the state database (PostgreSQL soak) and the datasource (both soaks).
    pg: FaultProxy,
    /// To the Manager's MongoDB, in the Manager mode.
    mongo: Option<manager::MongoLink>,
    amqp: FaultProxy,
    s3: FaultProxy,
    process: Option<WorkerProcess>,
    generation: usize,
    /// Its control API's port, the same across restarts.
    api_port: u16,
}

impl Replica {
    fn env(&self, world: &World, port: u16) -> BTreeMap<String, String> {
        let mut env = world.env(port);
        let overrides = [
            (
                "DATABASE_URL",
                format!(
                    "postgres://postgres@127.0.0.1:{}/{}",
                    self.pg.port(),
                    world.state_db
                ),
            ),
            ("DATABASE_MAX_CONNECTIONS", "6".into()),
            ("RABBITMQ_HOST", "127.0.0.1".into()),
            ("RABBITMQ_PORT_AMQP", self.amqp.port().to_string()),
            (
                "OBJECT_STORAGE_ENDPOINT",
                format!("http://127.0.0.1:{}", self.s3.port()),
            ),
            ("DATASOURCE_SRC_PORT", self.pg.port().to_string()),
            ("JOB_LEASE_SEC", "5".into()),
            ("API_PORT", self.api_port.to_string()),
            ("OUTBOX_REPAIR_INTERVAL_SEC", "2".into()),
            ("OUTBOX_REPAIR_GRACE_SEC", "1".into()),
            ("ENGINE_EXTRACTION_TIMEOUT_SEC", "30".into()),
            (
                "WORKER_ID",
                format!("chaos-r{}-g{}", self.index, self.generation),
            ),
        ];
        for (k, v) in overrides {
            env.insert(k.to_owned(), v);
        }
        match &self.mongo {
            Some(link) => link.env(&mut env),
            None => {
                for (k, v) in mirror::env(world) {
                    env.insert(k.to_owned(), v);
                }
            }
        }
        env
    }

    fn spawn(&mut self, world: &World) {
        self.generation += 1;
        let port = harness::free_port();
        self.process = Some(WorkerProcess::spawn(self.env(world, port), port));
    }

    fn proxies(&self) -> Vec<(&'static str, &FaultProxy)> {
        let mut proxies = vec![("pg", &self.pg), ("amqp", &self.amqp), ("s3", &self.s3)];
        if let Some(link) = &self.mongo {
            proxies.push(("mongo", &link.proxy));
        }
        proxies
    }
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ restarts, always undone

struct RabbitDown;

impl RabbitDown {
    fn stop() -> RabbitDown {
        let guard = RabbitDown;
        let status = Command::new("rabbitmqctl")
            .arg("stop_app")
            .output()
            .expect("rabbitmqctl");
        assert!(status.status.success(), "rabbitmqctl stop_app: {status:?}");
        guard
    }
}

impl Drop for RabbitDown {
    fn drop(&mut self) {
        for _ in 0..3 {
            if let Ok(out) = Command::new("rabbitmqctl").arg("start_app").output() {
                if out.status.success() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        // Wait until the port answers AMQP again.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if Command::new("rabbitmqctl")
                .args(["await_startup", "--timeout", "5"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
            {
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A PostgreSQL restart (the server itself: state database and datasource), always undone

struct PostgresDown {
    cluster: String,
}

impl PostgresDown {
    /// The machine's cluster version (`/etc/postgresql/<version>/main`).
    fn cluster() -> String {
        std::fs::read_dir("/etc/postgresql")
            .expect("/etc/postgresql: PostgreSQL is not installed as a Debian cluster")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .max()
            .expect("a PostgreSQL cluster")
    }

    fn ctl(cluster: &str, args: &[&str]) -> std::process::Output {
        Command::new("pg_ctlcluster")
            .args(["--skip-systemctl-redirect", cluster, "main"])
            .args(args)
            .output()
            .expect("pg_ctlcluster")
    }

    fn stop() -> PostgresDown {
        let guard = PostgresDown {
            cluster: Self::cluster(),
        };
        let out = Self::ctl(&guard.cluster, &["stop", "-m", "fast"]);
        assert!(out.status.success(), "pg_ctlcluster stop: {out:?}");
        guard
    }
}

impl Drop for PostgresDown {
    fn drop(&mut self) {
        for _ in 0..3 {
            if Self::ctl(&self.cluster, &["start"]).status.success() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        // Wait until it accepts connections again.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline
            && std::net::TcpStream::connect(("127.0.0.1", 5432)).is_err()
        {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The S3 server stopped, always started again (by the script that starts it for the tests)

struct S3Down;

impl S3Down {
    fn stop() -> S3Down {
        let out = Command::new("pkill")
            .args(["-KILL", "-x", "s3s-fs"])
            .output()
            .expect("pkill");
        assert!(out.status.success(), "no s3s-fs to stop: {out:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", 9000)).is_ok() {
            assert!(Instant::now() < deadline, "s3s-fs still answers");
            std::thread::sleep(Duration::from_millis(100));
        }
        S3Down
    }
}

impl Drop for S3Down {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/services.sh");
        let out = Command::new("bash").args([script, "s3"]).output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!("[chaos] restarting s3s-fs failed: {out:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events: a durable queue (it survives broker restarts), consumed with reconnection

#[derive(Default)]
struct Seen {
    /// (ce-id, body bytes, redelivered, received at)
    events: Vec<(String, Vec<u8>, bool, Instant)>,
    bad_signatures: usize,
    last: Option<Instant>,
}

async fn amqp_channel() -> Option<(Connection, Channel)> {
    let conn = Connection::connect(&testkit::amqp::amqp_uri(), ConnectionProperties::default())
        .await
        .ok()?;
    let channel = conn.create_channel().await.ok()?;
    Some((conn, channel))
}

async fn declare_listener(channel: &Channel, exchange: &str, queue: &str) -> lapin::Result<()> {
    channel
        .exchange_declare(
            exchange.into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    channel
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    channel
        .queue_bind(
            queue.into(),
            exchange.into(),
            "job.*".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok(())
}

async fn listen_forever(
    exchange: String,
    queue: String,
    keys: crypto::KeySet,
    seen: Arc<Mutex<Seen>>,
) {
    loop {
        let Some((_conn, channel)) = amqp_channel().await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        if declare_listener(&channel, &exchange, &queue).await.is_err() {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        let _ = channel.basic_qos(200, BasicQosOptions::default()).await;
        let Ok(mut consumer) = channel
            .basic_consume(
                queue.as_str().into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
        else {
            continue;
        };
        while let Some(Ok(delivery)) = consumer.next().await {
            let tag = delivery.delivery_tag;
            let event = Event { delivery };
            let verified = event.verify(&keys).is_ok();
            let ce_id = match event.header("ce-id") {
                Some(_) => event.text("ce-id"),
                None => String::from("<none>"),
            };
            {
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                if !verified {
                    seen.bad_signatures += 1;
                }
                seen.events.push((
                    ce_id,
                    event.delivery.data.clone(),
                    event.delivery.redelivered,
                    Instant::now(),
                ));
                seen.last = Some(Instant::now());
            }
            let _ = channel.basic_ack(tag, BasicAckOptions::default()).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Submission: signed, confirmed, retried through outages

async fn submit_all(
    world_queue: String,
    keys: crypto::KeySet,
    jobs: Vec<(Uuid, Vec<u8>)>,
    rate: u64,
) -> HashMap<Uuid, Instant> {
    let mut confirmed = HashMap::new();
    let mut channel: Option<(Connection, Channel)> = None;
    let start = Instant::now();
    for (i, (id, body)) in jobs.iter().enumerate() {
        let due = start + Duration::from_micros(i as u64 * 1_000_000 / rate.max(1));
        tokio::time::sleep_until(due.into()).await;
        loop {
            if channel.is_none() {
                if let Some((conn, ch)) = amqp_channel().await {
                    if ch
                        .confirm_select(ConfirmSelectOptions::default())
                        .await
                        .is_ok()
                    {
                        channel = Some((conn, ch));
                    }
                }
            }
            let Some((_, ch)) = channel.as_ref() else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let route = Route {
                tenant: "",
                exchange: "",
                routing_key: &world_queue,
            };
            let signature = envelope::sign(chrono::Utc::now().timestamp(), &route, body, |p| {
                keys.internal_hmac().sign_hex(p)
            });
            let mut table = FieldTable::default();
            for (name, value) in [
                (envelope::SIGNATURE_HEADER, signature.signature.clone()),
                (envelope::TIMESTAMP_HEADER, signature.timestamp.clone()),
                (envelope::VERSION_HEADER, signature.version.to_owned()),
            ] {
                table.insert(name.into(), AMQPValue::LongString(LongString::from(value)));
            }
            let sent = async {
                let confirm = ch
                    .basic_publish(
                        "".into(),
                        world_queue.as_str().into(),
                        BasicPublishOptions {
                            mandatory: true,
                            ..Default::default()
                        },
                        body,
                        BasicProperties::default()
                            .with_delivery_mode(2)
                            .with_headers(table),
                    )
                    .await?;
                let confirmation = confirm.await?;
                Ok::<bool, lapin::Error>(
                    confirmation.is_ack() && confirmation.take_message().is_none(),
                )
            };
            match tokio::time::timeout(Duration::from_secs(10), sent).await {
                Ok(Ok(true)) => {
                    confirmed.insert(*id, Instant::now());
                    break;
                }
                _ => {
                    channel = None;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        }
    }
    confirmed
}

// ---------------------------------------------------------------------------------------------
// Faults

#[derive(Clone, Copy, Debug)]
enum Fault {
    RabbitRestart,
    PostgresRestart,
    /// The Manager's MongoDB stopped (SIGKILL or SIGTERM) and started again.
    MongoRestart {
        kill: bool,
    },
    S3Down,
    KillReplica,
    ProxyCut,
    ProxyReset,
    ProxyStall,
    ProxyLatency,
}

async fn run_fault(
    fault: Fault,
    rng: &mut Rng,
    world: &World,
    backend: &Backend,
    replicas: &Arc<tokio::sync::Mutex<Vec<Replica>>>,
    log: &mut Vec<String>,
    t0: Instant,
) {
    let at = t0.elapsed().as_secs_f64();
    match fault {
        Fault::RabbitRestart => {
            let outage = rng.range_ms(4000, 6000);
            log.push(format!(
                "{at:6.1}s RabbitMQ stop_app for {outage:?}, then start_app"
            ));
            let guard = tokio::task::spawn_blocking(RabbitDown::stop)
                .await
                .expect("stop_app");
            tokio::time::sleep(outage).await;
            tokio::task::spawn_blocking(move || drop(guard))
                .await
                .expect("start_app");
        }
        Fault::PostgresRestart => {
            let outage = rng.range_ms(4000, 6000);
            log.push(format!(
                "{at:6.1}s PostgreSQL stopped (fast shutdown) for {outage:?}, then started"
            ));
            let guard = tokio::task::spawn_blocking(PostgresDown::stop)
                .await
                .expect("stop PostgreSQL");
            tokio::time::sleep(outage).await;
            tokio::task::spawn_blocking(move || drop(guard))
                .await
                .expect("start PostgreSQL");
        }
        Fault::MongoRestart { kill } => {
            let outage = rng.range_ms(4000, 6000);
            let Backend::Manager(side) = backend else {
                panic!("a MongoDB restart in the PostgreSQL soak");
            };
            log.push(format!(
                "{at:6.1}s MongoDB {} for {outage:?}, then started",
                if kill {
                    "SIGKILLed"
                } else {
                    "stopped (SIGTERM)"
                }
            ));
            side.restart(kill, outage).await;
        }
        Fault::S3Down => {
            log.push(format!(
                "{at:6.1}s S3 server stopped (s3s-fs killed) for 20 s, then started"
            ));
            let guard = tokio::task::spawn_blocking(S3Down::stop)
                .await
                .expect("stop S3");
            tokio::time::sleep(Duration::from_secs(20)).await;
            tokio::task::spawn_blocking(move || drop(guard))
                .await
                .expect("start S3");
        }
        Fault::KillReplica => {
            let down = rng.range_ms(500, 2500);
            log.push(format!(
                "{at:6.1}s replica 0 SIGKILLed, restarted after {down:?}"
            ));
            let mut reps = replicas.lock().await;
            if let Some(mut p) = reps[0].process.take() {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
            drop(reps);
            tokio::time::sleep(down).await;
            replicas.lock().await[0].spawn(world);
        }
        Fault::ProxyCut => {
            let r = rng.below(3) as usize;
            let which = rng.below(proxy_count(replicas).await) as usize;
            let bytes = 100 + rng.below(4000);
            let hold = rng.range_ms(1000, 3000);
            let reps = replicas.lock().await;
            let (name, proxy) = reps[r].proxies()[which];
            log.push(format!(
                "{at:6.1}s replica {r} {name} proxy: connections cut after {bytes} more bytes, for {hold:?}"
            ));
            proxy.set_cut_after(Some(bytes));
            drop(reps);
            tokio::time::sleep(hold).await;
            replicas.lock().await[r].proxies()[which].1.heal();
        }
        Fault::ProxyStall => {
            // Longer than the job lease: another replica may take the job over meanwhile.
            let r = rng.below(3) as usize;
            let which = rng.below(proxy_count(replicas).await) as usize;
            let hold = rng.range_ms(6000, 9000);
            let reps = replicas.lock().await;
            let (name, proxy) = reps[r].proxies()[which];
            log.push(format!(
                "{at:6.1}s replica {r} {name} proxy: stalled for {hold:?}"
            ));
            proxy.set_stall(true);
            drop(reps);
            tokio::time::sleep(hold).await;
            replicas.lock().await[r].proxies()[which].1.heal();
        }
        Fault::ProxyLatency => {
            let r = rng.below(3) as usize;
            let which = rng.below(proxy_count(replicas).await) as usize;
            let latency = rng.range_ms(100, 600);
            let hold = rng.range_ms(4000, 8000);
            let reps = replicas.lock().await;
            let (name, proxy) = reps[r].proxies()[which];
            log.push(format!(
                "{at:6.1}s replica {r} {name} proxy: {latency:?} per chunk for {hold:?}"
            ));
            proxy.set_latency(latency);
            drop(reps);
            tokio::time::sleep(hold).await;
            replicas.lock().await[r].proxies()[which].1.heal();
        }
        Fault::ProxyReset => {
            let r = rng.below(3) as usize;
            let which = rng.below(proxy_count(replicas).await) as usize;
            let reps = replicas.lock().await;
            let (name, proxy) = reps[r].proxies()[which];
            log.push(format!(
                "{at:6.1}s replica {r} {name} proxy: every connection reset"
            ));
            proxy.reset_all();
        }
    }
}

/// How many proxies each replica has (the PostgreSQL soak's three, and MongoDB's in the Manager
/// mode): the seeded choice of a proxy is among them.
async fn proxy_count(replicas: &Arc<tokio::sync::Mutex<Vec<Replica>>>) -> u64 {
    replicas.lock().await[0].proxies().len() as u64
}

// ---------------------------------------------------------------------------------------------
// Where the state is: the soak's one difference between its two modes

enum Backend {
    /// The PostgreSQL state database of the world.
    Postgres,
    /// The Manager mode: the Manager's MongoDB (a private secantusdb).
    Manager(manager::ManagerSide),
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Postgres => "PostgreSQL",
            Backend::Manager(_) => "Manager mode (MongoDB)",
        }
    }

    /// Every job's end as the state holds it.
    async fn states(&self, world: &World, ids: &[Uuid]) -> HashMap<Uuid, JobEnd> {
        match self {
            Backend::Postgres => {
                let rows: Vec<EndRow> = sqlx::query_as(
                    "SELECT job_id, status, result_path, result_hmac, status_before_deletion
                         FROM jobs WHERE job_id = ANY($1)",
                )
                .bind(ids)
                .fetch_all(&world.state)
                .await
                .expect("jobs");
                rows.into_iter()
                    .map(|(id, status, path, hmac, before)| {
                        (
                            id,
                            JobEnd {
                                status,
                                path,
                                hmac,
                                before,
                            },
                        )
                    })
                    .collect()
            }
            Backend::Manager(side) => side.states(ids).await,
        }
    }

    /// The distinct error messages of `ids`.
    async fn errors(&self, world: &World, ids: &[Uuid]) -> Vec<String> {
        match self {
            Backend::Postgres => sqlx::query_scalar(
                "SELECT DISTINCT coalesce(error_message, '') FROM jobs WHERE job_id = ANY($1)",
            )
            .bind(ids)
            .fetch_all(&world.state)
            .await
            .expect("errors"),
            Backend::Manager(side) => side.errors(ids).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// `job_id, status, result_path, result_hmac, status_before_deletion`.
type EndRow = (Uuid, String, Option<String>, Option<String>, Option<String>);

/// A job as the state database ended it.
struct JobEnd {
    status: String,
    path: Option<String>,
    hmac: Option<String>,
    /// `status_before_deletion` of a deleted job.
    before: Option<String>,
}

impl JobEnd {
    fn is_end(&self) -> bool {
        matches!(
            self.status.as_str(),
            "completed" | "failed" | "canceled" | "deleted"
        )
    }

    /// The ce-ids of the job-level events its history implies.
    fn events(&self, id: Uuid) -> Vec<String> {
        let ended = match self.status.as_str() {
            "deleted" => self.before.as_deref().unwrap_or(""),
            status => status,
        };
        let mut events = Vec::new();
        match ended {
            "completed" | "failed" => events.push(format!("fetcher.job.{ended}.{id}")),
            "canceled" => {
                events.push(format!("fetcher.job.cancellation_in_progress.{id}"));
                events.push(format!("fetcher.job.canceled.{id}"));
            }
            _ => {}
        }
        if self.status == "deleted" {
            events.push(format!("fetcher.job.deletion_in_progress.{id}"));
            events.push(format!("fetcher.job.deleted.{id}"));
        }
        events
    }
}

/// The rows of the cancels and deletes: how many were sent and answered, and whether every
/// accepted one reached its end.
fn control_rows(
    s: &mut Summary,
    planned: &[controls::Planned],
    answers: &controls::Answers,
    states: &HashMap<Uuid, JobEnd>,
) {
    use controls::Action;
    let mut by_action: BTreeMap<Action, usize> = BTreeMap::new();
    for p in planned {
        *by_action.entry(p.action).or_default() += 1;
    }
    s.row(
        "cancels and deletes planned",
        by_action
            .iter()
            .map(|(a, n)| format!("{a:?} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let cancels = answers
        .accepted
        .values()
        .filter(|a| matches!(a, Action::Cancel { .. }))
        .count();
    s.row("cancels accepted (202)", cancels);
    s.row("deletes accepted (202)", answers.accepted.len() - cancels);
    s.row(
        "requests refused (409: the job had moved on)",
        answers.refused.len(),
    );
    s.row("requests sent again (replica down, 5xx)", answers.resent);
    s.must(
        "requests no replica answered",
        answers.unanswered.len() + answers.not_sent,
        0,
    );
    let status = |id: &Uuid| states.get(id).map(|j| j.status.as_str()).unwrap_or("");
    s.must(
        "accepted cancels that did not end canceled",
        answers
            .accepted
            .iter()
            .filter(|(id, a)| matches!(a, Action::Cancel { .. }) && status(id) != "canceled")
            .count(),
        0,
    );
    s.must(
        "accepted deletes that did not end deleted",
        answers
            .accepted
            .iter()
            .filter(|(id, a)| matches!(a, Action::Delete { .. }) && status(id) != "deleted")
            .count(),
        0,
    );
}

struct Summary {
    rows: Vec<(String, String)>,
    failures: Vec<String>,
}

impl Summary {
    fn row(&mut self, name: &str, value: impl ToString) {
        self.rows.push((name.to_owned(), value.to_string()));
    }
    fn must(&mut self, name: &str, value: usize, expected: usize) {
        let mark = if value == expected { "" } else { "  ← FAIL" };
        self.rows.push((
            format!("{name} (must be {expected})"),
            format!("{value}{mark}"),
        ));
        if value != expected {
            self.failures
                .push(format!("{name}: {value}, expected {expected}"));
        }
    }
}

async fn list_all_keys(bucket: &str) -> Vec<String> {
    let client = harness::s3_client();
    let mut keys = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut req = client.list_objects_v2().bucket(bucket);
        if let Some(t) = &token {
            req = req.continuation_token(t);
        }
        let page = req.send().await.expect("list objects");
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_owned)),
        );
        match page.next_continuation_token() {
            Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_owned()),
            _ => break,
        }
    }
    keys
}

async fn scenario(world: &World, backend: &Backend) -> Summary {
    let seed = env_num("CHAOS_SEED", 42);
    let count = env_num("CHAOS_JOBS", 2000) as usize;
    let rate = env_num("CHAOS_RATE", 25);
    // The control API's cancels and deletes are the PostgreSQL soak's: the Manager soak's
    // checks read the four statuses the Manager knows.
    let controls = env_num("CHAOS_CONTROLS", 1) != 0 && matches!(backend, Backend::Postgres);
    let rabbit_restarts = env_num("CHAOS_RABBIT_RESTARTS", 1) != 0;
    let s3_outage = env_num("CHAOS_S3_OUTAGE", 1) != 0;
    let mut rng = Rng::new(seed);
    let jobs = make_jobs(world, &mut rng, count, controls);
    let kinds: HashMap<Uuid, Kind> = jobs.iter().map(|j| (j.id, j.kind)).collect();
    if let Backend::Manager(side) = backend {
        // The Manager creates every job's document before its message is published.
        side.create_jobs(&jobs).await;
    }

    // The MQTT mirror's subscriber, before any replica publishes (the PostgreSQL soak's: the
    // Manager mode's mirror is another change's).
    let mirror_subscriber = matches!(backend, Backend::Postgres).then(|| mirror::subscribe(world));
    // Replicas, each behind its own proxies.
    let target = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let mut replicas = Vec::new();
    for index in 0..3 {
        let mongo = match backend {
            Backend::Manager(side) => Some(side.link().await),
            Backend::Postgres => None,
        };
        let mut r = Replica {
            index,
            pg: FaultProxy::start(target(5432)).await,
            mongo,
            amqp: FaultProxy::start(target(5672)).await,
            s3: FaultProxy::start(target(9000)).await,
            process: None,
            generation: 0,
            api_port: harness::free_port(),
        };
        r.spawn(world);
        replicas.push(r);
    }
    for r in &replicas {
        r.process
            .as_ref()
            .expect("spawned")
            .wait_ready(Duration::from_secs(90))
            .await;
    }
    let replicas = Arc::new(tokio::sync::Mutex::new(replicas));

    // Events listener.
    let listen_queue = format!("fetcher.chaos.listen.{}", world.id);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let listener = tokio::spawn(listen_forever(
        world.exchange.clone(),
        listen_queue.clone(),
        world.keys.clone(),
        seen.clone(),
    ));
    // Let the listener's queue be bound before the first event.
    let (_c, ch) = amqp_channel().await.expect("RabbitMQ");
    declare_listener(&ch, &world.exchange, &listen_queue)
        .await
        .expect("declare listener");

    // Cancels and deletes: the early ones now, before any message; the others as their jobs
    // get there (their own seed, so the faults' order stays the seed's).
    let planned = if controls {
        controls::plan(&jobs, &mut Rng::new(seed ^ 0xC0))
    } else {
        Vec::new()
    };
    let ports: Vec<u16> = replicas.lock().await.iter().map(|r| r.api_port).collect();
    let early = controls::send_early(&planned, &ports, &world.keys).await;
    let t0 = Instant::now();
    let controller = tokio::spawn(controls::send_when_due(
        planned.clone(),
        world.state.clone(),
        ports,
        world.keys.clone(),
        t0 + Duration::from_secs(600),
        early,
    ));
    let submitter = tokio::spawn(submit_all(
        world.queue.clone(),
        world.keys.clone(),
        jobs.iter().map(|j| (j.id, j.body.clone())).collect(),
        rate,
    ));

    // The faults, in a seeded order at seeded moments.
    let mut faults = Vec::new();
    if rabbit_restarts {
        faults.extend([Fault::RabbitRestart, Fault::RabbitRestart]);
    }
    match backend {
        Backend::Postgres => faults.push(Fault::PostgresRestart),
        Backend::Manager(_) => faults.extend([
            Fault::MongoRestart { kill: false },
            Fault::MongoRestart { kill: true },
        ]),
    }
    if s3_outage {
        faults.push(Fault::S3Down);
    }
    faults.extend([
        Fault::KillReplica,
        Fault::KillReplica,
        Fault::KillReplica,
        Fault::ProxyCut,
        Fault::ProxyCut,
        Fault::ProxyCut,
        Fault::ProxyReset,
        Fault::ProxyReset,
        Fault::ProxyStall,
        Fault::ProxyLatency,
    ]);
    for i in (1..faults.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        faults.swap(i, j);
    }
    let mut log = Vec::new();
    tokio::time::sleep(rng.range_ms(2000, 4000)).await;
    let mut last_fault = Instant::now();
    let mut last_outage_end = Instant::now();
    // (outage, when it ended): what each outage cost is read off these.
    let mut outages: Vec<(Fault, Instant)> = Vec::new();
    for (i, fault) in faults.iter().enumerate() {
        run_fault(*fault, &mut rng, world, backend, &replicas, &mut log, t0).await;
        last_fault = Instant::now();
        if !matches!(
            fault,
            Fault::ProxyCut | Fault::ProxyReset | Fault::ProxyStall | Fault::ProxyLatency
        ) {
            last_outage_end = last_fault;
            outages.push((*fault, last_fault));
        }
        eprintln!("[chaos] {}", log.last().map(String::as_str).unwrap_or(""));
        if i + 1 < faults.len() {
            tokio::time::sleep(rng.range_ms(1500, 5000)).await;
        }
    }
    log.push(format!(
        "{:6.1}s last fault over",
        t0.elapsed().as_secs_f64()
    ));
    eprintln!("[chaos] {}", log.last().map(String::as_str).unwrap_or(""));

    // Every replica up again (a restarted one may still be starting).
    for r in replicas.lock().await.iter() {
        if let Some(p) = &r.process {
            p.wait_ready(Duration::from_secs(90)).await;
        }
    }
    let confirmed = submitter.await.expect("submitter");
    let submitted_at = t0.elapsed();
    eprintln!("[chaos] all {count} jobs submitted after {submitted_at:?}");

    let answers = controller.await.expect("controller");
    eprintln!(
        "[chaos] control requests: {} accepted, {} refused, {} unanswered",
        answers.accepted.len(),
        answers.refused.len(),
        answers.unanswered.len()
    );

    // Wait for the outcome: every job at its end and its events seen, or give up after
    // `CHAOS_SETTLE_SEC`: 4 minutes, or in the Manager mode 12, more than lib-streaming's
    // 10-minute takeover of an outbox row a SIGKILLed replica left `PROCESSING` (and its
    // 5-minute retry of a `FAILED` one; mongostate's outbox_claim.rs).
    let ids: Vec<Uuid> = jobs.iter().map(|j| j.id).collect();
    let settle = match backend {
        Backend::Postgres => env_num("CHAOS_SETTLE_SEC", 240),
        Backend::Manager(_) => env_num("CHAOS_SETTLE_SEC", 720),
    };
    let settle_deadline = Instant::now() + Duration::from_secs(settle);
    let mut states: HashMap<Uuid, JobEnd>;
    loop {
        states = backend.states(world, &ids).await;
        let ended = states.values().filter(|j| j.is_end()).count();
        let expected: usize = states.iter().map(|(id, j)| j.events(*id).len()).sum();
        let distinct = {
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.events
                .iter()
                .map(|e| &e.0)
                .collect::<HashSet<_>>()
                .len()
        };
        if (ended == count && distinct >= expected) || Instant::now() > settle_deadline {
            break;
        }
        // Each look reads every job's document: on the Manager mode's Python test server that
        // read of 2,000 documents every second took most of its CPU from the replicas (they
        // fell to under 1 job/s and the queued jobs' signatures went stale).
        let pause = match backend {
            Backend::Postgres => Duration::from_secs(1),
            Backend::Manager(_) => Duration::from_secs(10),
        };
        tokio::time::sleep(pause).await;
    }
    // A little longer, for late duplicates.
    tokio::time::sleep(Duration::from_secs(6)).await;
    listener.abort();
    // The states as they are now, with the events seen by now: a job that ended meanwhile
    // (after a deadline) is judged by its end, not by the state read before it.
    states = backend.states(world, &ids).await;

    // Count.
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let mut s = Summary {
        rows: Vec::new(),
        failures: Vec::new(),
    };
    s.row("state", backend.name());
    s.row("seed", seed);
    s.row("replicas", 3);
    s.row("jobs submitted", count);
    let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
    for j in &jobs {
        *by_kind.entry(j.kind).or_default() += 1;
    }
    s.row(
        "job mix",
        by_kind
            .iter()
            .map(|(k, n)| format!("{k:?} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
    for end in states.values() {
        *by_state.entry(end.status.clone()).or_default() += 1;
    }
    let of = |status: &str| *by_state.get(status).unwrap_or(&0);
    s.row("jobs completed", of("completed"));
    s.row("jobs failed", of("failed"));
    s.row("jobs canceled", of("canceled"));
    s.row("jobs deleted", of("deleted"));
    let terminal = states.values().filter(|j| j.is_end()).count();
    s.must("jobs not terminal", count - terminal, 0);
    s.must(
        "jobs stuck in cancellation_in_progress or deletion_in_progress",
        of("cancellation_in_progress") + of("deletion_in_progress"),
        0,
    );
    control_rows(&mut s, &planned, &answers, &states);
    let success_failed: Vec<Uuid> = states
        .iter()
        .filter(|(id, end)| kinds[id] == Kind::Success && end.status == "failed")
        .map(|(id, _)| *id)
        .collect();
    s.row(
        "successful-kind jobs failed by a fault (datasource cut; allowed)",
        success_failed.len(),
    );
    if !success_failed.is_empty() {
        let errors = backend.errors(world, &success_failed).await;
        s.row("their errors", errors.join(" / ").replace('|', "\\|"));
    }
    s.must(
        "failure-kind jobs completed",
        states
            .iter()
            .filter(|(id, end)| {
                !matches!(kinds[id], Kind::Success | Kind::Slow) && end.status == "completed"
            })
            .count(),
        0,
    );
    s.row("events received", seen.events.len());
    s.row(
        "events redelivered to the test's own consumer",
        seen.events.iter().filter(|e| e.2).count(),
    );
    let distinct: HashSet<&String> = seen.events.iter().map(|e| &e.0).collect();
    // Latency: from the job's confirmed submission to its event's first arrival.
    let mut first_seen: HashMap<Uuid, Instant> = HashMap::new();
    for (ce, _, _, at) in &seen.events {
        if let Some(id) = ce.rsplit('.').next().and_then(|id| id.parse::<Uuid>().ok()) {
            first_seen.entry(id).or_insert(*at);
        }
    }
    let mut latencies: Vec<f64> = first_seen
        .iter()
        .filter_map(|(id, at)| {
            confirmed
                .get(id)
                .map(|sent| at.saturating_duration_since(*sent).as_secs_f64())
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    s.row(
        "submission → event latency p50 / p99 / max",
        format!("{:.2} s / {:.1} s / {:.1} s", pct(0.5), pct(0.99), pct(1.0)),
    );
    // Each job's events are exactly those of the way it went (its terminal event, a cancel's
    // two, a deletion's two after its terminal ones).
    let expected: HashSet<String> = states.iter().flat_map(|(id, j)| j.events(*id)).collect();
    s.row("distinct ce-ids", distinct.len());
    s.row(
        "duplicate events (same ce-id again; the redeliveries above included)",
        seen.events.len() - distinct.len(),
    );
    s.must("events with a bad signature", seen.bad_signatures, 0);
    let missing: Vec<&String> = expected
        .iter()
        .filter(|ce| !distinct.contains(ce))
        .collect();
    let unexpected: Vec<&String> = distinct
        .iter()
        .copied()
        .filter(|ce| !expected.contains(ce.as_str()))
        .collect();
    s.must(
        "expected events not received (terminal, cancel, deletion)",
        missing.len(),
        0,
    );
    s.must("events contradicting the job's state", unexpected.len(), 0);
    if let Backend::Manager(side) = backend {
        // What the state holds of each: the job's document, its outbox rows, its markers.
        for (what, ces) in [("missing", &missing), ("unexpected", &unexpected)] {
            for ce in ces.iter() {
                eprintln!("[chaos] {what} event {ce}: {}", side.explain(ce).await);
            }
        }
        side.checks(&mut s, &states).await;
    }

    // Stored objects.
    let mut bad_objects = 0;
    for (id, end) in &states {
        if end.status != "completed" {
            continue;
        }
        let ok = match (&end.path, &end.hmac) {
            (Some(path), Some(hmac)) => match world.open_object(path).await {
                Ok(plain) => &world.keys.external_hmac().sign_hex(&plain) == hmac,
                Err(_) => false,
            },
            _ => false,
        };
        if !ok {
            eprintln!("[chaos] completed job {id}: object missing or bad");
            bad_objects += 1;
        }
    }
    s.must(
        "completed jobs whose object is missing or fails its HMAC",
        bad_objects,
        0,
    );
    let keys = list_all_keys(&world.bucket).await;
    // The status of the job an object key names, if it names one.
    let owner = |key: &String| {
        key.trim_start_matches("external-data/")
            .trim_end_matches(".json")
            .parse::<Uuid>()
            .ok()
            .map(|id| states.get(&id).map(|j| j.status.as_str()))
    };
    let orphan = keys
        .iter()
        .filter(|k| owner(k) != Some(Some("completed")))
        .count();
    s.must("stored objects of jobs not completed", orphan, 0);
    let of_canceled_or_deleted = keys
        .iter()
        .filter(|k| matches!(owner(k), Some(Some("canceled" | "deleted"))))
        .count();
    s.must(
        "objects of canceled or deleted jobs left",
        of_canceled_or_deleted,
        0,
    );
    s.row("stored objects", keys.len());
    if let Some(subscriber) = &mirror_subscriber {
        mirror::account(&mut s, world, subscriber, &states).await;
    }
    s.row(
        "time from the last fault to the last event",
        match seen.last {
            Some(last) if last > last_fault => {
                format!("{:.1} s", (last - last_fault).as_secs_f64())
            }
            Some(_) => "0 s (the last event came before the last fault ended)".to_owned(),
            None => "no event".to_owned(),
        },
    );
    s.row(
        "time from the end of the last outage (broker, database, S3, SIGKILL) to the last event",
        match seen.last {
            Some(last) if last > last_outage_end => {
                format!("{:.1} s", (last - last_outage_end).as_secs_f64())
            }
            Some(_) => "0 s".to_owned(),
            None => "no event".to_owned(),
        },
    );
    // Recovery: from an outage's end until every job submitted before it ended has its event
    // (0 when the backlog was gone before the outage ended).
    let recovery: Vec<String> = outages
        .iter()
        .map(|(fault, end)| {
            let caught_up = confirmed
                .iter()
                .filter(|(_, sent)| *sent < end)
                .filter_map(|(id, _)| first_seen.get(id))
                .max()
                .map_or(0.0, |last| {
                    last.saturating_duration_since(*end).as_secs_f64()
                });
            format!(
                "{:.0}s {fault:?} {caught_up:.1} s",
                end.duration_since(t0).as_secs_f64()
            )
        })
        .collect();
    s.row(
        "recovery after each outage (its end → every job submitted before it has its event)",
        recovery.join("; "),
    );
    s.row(
        "scenario length",
        format!("{:.0} s", t0.elapsed().as_secs_f64()),
    );
    s.row("faults", log.len() - 1);
    s.row(
        "fault log",
        log.iter().map(|l| l.trim()).collect::<Vec<_>>().join("; "),
    );

    // Stop the replicas; keep their logs on failure.
    let mut reps = replicas.lock().await;
    if !s.failures.is_empty() {
        for r in reps.iter() {
            if let Some(p) = &r.process {
                let path = format!("/tmp/fetcher-chaos-replica{}.log", r.index);
                let _ = std::fs::write(&path, p.output());
                eprintln!("[chaos] replica {} log: {path}", r.index);
            }
        }
    }
    for r in reps.iter_mut() {
        r.process = None;
    }
    drop(reps);
    // A fresh channel: the first one died with the broker restarts.
    let (_c, ch) = amqp_channel().await.expect("RabbitMQ");
    let _ = ch
        .queue_delete(listen_queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    let _ = ch
        .queue_delete(world.queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    let _ = ch
        .exchange_delete(
            world.exchange.as_str().into(),
            ExchangeDeleteOptions::default(),
        )
        .await;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long chaos soak: run with `make chaos`"]
async fn soak_under_faults() {
    soak(|_| async { Backend::Postgres }).await;
}

/// Runs the scenario on the state `backend` makes for the world, prints its report and fails
/// on any must-row.
async fn soak<F, Fut>(backend: F)
where
    F: FnOnce(Arc<World>) -> Fut,
    Fut: std::future::Future<Output = Backend>,
{
    let world = Arc::new(World::new().await);
    let backend = Arc::new(backend(world.clone()).await);
    let w = world.clone();
    let b = backend.clone();
    let outcome = tokio::spawn(async move { scenario(&w, &b).await }).await;
    drop(backend);
    // The world is cleaned up whatever happened.
    if let Ok(world) = Arc::try_unwrap(world) {
        world.cleanup().await;
    }
    let summary = match outcome {
        Ok(summary) => summary,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    println!("CHAOS-SUMMARY-BEGIN");
    println!("| measure | value |");
    println!("|---|---|");
    for (name, value) in &summary.rows {
        println!("| {name} | {value} |");
    }
    println!("CHAOS-SUMMARY-END");
    assert!(
        summary.failures.is_empty(),
        "the Worker broke its guarantees under faults: {:#?}",
        summary.failures
    );
}
