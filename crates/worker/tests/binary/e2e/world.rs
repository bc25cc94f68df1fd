//! The harness itself: a world whose test never reached `World::cleanup` (it panicked) removes
//! what it created from `Drop`, so failed runs leave nothing on the shared servers.

use sqlx::Connection;

use crate::harness::{self, World};

#[tokio::test]
async fn a_world_dropped_without_cleanup_removes_its_databases_bucket_and_exchange() {
    let world = World::new().await;
    let _listener = world.listen().await;
    let (databases, bucket, exchange) = (
        [world.state_db.clone(), world.source_db.clone()],
        world.bucket.clone(),
        world.exchange.clone(),
    );
    assert!(harness::s3_client()
        .head_bucket()
        .bucket(&bucket)
        .send()
        .await
        .is_ok());
    drop(world);

    let mut admin = sqlx::PgConnection::connect(&testkit::pg::admin_url())
        .await
        .expect("admin");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = ANY($1)")
        .bind(&databases[..])
        .fetch_one(&mut admin)
        .await
        .expect("count databases");
    assert_eq!(left, 0, "databases {databases:?} remain");
    assert!(
        harness::s3_client()
            .head_bucket()
            .bucket(&bucket)
            .send()
            .await
            .is_err(),
        "bucket {bucket} remains"
    );
    let amqp = lapin::Connection::connect(
        &testkit::amqp::amqp_uri(),
        lapin::ConnectionProperties::default(),
    )
    .await
    .expect("broker");
    let channel = amqp.create_channel().await.expect("channel");
    let passive = channel
        .exchange_declare(
            exchange.as_str().into(),
            lapin::ExchangeKind::Topic,
            lapin::options::ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            Default::default(),
        )
        .await;
    assert!(passive.is_err(), "exchange {exchange} remains");
    let _ = amqp.close(200, "OK".into()).await;
}
