//! The compose stack's broker as the compose file configures it: a private RabbitMQ node started
//! with `deploy/compose/rabbitmq/` (its `rabbitmq.conf` and `enabled_plugins`), the topology of
//! `deploy/rabbitmq/definitions.json` and the users file of compose's `configs`, placed as the
//! compose file mounts them; then the Workers' login (compose's `RABBITMQ_DEFAULT_USER` and
//! `RABBITMQ_DEFAULT_PASS`, the password at its default) reads and writes the work queue.
//!
//! The node is this machine's `rabbitmq-server` (Debian's, which `scripts/services.sh` installs)
//! under a node name, ports and directories of its own; the shared broker is never touched.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use lapin::options::{BasicGetOptions, BasicPublishOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

use crate::tools::{fresh_dir, root, run, text, yaml_documents};

/// Where compose mounts the definitions, as rabbitmq.conf names it.
const DEFINITIONS_DIR: &str = "/etc/rabbitmq/definitions.d";

#[tokio::test]
async fn the_compose_broker_lets_the_workers_log_in_and_holds_the_topology() {
    let compose = &yaml_documents(&root().join("deploy/compose/compose.yaml"))[0];
    let env = &compose["x-worker-env"];
    let user = env["RABBITMQ_DEFAULT_USER"]
        .as_str()
        .expect("the Workers' user");
    let password = default_of(
        env["RABBITMQ_DEFAULT_PASS"]
            .as_str()
            .expect("their password"),
    );
    let queue = env["RABBITMQ_FETCHER_WORK_QUEUE"]
        .as_str()
        .expect("the work queue");

    let node = PrivateNode::start(compose);
    let uri = format!("amqp://{user}:{password}@127.0.0.1:{}/%2f", node.amqp_port);
    let connection = Connection::connect(&uri, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the Workers cannot log in to the compose broker: {e}\n{}",
                node.log()
            )
        });
    let channel = connection.create_channel().await.expect("a channel");
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    for name in [queue, "fetcher.dlq"] {
        channel
            .queue_declare(name.into(), passive, FieldTable::default())
            .await
            .unwrap_or_else(|e| panic!("the definitions declare no {name}: {e}"));
    }
    // Write and read: the user has the permissions the Worker needs.
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            b"compose",
            BasicProperties::default(),
        )
        .await
        .expect("publish")
        .await
        .expect("publish");
    let got = loop {
        let got = channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .expect("the Workers' user reads the work queue");
        if let Some(message) = got {
            break message;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(got.delivery.data, b"compose");
    connection.close(200, "OK".into()).await.ok();
}

/// `${NAME:-default}` → `default`; anything else as it is.
fn default_of(value: &str) -> String {
    match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        Some(inner) => inner
            .split_once(":-")
            .map(|(_, default)| default.to_owned())
            .unwrap_or_default(),
        None => value.to_owned(),
    }
}

/// A RabbitMQ node of this test's own, stopped and removed when dropped.
struct PrivateNode {
    name: String,
    dir: PathBuf,
    amqp_port: u16,
    server: Child,
}

impl PrivateNode {
    /// Starts the node with the compose file's broker configuration and waits until it has
    /// booted (definitions imported, listeners open).
    fn start(compose: &serde_json::Value) -> PrivateNode {
        let dir = fresh_dir();
        let definitions = dir.join("definitions.d");
        std::fs::create_dir_all(&definitions).expect("definitions dir");
        let rabbitmq = &compose["services"]["rabbitmq"];
        place_definitions(compose, rabbitmq, &definitions);

        let [amqp_port, dist_port, management_port, prometheus_port] = free_ports();
        let conf = std::fs::read_to_string(root().join("deploy/compose/rabbitmq/rabbitmq.conf"))
            .expect("compose's rabbitmq.conf");
        assert!(
            conf.contains(&format!("load_definitions = {DEFINITIONS_DIR}")),
            "rabbitmq.conf loads the definitions compose mounts:\n{conf}"
        );
        // The compose file's configuration, pointed at this node's files and ports.
        let conf = format!(
            "{}\nlisteners.tcp.default = 127.0.0.1:{amqp_port}\nmanagement.tcp.ip = 127.0.0.1\n\
             management.tcp.port = {management_port}\nprometheus.tcp.ip = 127.0.0.1\n\
             prometheus.tcp.port = {prometheus_port}\n",
            conf.replace(DEFINITIONS_DIR, &definitions.display().to_string())
        );
        std::fs::write(dir.join("rabbitmq.conf"), conf).expect("rabbitmq.conf");
        std::fs::copy(
            root().join("deploy/compose/rabbitmq/enabled_plugins"),
            dir.join("enabled_plugins"),
        )
        .expect("enabled_plugins");
        for sub in ["mnesia", "log"] {
            std::fs::create_dir_all(dir.join(sub)).expect("node dir");
        }
        give_to_rabbitmq(&dir);

        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .subsec_nanos();
        let name = format!("fetcher-compose-{}-{nanos}@localhost", std::process::id());
        let server = node_command(&name, &dir, "rabbitmq-server")
            .env("RABBITMQ_NODE_PORT", amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            )
            .stdout(Stdio::from(
                std::fs::File::create(dir.join("server.out")).expect("server.out"),
            ))
            .stderr(Stdio::null())
            .spawn()
            .expect("rabbitmq-server (scripts/services.sh rabbitmq installs it)");
        let node = PrivateNode {
            name,
            dir,
            amqp_port,
            server,
        };
        // `rabbitmqctl wait` waits for the pid file, then for the node to have booted.
        let waited = run(node_command(&node.name, &node.dir, "rabbitmqctl").args([
            "wait",
            &node.dir.join("pid").display().to_string(),
            "--timeout",
            "180",
        ]));
        assert!(
            waited.status.success(),
            "the compose broker did not boot:\n{}\n{}",
            text(&waited),
            node.log()
        );
        node
    }

