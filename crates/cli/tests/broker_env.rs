//! `submit` and `watch` find the broker, the work queue and the events exchange with only the
//! Worker's `RABBITMQ_*` variables (no `AMQP_URI`, no `--queue` or `--exchange`), against the
//! real RabbitMQ: a vhost and a user of the test's own, whose password and vhost need
//! percent-encoding. A wrong password fails without showing it.

mod support;

use std::process::{Command, Output};

use chrono::Utc;
use lapin::options::{
    BasicGetOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::uri::{AMQPUri, AMQPUserInfo};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use support::events::{completed, publish_signed_at};
use support::watcher::Watcher;
use testkit::amqp::rabbitmqctl;
use uuid::Uuid;

/// A vhost and a user of the test's own, with every permission on it; both removed on drop.
struct Tenant {
    vhost: String,
    user: String,
    password: String,
    host: String,
    port: u16,
}

impl Tenant {
    fn create() -> Tenant {
        let id = Uuid::new_v4().simple().to_string();
        let test_broker: AMQPUri = support::amqp_uri().parse().expect("the test broker's URI");
        let tenant = Tenant {
            vhost: format!("fetcherctl-test/{id}"),
            user: format!("fetcherctl-test-{id}"),
            password: format!("p@ss:w/rd%{id}"),
            host: test_broker.authority.host,
            port: test_broker.authority.port,
        };
        rabbitmqctl(&["add_vhost", &tenant.vhost]);
        rabbitmqctl(&["add_user", &tenant.user, &tenant.password]);
        rabbitmqctl(&[
            "set_permissions",
            "-p",
            &tenant.vhost,
            &tenant.user,
            ".*",
            ".*",
            ".*",
        ]);
        tenant
    }

    /// The Worker's variables naming this broker, vhost and user.
    fn vars(&self) -> [(&'static str, String); 5] {
        [
            ("RABBITMQ_HOST", self.host.clone()),
            ("RABBITMQ_PORT_AMQP", self.port.to_string()),
            ("RABBITMQ_DEFAULT_USER", self.user.clone()),
            ("RABBITMQ_DEFAULT_PASS", self.password.clone()),
            ("RABBITMQ_VHOST", self.vhost.clone()),
        ]
    }

    /// `fetcherctl` with the Worker's variables and no `AMQP_URI`.
    fn fetcherctl(&self) -> Command {
        let mut command = support::fetcherctl();
        command.env_remove("AMQP_URI").envs(self.vars());
        command
    }

    /// The test's own channel in the vhost (confirm mode), connected without any URI text.
    async fn channel(&self) -> (Connection, Channel) {
        let mut uri: AMQPUri = support::amqp_uri().parse().expect("the test broker's URI");
        uri.authority.userinfo = AMQPUserInfo {
            username: self.user.clone(),
            password: self.password.clone(),
        };
        uri.vhost = self.vhost.clone();
        let connection = Connection::connect_uri(uri, ConnectionProperties::default())
            .await
            .expect("connect to the test vhost");
        let channel = connection.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        (connection, channel)
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.vhost])
            .output();
        let _ = Command::new("rabbitmqctl")
            .args(["delete_user", &self.user])
            .output();
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_no_secret(output: &Output, tenant: &Tenant) {
    for stream in [&output.stdout, &output.stderr] {
        let stream = text(stream);
        assert!(!stream.contains(&tenant.password), "{stream}");
        assert!(!stream.contains("p%40ss"), "{stream}");
        assert!(!stream.contains("amqp://"), "{stream}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_uses_the_workers_broker_and_queue_variables() {
    let tenant = Tenant::create();
    let (connection, channel) = tenant.channel().await;
    let queue = support::unique("queue");
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("declare the work queue in the vhost");

    let output = tenant
        .fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .env("RABBITMQ_FETCHER_WORK_QUEUE", &queue)
        .args([
            "submit",
            "--connection",
            "src",
            "--table",
            "t",
            "--fields",
            "id",
        ])
        .output()
        .expect("run submit");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_no_secret(&output, &tenant);
    let stdout = text(&output.stdout);
    let job_id = stdout
        .trim()
        .strip_prefix("Submitted job ")
        .unwrap_or_else(|| panic!("{stdout}"));

    // The confirm came before the command exited: the message is in the queue.
    let message = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .expect("get")
        .expect("the job message is on the work queue of the vhost");
    assert_eq!(message.delivery.routing_key.as_str(), queue);
    assert_eq!(
        message
            .delivery
            .properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str()),
        Some(job_id)
    );

    let _ = connection.close(200, "OK".into()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_uses_the_workers_broker_and_exchange_variables() {
    let tenant = Tenant::create();
    let (connection, channel) = tenant.channel().await;
    let exchange = support::unique("exchange");
    channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("declare the events exchange in the vhost");

    let mut command = tenant.fetcherctl();
    command
        .env("APP_ENC_KEY", support::MASTER)
        .env("RABBITMQ_JOB_EVENTS_EXCHANGE", &exchange);
    let mut watcher = Watcher::spawn(command, &["--count", "1", "--timeout", "30"]);
    let bound = tokio::task::block_in_place(|| watcher.wait_until_bound());
    assert!(
        bound.starts_with(&format!("Watching exchange {exchange:?} ")),
        "{bound}"
    );

    let event = completed(Uuid::new_v4(), Some("acme"));
    let key = support::keys().external_hmac().clone();
    let now = Utc::now().timestamp();
    publish_signed_at(&channel, &exchange, &event, now, &key).await;

    let finished = tokio::task::block_in_place(|| watcher.finish());
    assert!(finished.success, "{}\n{}", finished.stdout, finished.stderr);
    let first = finished.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "studio.lerian.job.completed {} tenant=acme signature=ok",
            event.ce_id()
        ),
        "{}",
        finished.stderr
    );
    for stream in [&finished.stdout, &finished.stderr] {
        assert!(!stream.contains(&tenant.password), "{stream}");
    }

    let _ = connection.close(200, "OK".into()).await;
}

#[test]
fn a_wrong_password_fails_without_showing_it() {
    let tenant = Tenant::create();
    let wrong = format!("wrong-{}", Uuid::new_v4().simple());
    let output = tenant
        .fetcherctl()
        .env("RABBITMQ_DEFAULT_PASS", &wrong)
        .env("APP_ENC_KEY", support::MASTER)
        .args([
            "submit",
            "--connection",
            "src",
            "--table",
            "t",
            "--fields",
            "id",
        ])
        .args(["--broker-timeout", "20"])
        .output()
        .expect("run submit");
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("Failed to connect to the broker (URI from the RABBITMQ_* variables)"),
        "{stderr}"
    );
    assert!(!stderr.contains(&wrong), "{stderr}");
    assert_no_secret(&output, &tenant);
}
