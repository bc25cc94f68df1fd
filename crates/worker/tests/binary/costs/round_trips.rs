//! Statements per job, counted on the wire.
//!
//! One small job (one table, three rows) runs through the job core exactly as the Worker wires
//! it ([`worker::startup::wire`]: the state database's store, the engine, the bucket, the event
//! publisher), its state database and its source each reached through a
//! [`StatementCounter`]: a proxy that reads the client's side of the protocol and notes each
//! statement and each round trip. Counting on the wire is exact under parallel tests (the
//! proxy sees only this test's connections, where `pg_stat_statements` or
//! `pg_stat_database` would see every test's), needs no server setting or restart, and sees
//! round trips a server's statistics do not (a statement's first prepare).
//!
//! The core is driven directly rather than through the binary so nothing else talks to the
//! state database meanwhile: the binary's repairer, sweeper and retention poll it on their own
//! clocks. A first job opens the pools' connections and prepares their statements; the second
//! is counted, from its delivery until its event is marked published: a job on a warm Worker.
//!
//! The bounds are today's counts: a change that adds a statement or a ping fails here, and one
//! that removes one lowers them (BENCHMARKS.md, "Round trips per job").

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use contract::envelope::{self, Route};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use worker::job::{Disposition, Inbound};

use crate::harness::sources::{MariaDb, SourceDb};
use crate::harness::{free_port, Headers, Protocol, StatementCounter, Tally, World};

/// Most statements a warm job may make on the state database. Each is a round trip of its own
/// (sqlx sends no two in one).
const STATE_STATEMENTS: usize = 4;
/// Most pings (a bare `Sync`) a warm job may cost the state database: none. sqlx tests a pooled
/// connection each time it is given back, but the job path's statements run on connections the
/// store keeps out of the pool between them (`outbox`'s `kept.rs`); the test when one is taken
/// is made only after a second idle ([`worker::state_pool`]), so none within a job either.
/// (First prepares are reported, not bounded: they follow which connection each statement
/// gets.)
const STATE_PINGS: usize = 0;
/// Most statements a warm job may make on a one-table source.
const SOURCE_STATEMENTS: usize = 2;
/// Most pings (`Sync`, `COM_PING`) a warm job may cost a one-table source: none. Its connection
/// is kept out of the pool after a read that succeeded (`sqlpool::Kept`, as on the state
/// database), so sqlx's test when it is given back is not made either.
const SOURCE_PINGS: usize = 0;

#[tokio::test]
async fn a_small_job_on_postgresql_makes_few_statements() {
    let world = World::new().await;
    let env = world.env(0);
    let server = resolve(&env["DATASOURCE_SRC_HOST"], &env["DATASOURCE_SRC_PORT"]).await;
    let source = StatementCounter::start(server, Protocol::Postgres).await;
    let vars = vec![
        ("DATASOURCE_SRC_HOST".to_owned(), "127.0.0.1".to_owned()),
        ("DATASOURCE_SRC_PORT".to_owned(), source.port().to_string()),
    ];
    let (state, source) = count_one_job(&world, server, vars, "src", "payments", &source).await;
    world.cleanup().await;
    report("state database", &state);
    report("PostgreSQL source", &source);
    assert_within("state database", &state, STATE_STATEMENTS, STATE_PINGS);
    assert_within(
        "PostgreSQL source",
        &source,
        SOURCE_STATEMENTS,
        SOURCE_PINGS,
    );
}

#[tokio::test]
async fn a_small_job_on_mariadb_makes_few_statements() {
    let world = World::new().await;
    let env = world.env(0);
    let pg = resolve(&env["DATASOURCE_SRC_HOST"], &env["DATASOURCE_SRC_PORT"]).await;
    let maria = MariaDb::create().await;
    maria
        .exec("CREATE TABLE payments (id int PRIMARY KEY, memo text)")
        .await;
    maria
        .exec("INSERT INTO payments VALUES (1, 'first'), (2, 'second'), (3, 'third')")
        .await;
    let source = StatementCounter::start(maria.addr().await, Protocol::MySql).await;
    let vars = maria.datasource_at("maria", Some(addr_of(source.port())));
    let (state, source) = count_one_job(&world, pg, vars, "maria", "payments", &source).await;
    maria.drop().await;
    world.cleanup().await;
    report("state database", &state);
    report("MariaDB source", &source);
    assert_within("state database", &state, STATE_STATEMENTS, STATE_PINGS);
    assert_within("MariaDB source", &source, SOURCE_STATEMENTS, SOURCE_PINGS);
}

