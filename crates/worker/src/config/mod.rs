//! Settings from the environment (contract §9): the upstream variable names, validated at
//! start, every problem reported at once, no secret ever printed. A numeric setting at or below
//! 0 takes its default with a warning (as upstream), one out of range is refused; so is a bad
//! `DATASOURCE_<NAME>_*` group (upstream skips it), an unknown log level or format and a URL of
//! a scheme the Worker does not speak. A secret may come from a file (`<NAME>_FILE`). A variable
//! that looks like one of the Worker's, or is upstream's only, is a warning.

#[cfg(test)]
mod caps_tests;
#[cfg(test)]
mod chart_tests;
mod checks;
#[cfg(test)]
mod checks_tests;
pub mod command;
mod number;
mod reader;
#[cfg(test)]
mod reference_tests;
mod secret_files;
#[cfg(test)]
mod state_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod traces_tests;
mod unrecognised;
mod variables;
#[cfg(test)]
mod walk_tests;
#[cfg(test)]
mod wire_tests;

pub use checks::{runtime_threads, RUNTIME_THREADS};
pub use variables::{env_example, markdown};

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use engine::connection::ConnectionConfig;
use engine::EngineConfig;
use secrecy::SecretString;

use reader::Reader;
use storage::StorageConfig;

/// The default work queue.
pub use contract::wire::DEFAULT_WORK_QUEUE;

/// Everything the Worker runs with.
#[derive(Debug)]
pub struct Settings {
    /// The key set derived from `APP_ENC_KEY` (its `Debug` prints no key).
    pub keys: crypto::KeySet,
    /// `APP_ENC_KEY_VERSION`: the version stored passwords must carry.
    pub key_version: String,
    pub amqp: AmqpSettings,
    /// Where jobs, executions and the outbox live: the Worker's PostgreSQL database, or the
    /// Manager's MongoDB (`STATE_BACKEND`, or which of `DATABASE_URL` and `MONGO_*` is set).
    pub state: StateSettings,
    /// What chose [`state`](Self::state), for `config check` and the start log.
    pub state_chosen_by: StateChoice,
    pub storage: StorageConfig,
    pub engine: EngineConfig,
    pub http: HttpSettings,
    pub shutdown: ShutdownSettings,
    pub outbox: OutboxSettings,
    pub retention: RetentionSettings,
    /// The MQTT mirror (lifecycle §5), when `MQTT_URL` is set.
    pub mqtt: Option<MqttSettings>,
    pub jobs: JobSettings,
    pub log: LogSettings,
    /// Traces to an OTLP/HTTP endpoint, when `ENABLE_TELEMETRY=true`.
    pub traces: Option<TraceSettings>,
    /// `DATASOURCE_<NAME>_*`, by connection name: the groups without problems.
    pub datasources: BTreeMap<String, ConnectionConfig>,
    /// What was replaced by a default, what protects less than it reads, and the variables set
    /// that look like the Worker's or upstream's but are not read, one sentence each (no secret
    /// in any): for the Worker to log once its logging is up.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct AmqpSettings {
    /// Built from `RABBITMQ_URI` (scheme), `_HOST`, `_PORT_AMQP`, `_DEFAULT_USER`,
    /// `_DEFAULT_PASS` and `RABBITMQ_VHOST`; or `RABBITMQ_URI` itself when it is a whole URI.
    pub uri: SecretString,
    pub work_queue: String,
    pub events_exchange: String,
    /// `RABBITMQ_NUMBERS_OF_WORKERS`: prefetch and concurrent jobs (≤0 → 5, at most 1000).
    pub consumers: u16,
    pub allow_legacy_body_signature: bool,
    /// `RABBITMQ_MAX_MESSAGE_BYTES` (default 4 MiB): a larger job message is dead-lettered
    /// unparsed.
    pub max_message_bytes: usize,
    /// `EVENT_MAX_METADATA_BYTES` (default 64 KiB): a job whose metadata is larger fails as
    /// invalid, so no event carries more.
    pub max_metadata_bytes: u64,
    /// `STREAMING_CLOUDEVENTS_SOURCE`.
    pub cloudevents_source: String,
    /// `RABBITMQ_SIGNATURE_MAX_AGE_SEC` (default 300, upstream's window): the oldest signature a
    /// job's first acceptance takes. A later delivery of an accepted job is checked against the
    /// accepted body instead.
    pub signature_max_age_secs: i64,
}

/// The state backend and its settings.
#[derive(Debug, Clone)]
pub enum StateSettings {
    /// `DATABASE_URL`: the Worker's own PostgreSQL schema (`migrations/`).
    Postgres(DatabaseSettings),
    /// `MONGO_*`: the Manager's MongoDB, shared with the Go Manager (the Manager mode,
    /// docs/UPSTREAM-MANAGER.md).
    MongoDb(MongoSettings),
}

