//! Reading and checking variables one by one, collecting every problem instead of stopping.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use engine::EngineConfig;
use secrecy::SecretString;

mod caps;
mod state;
mod traces;

use super::number::{self, Number, Reading};
use super::*;
use storage::{StaticCredentials, StorageConfig};

/// Variables with the problems and warnings found so far.
pub(super) struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    problems: Vec<String>,
    warnings: Vec<String>,
    /// The numeric variables read, so a test can tell that it walked every one.
    numbers_read: Vec<&'static str>,
    /// Every variable asked for, so a test can hold the configuration reference to the reader.
    #[cfg(test)]
    names_read: std::cell::RefCell<Vec<String>>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(vars: &'a BTreeMap<String, String>) -> Self {
        Reader {
            vars,
            problems: Vec::new(),
            warnings: Vec::new(),
            numbers_read: Vec::new(),
            #[cfg(test)]
            names_read: std::cell::RefCell::default(),
        }
    }

    pub(super) fn into_problems(self) -> Vec<String> {
        self.problems
    }

    fn problem(&mut self, text: String) {
        self.problems.push(text);
    }

    fn warning(&mut self, text: String) {
        self.warnings.push(text);
    }

    /// The numeric variables read so far.
    #[cfg(test)]
    pub(super) fn numbers_read(&self) -> &[&'static str] {
        &self.numbers_read
    }

    /// A numeric variable, within its range (see [`number`]).
    fn number(&mut self, spec: &Number) -> u64 {
        self.numbers_read.push(spec.name);
        match spec.read(self.get(spec.name)) {
            Reading::Value(value) => value,
            Reading::Replaced(value, warning) => {
                self.warning(warning);
                value
            }
            Reading::Refused(value, problem) => {
                self.problem(problem);
                value
            }
        }
    }

    /// A numeric variable that is off when unset (its `default` is never taken): `None` then.
    fn optional_number(&mut self, spec: &Number) -> Option<u64> {
        if self.get(spec.name).is_none() {
            self.numbers_read.push(spec.name);
            return None;
        }
        Some(self.number(spec)).filter(|value| *value > 0)
    }

    fn seconds(&mut self, spec: &Number) -> Duration {
        Duration::from_secs(self.number(spec))
    }

    /// Every variable asked for so far (numeric or not).
    #[cfg(test)]
    pub(super) fn names_read(&self) -> Vec<String> {
        self.names_read.borrow().clone()
    }

    fn note(&self, name: &str) {
        #[cfg(test)]
        self.names_read.borrow_mut().push(name.to_owned());
        #[cfg(not(test))]
        let _ = name;
    }

    /// The value, `None` when unset or blank.
    fn get(&self, name: &str) -> Option<&'a str> {
        self.note(name);
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The value exactly as set (a secret's spaces are its own); empty when unset.
    fn raw(&self, name: &str) -> String {
        self.note(name);
        self.vars.get(name).cloned().unwrap_or_default()
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
    let state = state::read(r);
    let storage = storage(r);
    let engine = engine(r);
    let (datasource_caps, datasource_vars) = caps::read(r, vars);
    let datasources = datasources(r, &datasource_vars);
    // Everything is read before anything is required, so every problem is reported at once.
    let key_version = r.text("APP_ENC_KEY_VERSION", "1");
    let http = HttpSettings {
        bind: r.parsed(
            "HEALTH_BIND",
            std::net::IpAddr::from([0, 0, 0, 0]),
            "an IP address (0.0.0.0, 127.0.0.1, ::)",
        ),
        port: port(r.number(&number::HEALTH_PORT)),
        api_port: r
            .flag("API_ENABLED", !manager_mode(&state))
            .then(|| port(r.number(&number::API_PORT))),
    };
    // Apart, a flood of the control API never holds a connection the probes need.
    if http.api_port == Some(http.port) {
        r.problem(format!(
            "API_PORT must differ from HEALTH_PORT (both {}): the control API and the health \
             server have listeners of their own",
            http.port
        ));
    }
    let shutdown = ShutdownSettings {
        readyz_drain_delay: r.seconds(&number::READYZ_DRAIN_DELAY_SEC),
        grace: r.seconds(&number::SHUTDOWN_GRACE_SEC),
    };
    let outbox = OutboxSettings {
        repair_interval: r.seconds(&number::OUTBOX_REPAIR_INTERVAL_SEC),
        repair_batch: signed(r.number(&number::OUTBOX_REPAIR_BATCH)),
        repair_grace: r.seconds(&number::OUTBOX_REPAIR_GRACE_SEC),
        retention: Duration::from_secs(3600 * r.number(&number::OUTBOX_RETENTION_HOURS)),
        manager_claim_timeout: r.seconds(&number::MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC),
        manager_retry_after: r.seconds(&number::MANAGER_OUTBOX_RETRY_AFTER_SEC),
    };
    let day = |days: u64| Duration::from_secs(86_400 * days);
    let retention = RetentionSettings {
        results: r.optional_number(&number::RESULT_RETENTION_DAYS).map(day),
        jobs: r.optional_number(&number::JOB_RETENTION_DAYS).map(day),
        interval: r.seconds(&number::RETENTION_INTERVAL_SEC),
    };
    let jobs = JobSettings {
        lease: r.seconds(&number::JOB_LEASE_SEC),
        worker_id: r
            .get("WORKER_ID")
            .map_or_else(default_worker_id, str::to_owned),
        storage_retry: r.seconds(&number::OBJECT_STORAGE_RETRY_SEC),
        datasource_caps,
    };
    let mqtt = mqtt(r, &jobs.worker_id);
    let log = LogSettings {
        level: r.text("LOG_LEVEL", "info"),
        json: r.text("LOG_FORMAT", "text").eq_ignore_ascii_case("json"),
    };
    let traces = traces::read(r);
    // The runtime's threads are taken by `main.rs` before the runtime starts (the default when
    // this is refused); the problem is reported with the others.
    if let Err(problem) = super::checks::runtime_threads(r.get(super::checks::RUNTIME_THREADS)) {
        r.problem(problem);
    }
    let state = state?;
    if let StateSettings::MongoDb(_) = state.0 {
        manager_mode_limits(r, &retention);
    }
    let settings = Settings {
        keys: keys?,
        key_version,
        amqp: amqp?,
        state: state.0,
        state_chosen_by: state.1,
        storage: storage?,
        engine,
        http,
        shutdown,
        outbox,
        retention,
        mqtt,
        jobs,
        log,
        traces,
        datasources,
        warnings: std::mem::take(&mut r.warnings),
    };
    Some(settings)
}

/// Whether the state backend read is the Manager's MongoDB.
fn manager_mode(state: &Option<(StateSettings, StateChoice)>) -> bool {
    matches!(state, Some((StateSettings::MongoDb(_), _)))
}

/// What the Manager mode does not run in this version, each a problem naming its variable:
/// started anyway, it would answer or publish from a state nobody writes. The control API is
/// off by default there (the Manager's `GET` is the authority, and upstream's Worker has none)
/// and served when `API_ENABLED=true` asks for it. The MQTT mirror runs there on a collection of
/// its own (`fetcher_worker_mirror`).
fn manager_mode_limits(r: &mut Reader<'_>, retention: &RetentionSettings) {
    let not_yet = |what: &str, variable: &str| {
        format!(
            "{variable} is set, but {what} is not available in the Manager mode (STATE_BACKEND \
             mongodb) in this version: unset {variable}, or run with the PostgreSQL backend"
        )
    };
    if retention.results.is_some() {
        r.problem(not_yet("result retention", "RESULT_RETENTION_DAYS"));
    }
    if retention.jobs.is_some() {
        r.problem(not_yet("job retention", "JOB_RETENTION_DAYS"));
    }
}

/// The MQTT mirror's settings, when `MQTT_URL` is set. The URL's error never repeats it, and the
/// password is never printed; the prefix is checked here, so a `$` or a wildcard stops the
/// start instead of every publish. Credentials over `mqtt://` are refused unless
/// `MQTT_ALLOW_CLEARTEXT_PASSWORD=true`, as a datasource's password needs `sslmode=disable`
/// chosen to cross unencrypted.
fn mqtt(r: &mut Reader<'_>, worker_id: &str) -> Option<MqttSettings> {
    let keep_alive = r.seconds(&number::MQTT_KEEP_ALIVE_SEC);
    let url = r.get("MQTT_URL").filter(|url| !url.is_empty())?;
    let url = publisher::mqtt::MqttUrl::parse(url)
        .map_err(|e| match e {
            publisher::mqtt::MqttError::Config(why) => r.problem(why),
            other => r.problem(other.to_string()),
        })
        .ok();
    let topic_prefix = r.text("MQTT_TOPIC_PREFIX", "fetcher");
    if let Err(why) = contract::event::mirror::valid_prefix(&topic_prefix) {
        r.problem(format!("MQTT_TOPIC_PREFIX {why}"));
    }
    let client_id = r.text("MQTT_CLIENT_ID", worker_id);
    if client_id.is_empty() || client_id.len() > 65_535 {
        r.problem("MQTT_CLIENT_ID must be 1 to 65535 bytes".into());
    }
    let username = r.get("MQTT_USERNAME").map(str::to_owned);
    let password = r
        .get("MQTT_PASSWORD")
        .map(|p| SecretString::from(p.to_owned()));
    let allow_cleartext = r.flag("MQTT_ALLOW_CLEARTEXT_PASSWORD", false);
    let plain = url.as_ref().is_some_and(|url| !url.tls);
    if plain && (username.is_some() || password.is_some()) && !allow_cleartext {
        r.problem(
            "MQTT_USERNAME and MQTT_PASSWORD would cross to the broker in the clear: MQTT_URL is \
             mqtt://, not mqtts://; use mqtts:// or set MQTT_ALLOW_CLEARTEXT_PASSWORD=true"
                .into(),
        );
    }
    Some(MqttSettings {
        url: url?,
        client_id,
        username,
        password,
        topic_prefix,
        keep_alive,
        ca_file: r.get("MQTT_CA_FILE").map(std::path::PathBuf::from),
    })
}

/// A value [`Reader::number`] bounded to a port's range.
fn port(value: u64) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
}

