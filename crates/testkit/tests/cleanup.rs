//! What a test that panics before its async cleanup leaves behind: nothing, once `Drop` ran.

use lapin::options::{ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::ExchangeKind;
use testkit::amqp::{self, Broker};
use testkit::pg::{self, TestDb};

#[tokio::test(flavor = "multi_thread")]
async fn a_database_dropped_without_its_cleanup_is_removed() {
    let db = TestDb::migrated().await;
    let extra = db.pool_with(2).await;
    sqlx::query("SELECT 1")
        .execute(&extra)
        .await
        .expect("query");
    let name = db.name.clone();
    std::mem::drop(db);

    let admin = sqlx::PgPool::connect(&pg::admin_url())
        .await
        .expect("admin");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_one(&admin)
        .await
        .expect("count");
    assert_eq!(left, 0, "{name} is still there");
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn queues_and_exchanges_of_a_broker_dropped_without_close_are_deleted() {
    let broker = Broker::connect().await;
    let exchange = amqp::unique("testkit-test", "exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "#").await;
    std::mem::drop(broker);

    // A passive declare of what is gone fails (and closes the channel): one channel per check.
    let check = Broker::connect().await;
    let channel = check.connection.create_channel().await.expect("channel");
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let queue_left = channel
        .queue_declare(queue.as_str().into(), passive, FieldTable::default())
        .await;
    assert!(queue_left.is_err(), "{queue} is still there");
    let channel = check.connection.create_channel().await.expect("channel");
    let passive = ExchangeDeclareOptions {
        passive: true,
        ..ExchangeDeclareOptions::default()
    };
    let exchange_left = channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Topic,
            passive,
            FieldTable::default(),
        )
        .await;
    assert!(exchange_left.is_err(), "{exchange} is still there");
    check.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tracked_queue_the_code_under_test_declared_is_deleted_by_close() {
    // The "code under test": another connection declares the queue, with arguments of its own.
    let other = Broker::connect().await;
    let queue = amqp::unique("testkit-test", "queue");
    other
        .channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("declare");
    let broker = Broker::connect().await;
    broker.track_queue(&queue);
    broker.track_queue(&queue);
    broker.close().await;

    let channel = other.connection.create_channel().await.expect("channel");
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let left = channel
        .queue_declare(queue.as_str().into(), passive, FieldTable::default())
        .await;
    assert!(left.is_err(), "{queue} is still there");
    other.close().await;
}
