//! MongoDB commands per job in the Manager mode, counted on the wire.
//!
//! One small job (one table, three rows) runs through the Manager mode's job core exactly as
//! the Worker wires it ([`worker::startup::wire_manager`]: the Manager's MongoDB, the engine,
//! the bucket, the event publisher), the MongoDB connection through a [`StatementCounter`] that
//! reads each `OP_MSG` the driver sends: every command is a round trip of its own. As in
//! `round_trips.rs`, the core is driven directly so that no repairer or sweeper pass falls into
//! the count, and the second job is counted, from its delivery until its events are marked
//! published: a job on a warm Worker.
//!
//! The bound is today's count: a change that adds a command fails here, and one that removes
//! one lowers it (BENCHMARKS.md, "MongoDB commands per job").

use std::time::{Duration, Instant};

use contract::envelope::{self, Route};
use mongodb::bson::{doc, Bson, Document};
use testkit::manager::{id_bson, Manager, NewJob};
use testkit::mongo::MongoDb;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use worker::job::{Disposition, Inbound};

use crate::harness::{
    free_port, terminal_event_published, Headers, Protocol, StatementCounter, Tally, World,
};

/// Most commands a warm job may send to the Manager's MongoDB: its claim (the job read, its
/// conditional write), the lease renewed right before the object is stored (the fence), its end
/// (a transaction: the job read, its write, its execution's event row, its terminal event's
/// row, the commit) and the two rows marked published. The driver's own round trips (`hello`,
/// `endSessions`) are on top (reported, not bounded).
const MANAGER_COMMANDS: usize = 10;

#[tokio::test]
async fn a_small_job_in_the_manager_mode_makes_few_commands() {
    let world = World::new().await;
    let mongo = MongoDb::create().await;
    let manager = Manager::new(mongo.db());
    manager.ensure_indexes().await;
    let counter = StatementCounter::start(mongo.addr().await, Protocol::Mongo).await;
    let tally = count_one_job(&world, &mongo, &manager, &counter).await;
    mongo.drop().await;
    world.cleanup().await;
    println!(
        "Manager's MongoDB: {} commands (besides: {} of the driver's own)\n{}",
        tally.statements.len(),
        tally.pings,
        tally.listing()
    );
    assert!(
        tally.statements.len() <= MANAGER_COMMANDS,
        "a job sent {} commands to the Manager's MongoDB (at most {MANAGER_COMMANDS}):\n{}",
        tally.statements.len(),
        tally.listing()
    );
}

/// Runs two jobs through the Manager mode's core, its MongoDB reached through `counter`; the
/// second job's tally.
async fn count_one_job(
    world: &World,
    mongo: &MongoDb,
    manager: &Manager,
    counter: &StatementCounter,
) -> Tally {
    let mut env = world.env(free_port());
    env.remove("DATABASE_URL");
    env.remove("API_PORT");
    for (name, value) in [
        ("MONGO_URI", "mongodb".to_owned()),
        ("MONGO_HOST", "127.0.0.1".to_owned()),
        ("MONGO_PORT", counter.port().to_string()),
        ("MONGO_NAME", mongo.name.clone()),
        // The replica set advertises the server's own address; the driver must keep to the
        // counter's.
        ("MONGO_PARAMETERS", "directConnection=true".to_owned()),
        ("ALLOW_INSECURE_TLS", "true".to_owned()),
        // A lease long enough that no renewal falls inside a job on a busy machine.
        ("JOB_LEASE_SEC", "60".to_owned()),
    ] {
        env.insert(name.to_owned(), value);
    }
    let settings = worker::config::Settings::from_vars(env).expect("settings");
    let wired = worker::startup::wire_manager(&settings)
        .await
        .expect("wired");
    // What the Worker does once at its start.
    wired.store.ensure_indexes().await.expect("indexes");
    // Events are published mandatory: a bound queue takes them (and every execution's).
    let _events = world.listen_to("job.#").await;

    run_job(world, mongo, manager, &wired.core).await;
    let before = counter.tally();
    run_job(world, mongo, manager, &wired.core).await;
    let counted = counter.tally().since(&before);
    wired.publisher.close().await;
    counted
}

/// Creates a job as the Manager does, hands the core its signed message and waits until it
/// completed and its events' rows are marked published.
async fn run_job(world: &World, mongo: &MongoDb, manager: &Manager, core: &worker::job::JobCore) {
    let job_id = Uuid::now_v7();
    let fields: Vec<Bson> = ["id", "memo"].into_iter().map(Bson::from).collect();
    let request = NewJob {
        mapped_fields: doc! {"src": {"payments": fields}},
        filters: Document::new(),
        metadata: doc! {"source": "costs"},
    };
    manager
        .create_job_as(job_id, &request)
        .await
        .expect("the Manager creates the job");
    let body = world.job_body(job_id, "src", "payments", &["id", "memo"]);
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
    let disposition = core.handle(&message, &CancellationToken::new()).await;
    assert_eq!(disposition, Disposition::Ack);
    // The publish is the core's last step; the marks may trail the confirms.
    let db = mongo.db();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let job = manager.stored(job_id).await.expect("the job");
        assert_eq!(job.get_str("status"), Ok("completed"), "{job}");
        let terminal_published = terminal_event_published(&db, &job).await;
        let executions_unpublished = db
            .collection::<Document>(mongostate::worker_outbox::WORKER_OUTBOX_COLLECTION)
            .count_documents(doc! {"job_id": id_bson(job_id), "published_at": Bson::Null})
            .await
            .expect("fetcher_worker_outbox");
        if terminal_published && executions_unpublished == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "job {job_id}'s events were never marked published"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