impl StateSettings {
    /// `STATE_BACKEND`'s spelling of this backend.
    pub fn name(&self) -> &'static str {
        match self {
            StateSettings::Postgres(_) => "postgres",
            StateSettings::MongoDb(_) => "mongodb",
        }
    }
}

/// Why the state backend is the one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateChoice {
    /// `STATE_BACKEND` names it.
    Variable,
    /// Only one backend is configured (`DATABASE_URL`, or `MONGO_*`), or neither (PostgreSQL).
    Environment,
}

impl fmt::Display for StateChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateChoice::Variable => "set by STATE_BACKEND",
            StateChoice::Environment => "chosen by the environment: DATABASE_URL or MONGO_*",
        })
    }
}

/// The Manager's MongoDB, from upstream's variables read with upstream's meaning
/// (`fetcher:components/worker/internal/bootstrap/config.go:849-875`, lib-commons'
/// `commons/mongo/mongo.go`).
#[derive(Debug, Clone)]
pub struct MongoSettings {
    /// `MONGO_URI://MONGO_USER:MONGO_PASSWORD@MONGO_HOST:MONGO_PORT/?MONGO_PARAMETERS`, user and
    /// password percent-encoded; no credentials when `MONGO_USER` is unset.
    pub uri: SecretString,
    /// `MONGO_NAME`, trimmed: `job` and `connection` live in its lower-case form, the outbox in
    /// it as given (UPSTREAM-MANAGER §0.3).
    pub name: String,
    /// `MONGO_MAX_POOL_SIZE` (≤0 → 100, as upstream; at most 1000, lib-commons' ceiling).
    pub max_pool_size: u32,
    /// `MONGO_TLS_CA_CERT`, decoded: PEM CA certificates. Set, the connection uses TLS with
    /// these roots whatever `MONGO_PARAMETERS` says, as lib-commons sets a TLS config.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Whether the connection is encrypted: `tls=true` (or `ssl=true`) in `MONGO_PARAMETERS`,
    /// or a `MONGO_TLS_CA_CERT`. Without it the start is refused unless
    /// `ALLOW_INSECURE_TLS` is true.
    pub tls: bool,
}

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `DATABASE_URL`: the Worker's PostgreSQL state database.
    pub url: SecretString,
    pub max_connections: u32,
    /// `DATABASE_RUN_MIGRATIONS` (default true).
    pub run_migrations: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct HttpSettings {
    /// `HEALTH_BIND` (default `0.0.0.0`, so probes from outside the pod reach it).
    pub bind: std::net::IpAddr,
    /// `HEALTH_PORT` (default 4007; ≤0 or above 65535 → 4007, as upstream).
    pub port: u16,
    /// `API_PORT` (default 4008) of the control API on the same address; `None` when
    /// `API_ENABLED=false`.
    pub api_port: Option<u16>,
}

/// `RABBITMQ_MAX_MESSAGE_BYTES`'s default: 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;
/// `EVENT_MAX_METADATA_BYTES`'s default: 64 KiB.
pub const DEFAULT_MAX_METADATA_BYTES: u64 = 64 << 10;

#[derive(Debug, Clone, Copy)]
pub struct ShutdownSettings {
    /// `READYZ_DRAIN_DELAY_SEC` (default 12): how long `/readyz` says 503 before consuming stops.
    pub readyz_drain_delay: Duration,
    /// `SHUTDOWN_GRACE_SEC` (default 330): the longest in-flight jobs get to finish.
    pub grace: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct OutboxSettings {
    /// `OUTBOX_REPAIR_INTERVAL_SEC` (default 30).
    pub repair_interval: Duration,
    /// `OUTBOX_REPAIR_BATCH` (default 25).
    pub repair_batch: i64,
    /// `OUTBOX_REPAIR_GRACE_SEC` (default 10): rows younger than this are left to the normal path.
    pub repair_grace: Duration,
    /// `OUTBOX_RETENTION_HOURS` (default 168): published rows are deleted after this long.
    pub retention: Duration,
    /// `MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC` (default 600, lib-commons' `ProcessingTimeout`): the
    /// Manager mode's relay takes over a claimed row of lib-streaming's outbox left this long.
    /// Read in every mode, used in the Manager mode only.
    pub manager_claim_timeout: Duration,
    /// `MANAGER_OUTBOX_RETRY_AFTER_SEC` (default 300, lib-commons' `RetryWindow`): the Manager
    /// mode's relay retries a failed row of lib-streaming's outbox left this long.
    pub manager_retry_after: Duration,
}

/// Retention (issue 37): each part off unless set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    /// `RESULT_RETENTION_DAYS`: a completed job's result is deleted (through the lifecycle's
    /// delete, comment `retention`) this long after it completed.
    pub results: Option<Duration>,
    /// `JOB_RETENTION_DAYS`: the rows of a job that ended holding no object (failed,
    /// canceled, a deleted job's tombstone) are deleted this long after its last change.
    pub jobs: Option<Duration>,
    /// `RETENTION_INTERVAL_SEC` (default 300): how often a pass runs.
    pub interval: Duration,
}

