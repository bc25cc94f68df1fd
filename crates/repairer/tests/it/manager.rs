//! The Manager mode's relay and repairer (`repairer::manager`) against the MongoDB test server
//! (secantusdb, replica set) and RabbitMQ: rows of `streaming_outbox_events` written by this
//! Worker, by lib-streaming (as the Manager stand-in writes them) and from a crashed Go
//! Worker's marker reach the exchange exactly as the PostgreSQL mode publishes its events.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use contract::event::{CloudEventAttributes, Operation, OutboundEvent};
use mongodb::bson::{doc, DateTime, Document};
use mongostate::{ManagerConfig, ManagerStore, Store};
use publisher::Publisher;
use repairer::{ManagerRelay, ManagerRepairer, ManagerRepairerConfig};
use testkit::manager::{lib_streaming_row, Manager, MARKER_KEYS};
use testkit::mongo::MongoDb;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::manager_rows::{claim, job, record_failure, OWNER, PUBLISHER};
use crate::support::{self, Broker, SOURCE};

const WITHIN: Duration = Duration::from_secs(20);

struct World {
    db: MongoDb,
    manager: Manager,
    store: ManagerStore,
    broker: Broker,
    exchange: String,
    queue: String,
    publisher: Arc<Publisher>,
}

impl World {
    async fn new() -> World {
        let db = MongoDb::create().await;
        let manager = Manager::new(db.db());
        manager.ensure_indexes().await;
        let broker = Broker::connect().await;
        let exchange = support::unique("exchange");
        let publisher = support::publisher(&exchange);
        publisher
            .declare_exchange()
            .await
            .expect("declare exchange");
        broker.track_exchange(&exchange);
        let queue = broker.bound_queue(&exchange, "job.*").await;
        let store = ManagerStore::new(
            Store::new(db.client.clone(), &db.name),
            ManagerConfig {
                exchange: exchange.clone(),
                source: SOURCE.to_owned(),
            },
        );
        World {
            db,
            manager,
            store,
            broker,
            exchange,
            queue,
            publisher,
        }
    }

    fn repairer(&self) -> ManagerRepairer {
        ManagerRepairer::new(
            self.store.clone(),
            self.publisher.clone(),
            ManagerRepairerConfig::new("repairer-a"),
        )
    }

    async fn row(&self, id: &str) -> Document {
        self.store
            .store()
            .outbox_rows()
            .find_one(doc! {"id": id})
            .await
            .expect("find the row")
            .expect("the row")
    }

    async fn finish(self) {
        self.publisher.close().await;
        self.broker.close().await;
        self.db.drop().await;
    }
}

#[tokio::test]
async fn a_row_written_as_lib_streaming_writes_it_is_relayed_and_marked_published() {
    let world = World::new().await;
    let job_id = Uuid::now_v7();
    let body = format!(
        r#"{{"jobId":"{job_id}","status":"failed","metadata":{{"error":{{"message":"boom"}}}}}}"#
    );
    let timestamp = "2026-12-05T08:00:00.123456789Z";
    let (id, row) = lib_streaming_row(job_id, &body, &world.exchange, timestamp, SOURCE);
    world
        .store
        .store()
        .outbox_rows()
        .insert_one(row)
        .await
        .unwrap();

    let report = world
        .repairer()
        .repair_once(&CancellationToken::new())
        .await
        .unwrap();

    assert_eq!(report.claimed, 1, "{report:?}");
    assert_eq!(report.relayed.published, 1, "{report:?}");
    let deliveries = world.broker.receive(&world.queue, 1, WITHIN).await;
    // The event as the PostgreSQL mode would publish it: every ce-* header, X-Tenant-ID, the
    // signature, the body byte for byte.
    let expected = OutboundEvent {
        attributes: CloudEventAttributes {
            id: format!("fetcher.job.failed.{job_id}"),
            source: SOURCE.to_owned(),
            status: Operation::Failed,
            datasource: None,
            time: timestamp.to_owned(),
            subject: job_id.to_string(),
            tenant: "single-tenant".to_owned(),
            traceparent: None,
        },
        request_id: None,
        body: body.into_bytes(),
    };
    support::assert_delivered_as_recorded(&deliveries[0], &expected, &world.exchange);
    let stored = world.row(&id).await;
    assert_eq!(stored.get_str("status"), Ok("PUBLISHED"));
    assert!(stored.get_datetime("published_at").is_ok());
    assert!(!stored.contains_key("claim_token"));
    world.finish().await;
}

