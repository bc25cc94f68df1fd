//! The Manager mode's repairer when MongoDB goes away after its claim, and its relay when
//! MongoDB fails right after a publish (testkit's fault proxy in front of the MongoDB test
//! server): the rows they hold are given back `PENDING`, at once or by the repairer's next pass,
//! never left `PROCESSING` for the takeover, and a row another relay took over meanwhile is
//! left to it.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use mongodb::bson::{doc, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;
use mongostate::outbox::SINGLE_TENANT;
use mongostate::outbox_claim::{self, Candidates, ClaimWindows};
use mongostate::{ManagerConfig, ManagerStore, Store};
use publisher::Publisher;
use repairer::{ManagerRelay, ManagerRepairer, ManagerRepairerConfig};
use testkit::manager::{lib_streaming_row, Manager};
use testkit::mongo::MongoDb;
use testkit::proxy::{FaultProxy, Trap};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::manager_rows::{job, record_failure, RecordedEnd, PUBLISHER};
use crate::support::{self, Broker, SOURCE};

const WITHIN: Duration = Duration::from_secs(20);

/// The repairer's MongoDB behind a proxy; the test's own checks go to the server directly.
struct Cut {
    db: MongoDb,
    proxy: FaultProxy,
    /// The repairer's client, through the proxy.
    client: Client,
    repairer: ManagerRepairer,
    /// The publisher's relay right after a commit, on the repairer's store.
    relay: ManagerRelay,
    config: ManagerConfig,
    broker: Broker,
    exchange: String,
    queue: String,
    publisher: Arc<Publisher>,
}

impl Cut {
    /// While the proxy refuses, a call fails within a second, not the driver's 30.
    async fn new() -> Cut {
        Cut::with_selection_timeout(Duration::from_secs(1)).await
    }

    async fn with_selection_timeout(selection: Duration) -> Cut {
        let db = MongoDb::create().await;
        let proxy = FaultProxy::start(db.addr().await).await;
        // The replica set names the server's own address: the driver must keep to the proxy's.
        let url = format!(
            "mongodb://127.0.0.1:{}/?directConnection=true",
            proxy.port()
        );
        let mut options = ClientOptions::parse(url).await.expect("the proxy's URL");
        options.server_selection_timeout = Some(selection);
        let client = Client::with_options(options).expect("MongoDB client");
        let broker = Broker::connect().await;
        let exchange = support::unique("exchange");
        let publisher = support::publisher(&exchange);
        publisher.declare_exchange().await.expect("exchange");
        broker.track_exchange(&exchange);
        let queue = broker.bound_queue(&exchange, "job.*").await;
        let config = ManagerConfig {
            exchange: exchange.clone(),
            source: SOURCE.to_owned(),
        };
        let store = ManagerStore::new(Store::new(client.clone(), &db.name), config.clone());
        let relay = ManagerRelay::new(store.clone(), publisher.clone());
        let repairer = ManagerRepairer::new(
            store,
            publisher.clone(),
            ManagerRepairerConfig::new("repairer-a"),
        );
        Cut {
            db,
            proxy,
            client,
            repairer,
            relay,
            config,
            broker,
            exchange,
            queue,
            publisher,
        }
    }

    /// A store on the server itself, as another relay sees it.
    fn direct(&self) -> Store {
        Store::new(self.db.client.clone(), &self.db.name)
    }

    /// A job the Manager created, claimed and ended `failed` by a Worker whose MongoDB is the
    /// server itself: its row waits for its publisher, [`PUBLISHER`].
    async fn recorded_end(&self) -> RecordedEnd {
        let manager = Manager::new(self.db.db());
        manager.ensure_indexes().await;
        let id = manager
            .create_job(&job())
            .await
            .expect("the Manager creates the job");
        let worker = ManagerStore::new(self.direct(), self.config.clone());
        record_failure(&worker, id, None).await
    }

