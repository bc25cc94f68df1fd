//! Which dead-letter queue `fetcherctl dlq` reads when `--dlq` names none: on a vhost of the
//! test's own, the one known queue that exists (upstream's repository `fetcher.dlq`, the Helm
//! chart's `fetcher.extract-external-data.dlq`), and a refusal naming both when neither or
//! both exist.

mod support;

use std::process::Output;

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use testkit::amqp::rabbitmqctl;
use uuid::Uuid;

const HELM_DLQ: &str = "fetcher.extract-external-data.dlq";
const REPOSITORY_DLQ: &str = "fetcher.dlq";

/// A vhost of the test's own, guest allowed in, deleted on drop.
struct Vhost(String);

impl Vhost {
    fn new() -> Vhost {
        let vhost = Vhost(format!("fetcherctl-test-{}", Uuid::new_v4().simple()));
        rabbitmqctl(&["add_vhost", &vhost.0]);
        rabbitmqctl(&["set_permissions", "-p", &vhost.0, "guest", ".*", ".*", ".*"]);
        vhost
    }

    fn uri(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:5672/{}", self.0)
    }

    async fn declare(&self, queue: &str) {
        let connection = Connection::connect(&self.uri(), ConnectionProperties::default())
            .await
            .expect("connect to the test's vhost");
        let channel = connection.create_channel().await.expect("channel");
        let options = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(queue.into(), options, FieldTable::default())
            .await
            .expect("declare the queue");
        let _ = connection.close(200, "OK".into()).await;
    }

    fn dlq(&self, args: &[&str]) -> Output {
        support::fetcherctl()
            .env("AMQP_URI", self.uri())
            .arg("dlq")
            .args(args)
            .output()
            .expect("run fetcherctl")
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = std::process::Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.0])
            .output();
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn without_dlq_the_one_known_dead_letter_queue_that_exists_is_read() {
    let vhost = Vhost::new();

    let neither = vhost.dlq(&["list"]);
    assert!(!neither.status.success(), "{}", text(&neither));
    for expected in [
        "no dead-letter queue in this vhost",
        REPOSITORY_DLQ,
        HELM_DLQ,
        "--dlq",
    ] {
        assert!(
            text(&neither).contains(expected),
            "{expected:?}: {}",
            text(&neither)
        );
    }

    vhost.declare(HELM_DLQ).await;
    let helm = vhost.dlq(&["list"]);
    assert!(helm.status.success(), "{}", text(&helm));
    assert!(
        text(&helm).starts_with(&format!("0 message(s) in {HELM_DLQ}\n")),
        "{}",
        text(&helm)
    );

    vhost.declare(REPOSITORY_DLQ).await;
    let both = vhost.dlq(&["list"]);
    assert!(!both.status.success(), "{}", text(&both));
    assert!(text(&both).contains("both"), "{}", text(&both));

    let named = vhost.dlq(&["list", "--dead-letter-queue", REPOSITORY_DLQ]);
    assert!(named.status.success(), "{}", text(&named));
    assert!(
        text(&named).starts_with(&format!("0 message(s) in {REPOSITORY_DLQ}\n")),
        "{}",
        text(&named)
    );
}