impl RetentionSettings {
    /// Whether any part is on.
    pub fn enabled(&self) -> bool {
        self.results.is_some() || self.jobs.is_some()
    }
}

/// The MQTT mirror's settings.
#[derive(Debug, Clone)]
pub struct MqttSettings {
    /// `MQTT_URL`: `mqtt://host[:port]` or `mqtts://host[:port]`.
    pub url: publisher::mqtt::MqttUrl,
    /// `MQTT_CLIENT_ID` (default: the Worker id).
    pub client_id: String,
    /// `MQTT_USERNAME`.
    pub username: Option<String>,
    /// `MQTT_PASSWORD` (never printed).
    pub password: Option<SecretString>,
    /// `MQTT_TOPIC_PREFIX` (default `fetcher`): no `$`, no wildcard, no empty level.
    pub topic_prefix: String,
    /// `MQTT_KEEP_ALIVE_SEC` (default 30).
    pub keep_alive: Duration,
    /// `MQTT_CA_FILE`: PEM CA certificates for `mqtts://` instead of the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone)]
pub struct JobSettings {
    /// `JOB_LEASE_SEC` (default 30): a claim lasts this long and is renewed while the job runs;
    /// a job whose Worker died is taken over once it lapses.
    pub lease: Duration,
    /// `WORKER_ID` (default: host name, process id and a random suffix).
    pub worker_id: String,
    /// `OBJECT_STORAGE_RETRY_SEC` (default 60): how long a result that could not be written is
    /// retried in the same run before the job fails (never past the job's timeout).
    pub storage_retry: Duration,
    /// `DATASOURCE_<NAME>_MAX_CONCURRENT` (1 to 1000; unset: no cap), by connection name: how
    /// many reads of the datasource run at once across every replica (slots in the state
    /// database, either backend). A group of the cap alone caps the stored connection of its
    /// name.
    pub datasource_caps: BTreeMap<String, u32>,
}

#[derive(Debug, Clone)]
pub struct LogSettings {
    /// `LOG_LEVEL` (default `info`): a `tracing` filter.
    pub level: String,
    /// `LOG_FORMAT=json` for JSON lines; human-readable otherwise.
    pub json: bool,
}

/// Where and how spans are exported (`ENABLE_TELEMETRY=true`).
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// The traces URL: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`, else `http://localhost:4318/v1/traces`.
    pub endpoint: String,
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub protocol: TraceProtocol,
    /// `OTEL_EXPORTER_OTLP_HEADERS`, decoded: credentials, never printed.
    pub headers: Vec<(String, SecretString)>,
    /// `OTEL_SERVICE_NAME` (default `fetcher-worker`).
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, decoded.
    pub resource: Vec<(String, String)>,
}

/// How spans are encoded over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceProtocol {
    /// `http/protobuf` (the default).
    Protobuf,
    /// `http/json`.
    Json,
}

/// Every problem found in the environment, each naming its variable and never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub problems: Vec<String>,
    /// The warnings of the same reading (a misspelt name often explains a problem).
    pub warnings: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the Worker cannot start, its configuration has {} problem(s):",
            self.problems.len()
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        for warning in &self.warnings {
            write!(f, "\n  warning: {warning}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// The process environment's variables whose name and value are UTF-8 (the others the Worker
/// cannot read).
pub fn env_vars() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
}

impl Settings {
    /// The PostgreSQL state database, when it is the state backend.
    pub fn database(&self) -> Option<&DatabaseSettings> {
        match &self.state {
            StateSettings::Postgres(database) => Some(database),
            StateSettings::MongoDb(_) => None,
        }
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Settings, ConfigError> {
        Settings::from_vars(env_vars())
    }

    /// Reads settings from variables (the environment, or a test's map).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let given: BTreeMap<String, String> = vars.into_iter().collect();
        let unrecognised = unrecognised::warnings(&given);
        let files = secret_files::resolve(given);
        let vars = files.vars;
        let mut r = Reader::new(&vars);
        let settings = reader::read(&mut r, &vars);
        let mut problems = files.problems;
        // A secret whose file was not read is not also "required".
        problems.extend(r.into_problems().into_iter().filter(|problem| {
            !files
                .failed
                .iter()
                .any(|name| problem.starts_with(&format!("{name} is required")))
        }));
        problems.extend(checks::problems(&vars));
        match settings {
            Some(mut settings) if problems.is_empty() => {
                settings.warnings.extend(unrecognised);
                Ok(settings)
            }
            Some(settings) => Err(ConfigError {
                problems,
                warnings: settings.warnings.into_iter().chain(unrecognised).collect(),
            }),
            None => Err(ConfigError {
                problems,
                warnings: unrecognised,
            }),
        }
    }
}