    /// `count` rows as lib-streaming writes them; their ids and `ce-id`s, oldest first.
    async fn rows(&self, count: usize) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        for _ in 0..count {
            let job = Uuid::now_v7();
            let body = format!(r#"{{"jobId":"{job}","status":"failed"}}"#);
            let at = "2026-12-06T04:00:00Z";
            let (id, row) = lib_streaming_row(job, &body, &self.exchange, at, SOURCE);
            let outbox = self.direct().outbox_rows();
            outbox.insert_one(row).await.expect("insert a row");
            rows.push((id, format!("fetcher.job.failed.{job}")));
        }
        rows
    }

    async fn row(&self, id: &str) -> Document {
        let found = self.direct().outbox_rows().find_one(doc! {"id": id}).await;
        found.expect("find the row").expect("the row")
    }

    /// A pass whose MongoDB goes down at its first mark, after it published every row.
    async fn pass_cut_at_its_first_mark(&self, rows: usize) {
        self.proxy
            .set_trap(Trap::before(b"PUBLISHED").and_go_down());
        let pass = self.repairer.repair_once(&CancellationToken::new()).await;
        assert!(pass.is_err(), "{pass:?}");
        assert_eq!(self.proxy.trap_fired(), 1);
        self.broker.receive(&self.queue, rows, WITHIN).await;
        self.come_back().await;
    }

    /// The proxy healed, and the repairer's client has found the server again.
    async fn come_back(&self) {
        self.proxy.heal();
        let deadline = tokio::time::Instant::now() + WITHIN;
        let admin = self.client.database("admin");
        while admin.run_command(doc! {"ping": 1}).await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "MongoDB did not come back"
            );
        }
    }

    async fn finish(self) {
        self.publisher.close().await;
        self.broker.close().await;
        self.db.drop().await;
    }
}

#[tokio::test]
async fn rows_claimed_by_a_pass_cut_after_its_claim_are_pending_again_and_published_next() {
    let world = Cut::new().await;
    let rows = world.rows(3).await;
    world.pass_cut_at_its_first_mark(3).await;

    // The server is back: the claim the failed pass held is given back, for any relay at once.
    assert_eq!(world.repairer.give_back_held().await.expect("give back"), 3);
    for (id, _) in &rows {
        let row = world.row(id).await;
        assert_eq!(row.get_str("status"), Ok("PENDING"), "{row}");
        assert!(!row.contains_key("claim_token"), "{row}");
    }
    let pass = world.repairer.repair_once(&CancellationToken::new()).await;
    let pass = pass.expect("the next pass");

    assert_eq!(pass.relayed.published, 3, "{pass:?}");
    // Published once more each (the marks were lost): at least once, deduped on the ce-id.
    let deliveries = world.broker.receive(&world.queue, 3, WITHIN).await;
    let mut sent: Vec<String> = deliveries.iter().map(support::ce_id).collect();
    let mut expected: Vec<String> = rows.iter().map(|(_, ce_id)| ce_id.clone()).collect();
    sent.sort();
    expected.sort();
    assert_eq!(sent, expected);
    for (id, _) in &rows {
        assert_eq!(world.row(id).await.get_str("status"), Ok("PUBLISHED"));
    }
    world.finish().await;
}

#[tokio::test]
async fn a_row_another_relay_took_over_is_not_given_back() {
    let world = Cut::new().await;
    let rows = world.rows(2).await;
    world.pass_cut_at_its_first_mark(2).await;
    // Another relay, once the claim timeout passed, takes the oldest row over.
    let later = Utc::now() + chrono::Duration::minutes(11);
    let windows = ClaimWindows::default();
    let store = world.direct();
    let other = outbox_claim::claim(&store, SINGLE_TENANT, Candidates::Stuck, 1, later, &windows);
    let other = other.await.expect("the other relay's claim");
    assert_eq!(other.rows.len(), 1);

    assert_eq!(world.repairer.give_back_held().await.expect("give back"), 1);

    let taken = world.row(&rows[0].0).await;
    assert_eq!(taken.get_str("status"), Ok("PROCESSING"), "{taken}");
    assert_eq!(taken.get_str("claim_token"), Ok(other.token.as_str()));
    let given = world.row(&rows[1].0).await;
    assert_eq!(given.get_str("status"), Ok("PENDING"), "{given}");
    world.finish().await;
}