    /// The server's own output, for a failure message.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.out")).unwrap_or_default()
    }
}

impl Drop for PrivateNode {
    fn drop(&mut self) {
        let _ = run(node_command(&self.name, &self.dir, "rabbitmqctl").arg("stop"));
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A RabbitMQ command for the node `name` whose files are in `dir` (the machine's own
/// `rabbitmq-env.conf` is not read: it names the shared node).
fn node_command(name: &str, dir: &Path, program: &str) -> Command {
    let mut command = Command::new(program);
    command
        .env("RABBITMQ_CONF_ENV_FILE", "/dev/null")
        .env("RABBITMQ_NODENAME", name)
        .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
        .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
        .env("RABBITMQ_LOG_BASE", dir.join("log"))
        .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
        .env("RABBITMQ_PID_FILE", dir.join("pid"));
    command
}

/// The files compose mounts in the definitions directory, by their target's name: the topology
/// (a volume of `deploy/`) and the users (a `configs` entry, its `${VAR:-default}`s at their
/// defaults).
fn place_definitions(compose: &serde_json::Value, rabbitmq: &serde_json::Value, into: &Path) {
    let mut placed = Vec::new();
    for volume in rabbitmq["volumes"].as_array().into_iter().flatten() {
        let spec = volume.as_str().expect("short volume syntax");
        let mut parts = spec.split(':');
        let (Some(source), Some(target)) = (parts.next(), parts.next()) else {
            continue;
        };
        if let Some(file) = target.strip_prefix(&format!("{DEFINITIONS_DIR}/")) {
            let source = root().join("deploy/compose").join(source);
            std::fs::copy(&source, into.join(file)).expect("a definitions volume");
            placed.push(file.to_owned());
        }
    }
    for config in rabbitmq["configs"].as_array().into_iter().flatten() {
        let target = config["target"].as_str().expect("a config's target");
        let Some(file) = target.strip_prefix(&format!("{DEFINITIONS_DIR}/")) else {
            continue;
        };
        let source = config["source"].as_str().expect("a config's source");
        let content = compose["configs"][source]["content"]
            .as_str()
            .unwrap_or_else(|| panic!("compose's configs has no content for {source}"));
        std::fs::write(into.join(file), interpolate_defaults(content)).expect("a config");
        placed.push(file.to_owned());
    }
    assert!(
        placed.len() >= 2,
        "compose mounts the topology and the users in {DEFINITIONS_DIR}: {placed:?}"
    );
}

/// Every `${NAME:-default}` of `text` replaced by its default, as compose does with NAME unset.
fn interpolate_defaults(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("a closed ${...}") + start;
        out.push_str(&default_of(&rest[start..=end]));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Four ports free on the loopback interface now.
fn free_ports() -> [u16; 4] {
    let listeners: Vec<TcpListener> = (0..4)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    let port = |i: usize| listeners[i].local_addr().expect("addr").port();
    [port(0), port(1), port(2), port(3)]
}

/// `rabbitmq-server` run by root drops to the `rabbitmq` user, which must own the node's files.
fn give_to_rabbitmq(dir: &Path) {
    let chown = run(Command::new("chown")
        .args(["-R", "rabbitmq:rabbitmq"])
        .arg(dir));
    assert!(
        chown.status.success(),
        "the node's files must belong to the rabbitmq user (the tests run as root): {}",
        text(&chown)
    );
}
