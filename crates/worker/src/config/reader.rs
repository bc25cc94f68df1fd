//! Reading and checking variables one by one, collecting every problem instead of stopping.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use engine::EngineConfig;
use secrecy::SecretString;

use super::*;
use crate::storage::{StaticCredentials, StorageConfig};

/// Variables with the problems found so far.
pub(super) struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    problems: Vec<String>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(vars: &'a BTreeMap<String, String>) -> Self {
        Reader {
            vars,
            problems: Vec::new(),
        }
    }

    pub(super) fn into_problems(self) -> Vec<String> {
        self.problems
    }

    fn problem(&mut self, text: String) {
        self.problems.push(text);
    }

    /// The value, `None` when unset or blank.
    fn get(&self, name: &str) -> Option<&'a str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn text(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or(default).to_owned()
    }

    fn required(&mut self, name: &str, why: &str) -> Option<String> {
        let value = self.get(name).map(str::to_owned);
        if value.is_none() {
            self.problem(format!("{name} is required ({why})"));
        }
        value
    }

    fn parsed<T: FromStr>(&mut self, name: &str, default: T, what: &str) -> T {
        match self.get(name) {
            None => default,
            Some(text) => text.parse().unwrap_or_else(|_| {
                self.problem(format!("{name} must be {what}"));
                default
            }),
        }
    }

    fn flag(&mut self, name: &str, default: bool) -> bool {
        match self.get(name).map(str::to_ascii_lowercase).as_deref() {
            None => default,
            Some("true" | "1" | "yes") => true,
            Some("false" | "0" | "no") => false,
            Some(_) => {
                self.problem(format!("{name} must be true or false"));
                default
            }
        }
    }

    /// A whole number of bytes above zero.
    fn positive<T: FromStr + Default + PartialOrd>(&mut self, name: &str, default: T) -> T {
        let value = self.parsed(name, default, "a whole number of bytes above 0");
        if value <= T::default() {
            self.problem(format!("{name} must be a whole number of bytes above 0"));
        }
        value
    }

    fn seconds(&mut self, name: &str, default: u64) -> Duration {
        Duration::from_secs(self.parsed(name, default, "a whole number of seconds"))
    }
}

pub(super) fn read(r: &mut Reader<'_>, vars: &BTreeMap<String, String>) -> Option<Settings> {
    let keys = match r.get("APP_ENC_KEY") {
        None => {
            r.problem("APP_ENC_KEY is required (standard base64 of at least 32 bytes)".into());
            None
        }
        // The key error names the variable and what is wrong, never the value.
        Some(key) => crypto::KeySet::from_base64(key)
            .map_err(|e| r.problem(e.to_string()))
            .ok(),
    };
    if !r.flag("STREAMING_ENABLED", false) {
        r.problem("STREAMING_ENABLED must be true: the Worker publishes job events".into());
    }
    let amqp = amqp(r);
    let database = database(r);
    let storage = storage(r);
    let engine = engine(r);
    let datasources =
        engine::connection::from_env_vars(vars.iter().map(|(k, v)| (k.clone(), v.clone())))
            .map_err(|e| r.problem(e.to_string()))
            .ok();
    // Everything is read before anything is required, so every problem is reported at once.
    let key_version = r.text("APP_ENC_KEY_VERSION", "1");
    let http = HttpSettings {
        bind: r.parsed(
            "HEALTH_BIND",
            std::net::IpAddr::from([0, 0, 0, 0]),
            "an IP address (0.0.0.0, 127.0.0.1, ::)",
        ),
        port: r.parsed("HEALTH_PORT", 4007, "a port number (0-65535)"),
    };
    let shutdown = ShutdownSettings {
        readyz_drain_delay: r.seconds("READYZ_DRAIN_DELAY_SEC", 12),
        grace: r.seconds("SHUTDOWN_GRACE_SEC", 330),
    };
    let outbox = OutboxSettings {
        repair_interval: r.seconds("OUTBOX_REPAIR_INTERVAL_SEC", 30),
        repair_batch: r
            .parsed("OUTBOX_REPAIR_BATCH", 25, "a positive number")
            .max(1),
        repair_grace: r.seconds("OUTBOX_REPAIR_GRACE_SEC", 10),
        retention: Duration::from_secs(
            3600 * r.parsed::<u64>("OUTBOX_RETENTION_HOURS", 168, "a whole number of hours"),
        ),
    };
    let jobs = JobSettings {
        lease: r.seconds("JOB_LEASE_SEC", 30).max(Duration::from_secs(2)),
        worker_id: r
            .get("WORKER_ID")
            .map_or_else(default_worker_id, str::to_owned),
        storage_retry: r.seconds("OBJECT_STORAGE_RETRY_SEC", 60),
    };
    let log = LogSettings {
        level: r.text("LOG_LEVEL", "info"),
        json: r.text("LOG_FORMAT", "text").eq_ignore_ascii_case("json"),
    };
    let settings = Settings {
        keys: keys?,
        key_version,
        amqp: amqp?,
        database: database?,
        storage: storage?,
        engine,
        http,
        shutdown,
        outbox,
        jobs,
        log,
        datasources: datasources?,
    };
    Some(settings)
}