#[tokio::test]
async fn a_pass_that_cannot_read_the_request_ids_publishes_nothing_and_gives_every_row_back() {
    let world = Cut::new().await;
    let rows = world.rows(2).await;
    world
        .proxy
        .set_trap(Trap::before(b"fetcher_worker.request_id").and_go_down());

    let pass = world.repairer.repair_once(&CancellationToken::new()).await;

    assert!(pass.is_err(), "{pass:?}");
    assert_eq!(world.broker.depth(&world.queue).await, 0);
    world.come_back().await;
    assert_eq!(world.repairer.give_back_held().await.expect("give back"), 2);
    for (id, _) in &rows {
        assert_eq!(world.row(id).await.get_str("status"), Ok("PENDING"));
    }
    world.finish().await;
}

#[tokio::test]
async fn a_publish_whose_mark_and_its_retry_are_cut_gives_its_row_back_pending_at_once() {
    // MongoDB stays there: only the mark is cut, and its retry (the driver retries a write once).
    let world = Cut::with_selection_timeout(Duration::from_secs(10)).await;
    let recorded = world.recorded_end().await;
    world.proxy.set_trap(Trap::before(b"PUBLISHED").times(2));

    let sent = world.relay.deliver(PUBLISHER, &[recorded.pending]).await;

    assert!(sent.is_err(), "{sent:?}");
    assert_eq!(world.proxy.trap_fired(), 2, "the mark and its retry");
    world.broker.receive(&world.queue, 1, WITHIN).await;
    let row = world.row(&recorded.row_id.to_string()).await;
    assert_eq!(row.get_str("status"), Ok("PENDING"), "{row}");
    assert!(!row.contains_key("claim_token"), "{row}");
    assert_eq!(world.repairer.give_back_held().await.expect("held"), 0);
    // Any relay takes it at once: published again (at least once), then marked.
    let pass = world.repairer.repair_once(&CancellationToken::new()).await;
    assert_eq!(pass.expect("the next pass").relayed.published, 1);
    let again = world.broker.receive(&world.queue, 1, WITHIN).await;
    assert_eq!(support::ce_id(&again[0]), recorded.event.ce_id());
    let row = world.row(&recorded.row_id.to_string()).await;
    assert_eq!(row.get_str("status"), Ok("PUBLISHED"), "{row}");
    world.finish().await;
}

#[tokio::test]
async fn a_publish_whose_mongodb_goes_away_before_its_mark_leaves_its_row_to_the_next_pass() {
    let world = Cut::new().await;
    let recorded = world.recorded_end().await;
    world
        .proxy
        .set_trap(Trap::before(b"PUBLISHED").and_go_down());

    let sent = world.relay.deliver(PUBLISHER, &[recorded.pending]).await;

    assert!(sent.is_err(), "{sent:?}");
    assert_eq!(world.proxy.trap_fired(), 1);
    world.broker.receive(&world.queue, 1, WITHIN).await;
    let id = recorded.row_id.to_string();
    let row = world.row(&id).await;
    assert_eq!(row.get_str("claim_token"), Ok(PUBLISHER), "{row}");
    world.come_back().await;

    // The repairer's next pass gives back what the publisher held, then publishes it again.
    let pass = world.repairer.repair_once(&CancellationToken::new()).await;

    assert_eq!(pass.expect("the next pass").relayed.published, 1);
    let again = world.broker.receive(&world.queue, 1, WITHIN).await;
    assert_eq!(support::ce_id(&again[0]), recorded.event.ce_id());
    let row = world.row(&id).await;
    assert_eq!(row.get_str("status"), Ok("PUBLISHED"), "{row}");
    world.finish().await;
}
