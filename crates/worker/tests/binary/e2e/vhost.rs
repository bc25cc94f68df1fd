//! A vhost of a test's own, provisioned from a broker definitions file as upstream's
//! provisioning imports it, and the Manager's way of submitting a job to it.

use std::process::Command;
use std::time::{Duration, Instant};

use contract::envelope::{self, Route};
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use testkit::amqp::rabbitmqctl;

use crate::harness::World;

pub const WORK_QUEUE: &str = "fetcher.extract-external-data.queue";
pub const EVENTS_EXCHANGE: &str = "fetcher.job.events";

/// A vhost of the test's own, guest allowed in, deleted on drop.
pub struct Vhost(pub String);

impl Vhost {
    pub fn new(world: &World) -> Vhost {
        let vhost = Vhost(format!("fetcher-test-{}", world.id));
        rabbitmqctl(&["add_vhost", &vhost.0]);
        rabbitmqctl(&["set_permissions", "-p", &vhost.0, "guest", ".*", ".*", ".*"]);
        vhost
    }

    pub async fn connect(&self) -> (Connection, Channel) {
        let uri = format!("amqp://guest:guest@127.0.0.1:5672/{}", self.0);
        let connection = Connection::connect(&uri, ConnectionProperties::default())
            .await
            .expect("connect to the test's vhost");
        let channel = connection.create_channel().await.expect("channel");
        (connection, channel)
    }

    /// Imports `definitions` (with `@VHOST@` for the vhost) and waits until its last objects,
    /// the bindings, exist (the import runs in the background).
    pub async fn provision(&self, definitions: &str) {
        let path = std::env::temp_dir().join(format!("{}-definitions.json", self.0));
        std::fs::write(&path, definitions.replace("@VHOST@", &self.0)).expect("write definitions");
        rabbitmqctl(&["import_definitions", &path.to_string_lossy()]);
        let _ = std::fs::remove_file(&path);
        let parsed: serde_json::Value = serde_json::from_str(definitions).expect("fixture JSON");
        let expected = parsed["bindings"].as_array().expect("bindings").len();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let listed = self.list("list_bindings", "source_name");
            // The default exchange's implicit bindings have an empty source.
            if listed.len() >= expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the definitions import never finished: {listed:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The names of the vhost's queues.
    pub fn queues(&self) -> Vec<String> {
        self.list("list_queues", "name")
    }

    /// The names of the vhost's exchanges (the default exchange's is empty, so left out).
    pub fn exchanges(&self) -> Vec<String> {
        self.list("list_exchanges", "name")
    }

    fn list(&self, command: &str, column: &str) -> Vec<String> {
        rabbitmqctl(&[command, "-q", "--no-table-headers", "-p", &self.0, column])
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The Worker's environment for `world` on this vhost, with upstream's names.
    pub fn worker_env(
        &self,
        world: &World,
        port: u16,
    ) -> std::collections::BTreeMap<String, String> {
        let mut env = world.env(port);
        env.insert("RABBITMQ_VHOST".into(), self.0.clone());
        env.insert("RABBITMQ_FETCHER_WORK_QUEUE".into(), WORK_QUEUE.into());
        env.insert(
            "RABBITMQ_JOB_EVENTS_EXCHANGE".into(),
            EVENTS_EXCHANGE.into(),
        );
        env
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.0])
            .output();
    }
}

/// Publishes `body` to the work queue as the Manager does (default exchange, routing key = the
/// queue), signed with the internal key, or carrying `forged` as its signature.
pub async fn submit(world: &World, channel: &Channel, body: &[u8], forged: Option<&str>) {
    let route = Route {
        tenant: "",
        exchange: "",
        routing_key: WORK_QUEUE,
    };
    let signature = envelope::sign(chrono::Utc::now().timestamp(), &route, body, |p| {
        world.keys.internal_hmac().sign_hex(p)
    });
    let mut headers = FieldTable::default();
    for (name, value) in [
        (
            envelope::SIGNATURE_HEADER,
            forged.unwrap_or(signature.signature.as_str()),
        ),
        (envelope::TIMESTAMP_HEADER, signature.timestamp.as_str()),
        (envelope::VERSION_HEADER, signature.version),
    ] {
        headers.insert(name.into(), AMQPValue::LongString(LongString::from(value)));
    }
    channel
        .basic_publish(
            "".into(),
            WORK_QUEUE.into(),
            BasicPublishOptions::default(),
            body,
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers),
        )
        .await
        .expect("publish")
        .await
        .expect("publish confirm");
}