fn amqp(r: &mut Reader<'_>) -> Option<AmqpSettings> {
    let exchange = r.required(
        "RABBITMQ_JOB_EVENTS_EXCHANGE",
        "the topic exchange of job events",
    );
    let source = r.required(
        "STREAMING_CLOUDEVENTS_SOURCE",
        "the ce-source of job events",
    );
    let workers: i64 = r.parsed("RABBITMQ_NUMBERS_OF_WORKERS", 5, "a whole number");
    let consumers = if workers <= 0 {
        5
    } else {
        workers.min(1000) as u16
    };
    let uri = match r.get("RABBITMQ_URI") {
        Some(uri) if uri.contains("://") => uri.to_owned(),
        scheme => {
            let scheme = scheme.unwrap_or("amqp");
            let host = r.text("RABBITMQ_HOST", "127.0.0.1");
            let port: u16 = r.parsed("RABBITMQ_PORT_AMQP", 5672, "a port number");
            let user = r.text("RABBITMQ_DEFAULT_USER", "guest");
            let pass = r.text("RABBITMQ_DEFAULT_PASS", "guest");
            let vhost = r.text("RABBITMQ_VHOST", "/");
            format!(
                "{scheme}://{}:{}@{host}:{port}/{}",
                percent_encode(&user),
                percent_encode(&pass),
                percent_encode(&vhost)
            )
        }
    };
    Some(AmqpSettings {
        uri: SecretString::from(uri),
        work_queue: r.text("RABBITMQ_FETCHER_WORK_QUEUE", DEFAULT_WORK_QUEUE),
        events_exchange: exchange?,
        consumers,
        allow_legacy_body_signature: r.flag("RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK", false),
        max_message_bytes: r.positive("RABBITMQ_MAX_MESSAGE_BYTES", DEFAULT_MAX_MESSAGE_BYTES),
        max_metadata_bytes: r.positive("EVENT_MAX_METADATA_BYTES", DEFAULT_MAX_METADATA_BYTES),
        cloudevents_source: source?,
        signature_max_age_secs: r.parsed(
            "RABBITMQ_SIGNATURE_MAX_AGE_SEC",
            300,
            "a whole number of seconds",
        ),
    })
}

fn database(r: &mut Reader<'_>) -> Option<DatabaseSettings> {
    let url = r.required("DATABASE_URL", "the Worker's PostgreSQL state database");
    Some(DatabaseSettings {
        url: SecretString::from(url?),
        max_connections: r
            .parsed("DATABASE_MAX_CONNECTIONS", 10, "a positive number")
            .max(1),
        run_migrations: r.flag("DATABASE_RUN_MIGRATIONS", true),
    })
}

fn storage(r: &mut Reader<'_>) -> Option<StorageConfig> {
    let bucket = r.required("OBJECT_STORAGE_BUCKET", "where results are stored");
    let access_key = r.get("OBJECT_STORAGE_ACCESS_KEY_ID");
    let secret_key = r.get("OBJECT_STORAGE_SECRET_KEY");
    let credentials = match (access_key, secret_key) {
        (Some(id), Some(secret)) => Some(StaticCredentials::new(id, secret)),
        (None, None) => None,
        _ => {
            r.problem(
                "OBJECT_STORAGE_ACCESS_KEY_ID and OBJECT_STORAGE_SECRET_KEY must be set together"
                    .into(),
            );
            None
        }
    };
    let mut config = StorageConfig::new(bucket?);
    config.endpoint = r.get("OBJECT_STORAGE_ENDPOINT").map(str::to_owned);
    config.region = r.text("OBJECT_STORAGE_REGION", "us-east-1");
    config.key_prefix = r.text("OBJECT_STORAGE_KEY_PREFIX", "");
    config.credentials = credentials;
    config.use_path_style = r.flag("OBJECT_STORAGE_USE_PATH_STYLE", false);
    Some(config)
}

fn engine(r: &mut Reader<'_>) -> EngineConfig {
    let defaults = EngineConfig::default();
    let max: i64 = r.parsed("ENGINE_MAX_RESULT_BYTES", 0, "a whole number of bytes");
    EngineConfig {
        max_result_bytes: if max <= 0 {
            engine::config::DEFAULT_MAX_RESULT_BYTES
        } else {
            max as u64
        },
        timeout: r.seconds("ENGINE_EXTRACTION_TIMEOUT_SEC", defaults.timeout.as_secs()),
        ..defaults
    }
}

/// Percent-encodes a URI user, password or vhost (RFC 3986 unreserved characters stay).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "worker".to_owned()
    } else {
        host
    };
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..8])
}