fn addr_of(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

pub(super) async fn resolve(host: &str, port: &str) -> SocketAddr {
    tokio::net::lookup_host(format!("{host}:{port}"))
        .await
        .expect("the PostgreSQL server's address")
        .next()
        .expect("an address")
}

/// The counts, for `--nocapture` (BENCHMARKS.md quotes them).
pub(super) fn report(what: &str, tally: &Tally) {
    println!(
        "{what}: {} statements (besides: {} prepares, {} pings)\n{}",
        tally.statements.len(),
        tally.prepares,
        tally.pings,
        tally.listing()
    );
}

fn assert_within(what: &str, tally: &Tally, statements: usize, pings: usize) {
    assert!(
        tally.statements.len() <= statements,
        "a job made {} statements on the {what} (at most {statements}):\n{}",
        tally.statements.len(),
        tally.listing()
    );
    assert!(
        tally.pings <= pings,
        "a job cost the {what} {} pings (at most {pings})",
        tally.pings
    );
}

/// Runs two jobs reading `table` of datasource `connection` (defined by `datasource`, reached
/// through `source`), the state database reached through a counter in front of `pg`; the
/// second job's tallies on the state database and on the source.
async fn count_one_job(
    world: &World,
    pg: SocketAddr,
    datasource: Vec<(String, String)>,
    connection: &str,
    table: &str,
    source: &StatementCounter,
) -> (Tally, Tally) {
    let (state, wired) = counted_wire(world, pg, datasource).await;
    // Events are published mandatory: a bound queue takes them (and every execution's).
    let _events = world.listen_to("job.#").await;

    run_job(world, &wired.core, connection, table).await;
    let (state_before, source_before) = (state.tally(), source.tally());
    run_job(world, &wired.core, connection, table).await;
    let counted = (
        state.tally().since(&state_before),
        source.tally().since(&source_before),
    );
    wired.publisher.close().await;
    wired.marks.close(Duration::from_secs(5)).await;
    wired.store.close().await;
    counted
}

/// The job core wired as the Worker wires it, datasource `datasource` added, its state database
/// reached through a counter in front of `pg` (migrated first, around the counter).
pub(super) async fn counted_wire(
    world: &World,
    pg: SocketAddr,
    datasource: Vec<(String, String)>,
) -> (StatementCounter, worker::startup::Wired) {
    schema::migrate(&world.state).await.expect("migrate");
    let state = StatementCounter::start(pg, Protocol::Postgres).await;
    let mut env = world.env(free_port());
    env.insert(
        "DATABASE_URL".into(),
        format!(
            "postgres://postgres@127.0.0.1:{}/{}?sslmode=disable",
            state.port(),
            world.state_db
        ),
    );
    // A lease long enough that no renewal falls inside a job on a busy machine.
    env.insert("JOB_LEASE_SEC".into(), "60".into());
    env.extend(datasource);
    let settings = worker::config::Settings::from_vars(env).expect("settings");
    let wired = worker::startup::wire(&settings).await.expect("wired");
    (state, wired)
}

/// Hands the core one signed job and waits until it completed and its event is published.
pub(super) async fn run_job(
    world: &World,
    core: &worker::job::JobCore,
    connection: &str,
    table: &str,
) {
    let job_id = Uuid::new_v4();
    let disposition = handle(world, core, job_id, connection, table).await;
    assert_eq!(disposition, Disposition::Ack);
    published(world, job_id).await;
}

/// Hands the core the signed message of job `job_id` (reading `table` of `connection`), as the
/// consumer would; what the core answers.
pub(super) async fn handle(
    world: &World,
    core: &worker::job::JobCore,
    job_id: Uuid,
    connection: &str,
    table: &str,
) -> Disposition {
    let body = world.job_body(job_id, connection, table, &["id", "memo"]);
    let route = Route {
        tenant: "",
        exchange: "",
        routing_key: &world.queue,
    };
    let signature = envelope::sign(chrono::Utc::now().timestamp(), &route, &body, |p| {
        world.keys.internal_hmac().sign_hex(p)
    });
    let table_of_headers = Headers::default()
        .text(envelope::SIGNATURE_HEADER, &signature.signature)
        .text(envelope::TIMESTAMP_HEADER, &signature.timestamp)
        .text(envelope::VERSION_HEADER, signature.version)
        .table();
    let message = Inbound {
        headers: worker::amqp::headers::read(Some(&table_of_headers)),
        exchange: "",
        routing_key: &world.queue,
        body: &body,
        redelivered: false,
    };
    core.handle(&message, &CancellationToken::new()).await
}

/// Waits until job `job_id` is completed and its event marked published.
pub(super) async fn published(world: &World, job_id: Uuid) {
    assert_eq!(world.job_status(job_id).await.as_deref(), Some("completed"));
    // The publish is the core's last step; the mark may trail the confirm.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let unpublished: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox WHERE job_id = $1 AND published_at IS NULL",
        )
        .bind(job_id)
        .fetch_one(&world.state)
        .await
        .expect("outbox");
        if unpublished == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "job {job_id}'s event was never published"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