/// A value [`Reader::number`] bounded far below `i64::MAX`.
fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The `DATASOURCE_<NAME>_*` groups. A group with problems is refused with every one of them
/// (upstream skips it with a warning, and its jobs then fail with "connection not found"): a
/// datasource set in the environment is meant to be used. A usable group whose TLS protects
/// less than it reads (SQL Server's `require`) is kept with a warning.
fn datasources(
    r: &mut Reader<'_>,
    vars: &BTreeMap<String, String>,
) -> BTreeMap<String, ConnectionConfig> {
    let read = engine::connection::read_env_vars(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    for config in read.configs.values() {
        if let Some(warning) = config.tls_warning() {
            r.warning(warning);
        }
    }
    for skipped in read.skipped {
        r.problem(format!(
            "{} does not define a usable datasource {:?}: {}",
            skipped.group,
            skipped.connection,
            skipped.problems.join("; ")
        ));
    }
    // A type without a connector (Oracle) defines a datasource whose every job would fail.
    for (name, value) in vars {
        let group = name
            .strip_prefix("DATASOURCE_")
            .and_then(|rest| rest.strip_suffix("_TYPE"));
        let kind = value.trim().parse::<engine::connection::DatasourceKind>();
        let (Some(group), Ok(kind)) = (group, kind) else {
            continue;
        };
        if !kind.is_supported() {
            let connection = vars
                .get(&format!("DATASOURCE_{group}_CONFIG_NAME"))
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| group.to_lowercase());
            r.problem(format!(
                "{name} is {kind}, a type this Worker has no connector for (POSTGRESQL, MYSQL, \
                 MONGODB, SQL_SERVER): datasource {connection:?} cannot be used"
            ));
        }
    }
    read.configs
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
    let consumers = r.number(&number::RABBITMQ_NUMBERS_OF_WORKERS);
    let uri = match r.get("RABBITMQ_URI") {
        Some(uri) if uri.contains("://") => uri.to_owned(),
        scheme => {
            let scheme = scheme.unwrap_or("amqp");
            let host = r.text("RABBITMQ_HOST", "127.0.0.1");
            let port = port(r.number(&number::RABBITMQ_PORT_AMQP));
            let user = r.text("RABBITMQ_DEFAULT_USER", "guest");
            let pass = r.text("RABBITMQ_DEFAULT_PASS", "guest");
            let vhost = r.text("RABBITMQ_VHOST", "/");
            contract::wire::broker_uri(scheme, &host, port, &user, &pass, &vhost)
        }
    };
    let work_queue = r.text("RABBITMQ_FETCHER_WORK_QUEUE", DEFAULT_WORK_QUEUE);
    let allow_legacy_body_signature =
        r.flag("RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK", false);
    let max_message_bytes = r.number(&number::RABBITMQ_MAX_MESSAGE_BYTES);
    let max_metadata_bytes = r.number(&number::EVENT_MAX_METADATA_BYTES);
    let signature_max_age_secs = signed(r.number(&number::RABBITMQ_SIGNATURE_MAX_AGE_SEC));
    Some(AmqpSettings {
        uri: SecretString::from(uri),
        work_queue,
        events_exchange: exchange?,
        consumers: u16::try_from(consumers).unwrap_or(u16::MAX),
        allow_legacy_body_signature,
        max_message_bytes: usize::try_from(max_message_bytes).unwrap_or(usize::MAX),
        max_metadata_bytes,
        cloudevents_source: source?,
        signature_max_age_secs,
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
    let endpoint = r.get("OBJECT_STORAGE_ENDPOINT").map(str::to_owned);
    let region = r.text("OBJECT_STORAGE_REGION", "us-east-1");
    let key_prefix = r.text("OBJECT_STORAGE_KEY_PREFIX", "");
    let use_path_style = r.flag("OBJECT_STORAGE_USE_PATH_STYLE", false);
    let sign_payload = r.flag("OBJECT_STORAGE_SIGN_PAYLOAD", false);
    let mut config = StorageConfig::new(bucket?);
    config.endpoint = endpoint;
    config.region = region;
    config.key_prefix = key_prefix;
    config.credentials = credentials;
    config.use_path_style = use_path_style;
    config.sign_payload = sign_payload;
    Some(config)
}

fn engine(r: &mut Reader<'_>) -> EngineConfig {
    EngineConfig {
        max_result_bytes: r.number(&number::ENGINE_MAX_RESULT_BYTES),
        timeout: r.seconds(&number::ENGINE_EXTRACTION_TIMEOUT_SEC),
        // Taken as they are (no trimming: a key's bytes are its own).
        crm: engine::config::CrmSecrets {
            hash_key: r.raw(crypto::CRM_HASH_KEY_VAR).into(),
            encrypt_key: r.raw(crypto::CRM_ENCRYPT_KEY_VAR).into(),
        },
        spill_dir: spill_dir(r),
        retry: retry(r),
        ..EngineConfig::default()
    }
}

/// `JOB_RETRY_ATTEMPTS` and its backoff; a cap below the first wait is refused (the
/// waits could never grow, which is surely not what was meant).
fn retry(r: &mut Reader<'_>) -> engine::RetryPolicy {
    let attempts = r.number(&number::JOB_RETRY_ATTEMPTS);
    let backoff = r.number(&number::JOB_RETRY_BACKOFF_MS);
    let backoff_max = r.number(&number::JOB_RETRY_BACKOFF_MAX_MS);
    if backoff_max < backoff {
        r.problem(format!(
            "JOB_RETRY_BACKOFF_MAX_MS ({backoff_max} ms) must not be below JOB_RETRY_BACKOFF_MS ({backoff} ms)"
        ));
    }
    engine::RetryPolicy {
        // At most MAX_ATTEMPTS, so within u32.
        attempts: u32::try_from(attempts).unwrap_or(engine::RetryPolicy::MAX_ATTEMPTS),
        backoff: Duration::from_millis(backoff),
        backoff_max: Duration::from_millis(backoff_max),
    }
}

/// `ENGINE_SPILL_DIR`, else the system's temporary directory: a directory that takes a spill
/// file, tried as a spill makes one. A directory found unusable only at a job's spill would fail
/// jobs one by one while the Worker looks healthy.
fn spill_dir(r: &mut Reader<'_>) -> std::path::PathBuf {
    let (dir, named) = match r.get("ENGINE_SPILL_DIR") {
        Some(dir) => (
            std::path::PathBuf::from(dir),
            format!("ENGINE_SPILL_DIR {dir:?}"),
        ),
        None => {
            let dir = std::env::temp_dir();
            let named = format!("ENGINE_SPILL_DIR (unset: the system temp dir {dir:?})");
            (dir, named)
        }
    };
    if !dir.is_dir() {
        r.problem(format!("{named} must be an existing directory"));
    } else if let Err(error) = engine::probe_spill_dir(&dir) {
        r.problem(format!(
            "{named} must be a writable directory: a spill file could not be created there ({error})"
        ));
    }
    dir
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