#[tokio::test]
async fn a_crashed_go_workers_marker_is_re_emitted_with_its_ce_id() {
    let world = World::new().await;
    let id = world.manager.create_job(&job()).await.unwrap();
    let payload =
        format!(r#"{{"jobId":"{id}","status":"completed","metadata":{{"source":"tests"}}}}"#);
    world
        .manager
        .crashed_go_worker(id, "completed", "completed", &payload)
        .await;

    let report = world
        .repairer()
        .repair_once(&CancellationToken::new())
        .await
        .unwrap();

    assert_eq!(
        report.re_emitted,
        vec![format!("fetcher.job.completed.{id}")]
    );
    let deliveries = world.broker.receive(&world.queue, 1, WITHIN).await;
    let delivery = &deliveries[0];
    assert_eq!(
        support::ce_id(delivery),
        format!("fetcher.job.completed.{id}")
    );
    assert_eq!(delivery.routing_key.as_str(), "job.completed");
    assert_eq!(delivery.data, payload.as_bytes());
    let stored = world.manager.stored(id).await.unwrap();
    let metadata = stored.get_document("metadata").unwrap();
    for key in MARKER_KEYS {
        assert!(!metadata.contains_key(key), "{key}");
    }
    assert_eq!(report.relayed.published, 1, "{report:?}");
    world.finish().await;
}

#[tokio::test]
async fn a_recorded_end_is_published_by_its_publisher_as_the_postgresql_mode_publishes_it() {
    let world = World::new().await;
    let id = world.manager.create_job(&job()).await.unwrap();
    let recorded = record_failure(&world.store, id, Some("req-7")).await;
    // Held by its publisher: a relay's pass (this one or a Go one) leaves it alone.
    let pass = world
        .repairer()
        .repair_once(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(pass.claimed, 0, "{pass:?}");

    let relay = ManagerRelay::new(world.store.clone(), world.publisher.clone());
    let report = relay.deliver(PUBLISHER, &[recorded.pending]).await.unwrap();

    assert_eq!(report.published, 1, "{report:?}");
    let deliveries = world.broker.receive(&world.queue, 1, WITHIN).await;
    let event = &recorded.event;
    support::assert_delivered_as_recorded(&deliveries[0], event, &world.exchange);
    let stored = world.row(&recorded.row_id.to_string()).await;
    assert_eq!(stored.get_str("status"), Ok("PUBLISHED"));
    let found = world
        .store
        .recorded_event(event.ce_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.leased_by, None);
    world.finish().await;
}

#[tokio::test]
async fn a_running_repairer_re_emits_a_marker_at_its_first_pass_and_stops_when_told() {
    let world = World::new().await;
    let id = world.manager.create_job(&job()).await.unwrap();
    let payload = format!(r#"{{"jobId":"{id}","status":"failed"}}"#);
    world
        .manager
        .crashed_go_worker(id, "failed", "failed", &payload)
        .await;
    let repairer = world.repairer();
    let stop = CancellationToken::new();

    let running = tokio::spawn({
        let stop = stop.clone();
        async move { repairer.run(stop).await }
    });
    let deliveries = world.broker.receive(&world.queue, 1, WITHIN).await;
    stop.cancel();
    running.await.expect("the repairer stops");

    assert_eq!(
        support::ce_id(&deliveries[0]),
        format!("fetcher.job.failed.{id}")
    );
    assert_eq!(deliveries[0].data, payload.as_bytes());
    world.finish().await;
}

#[tokio::test]
async fn an_executions_event_goes_through_this_workers_own_outbox_and_a_lost_one_is_repaired() {
    use contract::lifecycle::ExecutionStatus;
    use outbox::{ExecutionEvents, ExecutionReport};

    let world = World::new().await;
    let executions_queue = world
        .broker
        .bound_queue(&world.exchange, "job.execution.*")
        .await;
    let id = world.manager.create_job(&job()).await.unwrap();
    claim(&world.store, id, None).await;
    let report = |datasource: &str| ExecutionReport {
        datasource: datasource.to_owned(),
        status: ExecutionStatus::Succeeded,
        row_count: 1,
        started_at: Some(Utc::now()),
        ended_at: Some(Utc::now()),
        error: None,
        attempts: 1,
        last_error: None,
    };
    let events = |publisher, lease| ExecutionEvents {
        tenant: None,
        request_id: None,
        source: SOURCE,
        publisher,
        lease,
        traceparent: None,
    };
    // Delivered by its publisher right after the commit.
    let delivered = world
        .store
        .record_executions(
            id,
            OWNER,
            &[report("orders")],
            &events("pub-a", Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let relay = ManagerRelay::new(world.store.clone(), world.publisher.clone());
    let sent = relay.deliver("pub-a", &delivered).await.unwrap();
    assert_eq!(sent.published, 1, "{sent:?}");
    // A publisher that died before publishing: its lease lapses and the repairer publishes it.
    let lost = world
        .store
        .record_executions(
            id,
            OWNER,
            &[report("users")],
            &events("pub-dead", Duration::ZERO),
        )
        .await
        .unwrap();
    assert_eq!(lost.len(), 1);
    let mut config = ManagerRepairerConfig::new("repairer-a");
    config.grace = Duration::ZERO;
    let repairer = ManagerRepairer::new(world.store.clone(), world.publisher.clone(), config);
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(pass.relayed.published, 1, "{pass:?}");

    let deliveries = world.broker.receive(&executions_queue, 2, WITHIN).await;
    let keys: Vec<String> = deliveries.iter().map(support::ce_id).collect();
    assert_eq!(
        keys,
        [
            format!("fetcher.job.execution.succeeded.{id}.orders"),
            format!("fetcher.job.execution.succeeded.{id}.users"),
        ]
    );
    assert_eq!(
        deliveries[0].routing_key.as_str(),
        "job.execution.succeeded"
    );
    let unpublished = world
        .store
        .store()
        .worker_rows()
        .count_documents(doc! {"published_at": null})
        .await
        .unwrap();
    assert_eq!(unpublished, 0);
    assert_eq!(
        world
            .store
            .store()
            .outbox_rows()
            .count_documents(doc! {})
            .await
            .unwrap(),
        0,
        "a Go relay never sees them"
    );
    // Published rows of this Worker's own are deleted after their retention.
    let mut config = ManagerRepairerConfig::new("repairer-a");
    config.retention = Duration::ZERO;
    let repairer = ManagerRepairer::new(world.store.clone(), world.publisher.clone(), config);
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(pass.purged, 2, "{pass:?}");
    world.finish().await;
}

#[tokio::test]
async fn a_recorded_end_whose_publisher_failed_is_republished_with_its_request_id() {
    let world = World::new().await;
    let id = world.manager.create_job(&job()).await.unwrap();
    let recorded = record_failure(&world.store, id, Some("req-9")).await;
    let row_id = recorded.row_id;
    // Its publisher gave it back (a failed publish): FAILED, due once lib-commons' retry window
    // passed, which the test skips by dating the row back.
    world
        .store
        .store()
        .outbox_rows()
        .update_one(
            doc! {"id": row_id.to_string()},
            doc! {
                "$set": {"status": "FAILED", "attempts": 1_i32,
                         "updated_at": DateTime::from_millis(DateTime::now().timestamp_millis() - 600_000)},
                "$unset": {"claim_token": ""},
            },
        )
        .await
        .unwrap();

    let pass = world
        .repairer()
        .repair_once(&CancellationToken::new())
        .await
        .unwrap();

    assert_eq!(pass.relayed.published, 1, "{pass:?}");
    let deliveries = world.broker.receive(&world.queue, 1, WITHIN).await;
    support::assert_delivered_as_recorded(&deliveries[0], &recorded.event, &world.exchange);
    world.finish().await;
}
