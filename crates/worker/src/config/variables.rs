//! Every variable the Worker reads, once: its name, default, meaning, whether it is a secret,
//! its limits (a numeric one's come from its [`Number`]) and what `deploy/worker.env.example`
//! sets it to. The configuration table of `docs/configuration.md` and the example are printed
//! from this list (`fetcher-worker config reference`), and tests hold the reader, that table and
//! the example to it.

use super::number::{self, Number};

/// One variable of the reference.
#[derive(Debug, Clone, Copy)]
pub(super) struct Variable {
    pub(super) name: &'static str,
    pub(super) default: DefaultValue,
    /// One sentence or a few clauses, Markdown.
    pub(super) meaning: &'static str,
    /// Never printed by the Worker, and left empty in the example.
    pub(super) secret: bool,
    pub(super) example: Example,
}

/// What an unset variable means.
#[derive(Debug, Clone, Copy)]
pub(super) enum DefaultValue {
    /// Unset refuses the start.
    Required,
    /// This value, exactly as the reader takes it.
    Value(&'static str),
    /// A numeric variable, with its range.
    Number(&'static Number),
    /// No value: the words say what unset means (`off`, `provider chain`, ...).
    Unset(&'static str),
}

/// The line `deploy/worker.env.example` has for a variable.
#[derive(Debug, Clone, Copy)]
pub(super) enum Example {
    /// `NAME=<the default>` (empty for a required one and for a secret).
    Default,
    /// `NAME=<this>`.
    Value(&'static str),
    /// `# NAME=<this>`: an optional feature, shown off.
    Off(&'static str),
}

const fn var(name: &'static str, default: DefaultValue, meaning: &'static str) -> Variable {
    Variable {
        name,
        default,
        meaning,
        secret: false,
        example: Example::Default,
    }
}

const fn secret(name: &'static str, default: DefaultValue, meaning: &'static str) -> Variable {
    Variable {
        secret: true,
        ..var(name, default, meaning)
    }
}

const fn num(spec: &'static Number, meaning: &'static str) -> Variable {
    var(spec.name, DefaultValue::Number(spec), meaning)
}

const fn example(variable: Variable, example: Example) -> Variable {
    Variable {
        example,
        ..variable
    }
}

use DefaultValue::{Required, Unset, Value};

/// The Worker's variables, in the configuration table's order.
pub(super) const VARIABLES: &[Variable] = &[
    secret("APP_ENC_KEY", Required, "standard base64 of ≥ 32 bytes; the four keys of contract §1 are derived from it"),
    var("APP_ENC_KEY_VERSION", Value("1"), "the key version stored connection passwords must carry"),
    example(
        var("STREAMING_ENABLED", Required, "must be `true`: the Worker publishes job events"),
        Example::Value("true"),
    ),
    example(
        var("STREAMING_CLOUDEVENTS_SOURCE", Required, "`ce-source` of every event"),
        Example::Value("//lerian/fetcher"),
    ),
    example(
        var("RABBITMQ_JOB_EVENTS_EXCHANGE", Required, "topic exchange of `job.completed` / `job.failed`"),
        Example::Value("fetcher.job.events"),
    ),
    var("RABBITMQ_URI", Value("amqp"), "the scheme (`amqp`, `amqps`), or a whole `amqp://` URI (then a secret: it holds the password)"),
    example(
        var("RABBITMQ_HOST", Value("127.0.0.1"), "broker host"),
        Example::Value("rabbitmq"),
    ),
    num(&number::RABBITMQ_PORT_AMQP, "broker port"),
    var("RABBITMQ_DEFAULT_USER", Value("guest"), "broker user"),
    secret("RABBITMQ_DEFAULT_PASS", Value("guest"), "broker password"),
    var("RABBITMQ_VHOST", Value("/"), "broker virtual host"),
    var("RABBITMQ_FETCHER_WORK_QUEUE", Value(contract::wire::DEFAULT_WORK_QUEUE), "the work queue"),
    num(&number::RABBITMQ_NUMBERS_OF_WORKERS, "prefetch and jobs run at once"),
    var("RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK", Value("false"), "also accept `HMAC(\"<t>.\" + body)` signatures; see \"Legacy signatures\" below"),
    num(&number::RABBITMQ_SIGNATURE_MAX_AGE_SEC, "the freshness window of a job's first acceptance (upstream: 5 min)"),
    num(&number::RABBITMQ_MAX_MESSAGE_BYTES, "a larger job message is dead-lettered (reason `message_too_large`) without being parsed; its job fails only when its signature holds"),
    num(&number::EVENT_MAX_METADATA_BYTES, "a job whose `metadata` is larger as compact JSON fails as invalid (its event carries only the error)"),
    example(
        var("STATE_BACKEND", Unset("by the environment"), "where jobs and the outbox live: `postgres` (the Worker's database, `DATABASE_URL`) or `mongodb` (the Manager's, `MONGO_*`: the Manager mode); unset, the one configured (PostgreSQL when neither is), and a start with both configured is refused"),
        Example::Off("postgres"),
    ),
    example(
        secret("DATABASE_URL", Required, "the Worker's PostgreSQL state database (jobs, outbox, connections); required unless the state backend is `mongodb`"),
        Example::Value("postgres://fetcher@postgres:5432/fetcher"),
    ),
    num(&number::DATABASE_MAX_CONNECTIONS, "state database pool size"),
    var("DATABASE_RUN_MIGRATIONS", Value("true"), "apply `migrations/` at start"),
    example(
        var("MONGO_URI", Value("mongodb"), "the Manager mode (below): the scheme of the Manager's MongoDB, as upstream (`mongodb+srv` is refused: this build makes no DNS SRV lookups)"),
        Example::Off("mongodb"),
    ),
    example(
        var("MONGO_HOST", Unset("required for `mongodb`"), "the Manager's MongoDB host, or hosts separated by commas"),
        Example::Off("fetcher-mongodb"),
    ),
    example(
        num(&number::MONGO_PORT, "its port (upstream has no default)"),
        Example::Off("27017"),
    ),
    example(
        var("MONGO_NAME", Unset("required for `mongodb`"), "the Manager's database: `job` and `connection` in its lower-case form, the outbox as given, as upstream"),
        Example::Off("fetcher-db"),
    ),
    example(
        var("MONGO_USER", Unset("none"), "its user; unset, the connection string has no credentials"),
        Example::Off(""),
    ),
    example(
        secret("MONGO_PASSWORD", Unset("none"), "the user's password (percent-encoded into the connection string)"),
        Example::Off(""),
    ),
    example(
        var("MONGO_PARAMETERS", Unset("none"), "connection string options, `key=value&...`, appended as `/?...` (`authSource=admin&tls=true`)"),
        Example::Off(""),
    ),
    example(
        var("MONGO_TLS_CA_CERT", Unset("system roots"), "standard base64 of PEM CA certificates; set, the connection uses TLS with them"),
        Example::Off(""),
    ),
    example(
        num(&number::MONGO_MAX_POOL_SIZE, "the MongoDB client's pool (lib-commons lowers more than 1000 to 1000, this Worker refuses it)"),
        Example::Off("100"),
    ),
    example(
        var("ALLOW_INSECURE_TLS", Value("false"), "`true` accepts a MongoDB connection without TLS (no `tls=true`, no `MONGO_TLS_CA_CERT`), which is otherwise refused, as lib-commons refuses it; lib-commons' spellings (`1`, `yes`, `on`, ...)"),
        Example::Off("false"),
    ),
    example(
        var("OBJECT_STORAGE_BUCKET", Required, "where results are stored"),
        Example::Value("fetcher-results"),
    ),
    example(
        var("OBJECT_STORAGE_ENDPOINT", Unset("AWS"), "S3-compatible endpoint"),
        Example::Value(""),
    ),
    var("OBJECT_STORAGE_REGION", Value("us-east-1"), "the bucket's region"),
    example(
        var("OBJECT_STORAGE_ACCESS_KEY_ID", Unset("provider chain"), "static credentials, with `OBJECT_STORAGE_SECRET_KEY`: both or neither"),
        Example::Off(""),
    ),
    example(
        secret("OBJECT_STORAGE_SECRET_KEY", Unset("provider chain"), "static credentials, with `OBJECT_STORAGE_ACCESS_KEY_ID`: both or neither"),
        Example::Off(""),
    ),
    var("OBJECT_STORAGE_KEY_PREFIX", Value(""), "prepended to every object key"),
    var("OBJECT_STORAGE_USE_PATH_STYLE", Value("false"), "path-style addressing (MinIO, s3s)"),
    var("OBJECT_STORAGE_SIGN_PAYLOAD", Value("false"), "SigV4 signs the body of each result upload (its SHA-256, about 0.8 CPU-s per GiB); off, the body is sent as `UNSIGNED-PAYLOAD` (the request stays signed, with its CRC32; the result's AES-GCM tag and HMAC catch any change): turn on for a store that refuses unsigned payloads"),
    num(&number::OBJECT_STORAGE_RETRY_SEC, "how long a failed result write is retried in the same run, never past the job's timeout"),
    num(&number::ENGINE_MAX_RESULT_BYTES, "result JSON size cap"),
    num(&number::ENGINE_EXTRACTION_TIMEOUT_SEC, "whole-extraction timeout"),
    num(&number::JOB_RETRY_ATTEMPTS, "how many more times a datasource whose attempt failed transiently (a connection refused or reset, the server restarting, a deadlock, a serialization failure, a lock wait timed out; per driver) is read in the same run before the job fails; only while none of its rows reached the result (its first 128 KiB); a permanent failure (a missing table, a permission, a bad filter) never retries; 0 fails at once, as upstream"),
    num(&number::JOB_RETRY_BACKOFF_MS, "the longest wait before the first retry of a datasource; each retry waits a random time up to twice the previous ceiling (full jitter), within the job's timeout"),
    num(&number::JOB_RETRY_BACKOFF_MAX_MS, "no retry of a datasource waits longer than this; at least `JOB_RETRY_BACKOFF_MS`"),
    var("ENGINE_SPILL_DIR", Unset("system temp dir"), "where the parts of a result that wait their turn (datasources after the first, read in parallel) are spilled: unnamed private files, gone with the job; must take a file at start (the Worker tries one); needs free space up to `ENGINE_MAX_RESULT_BYTES` × `RABBITMQ_NUMBERS_OF_WORKERS` in the worst case; a job whose spill fails fails, not retried"),
    example(
        secret(crypto::CRM_HASH_KEY_VAR, Unset("unset"), "the `plugin_crm` path's HMAC key for `search.*` filters (its bytes as given); needed by a CRM job with filters or decrypted fields"),
        Example::Off(""),
    ),
    example(
        secret(crypto::CRM_ENCRYPT_KEY_VAR, Unset("unset"), "the `plugin_crm` path's AES-GCM key, hex of 16, 24 or 32 bytes; needed when a CRM job's fields are decrypted"),
        Example::Off(""),
    ),
    num(&number::JOB_LEASE_SEC, "a job's claim, renewed while it runs and given back at once when an unreachable dependency sends the message back; a lost Worker's job is taken over when it lapses, or failed (`worker lost during extraction`) two leases later"),
    num(&number::OUTBOX_REPAIR_INTERVAL_SEC, "how often unpublished events are republished"),
    num(&number::OUTBOX_REPAIR_BATCH, "rows leased per repair batch"),
    num(&number::OUTBOX_REPAIR_GRACE_SEC, "events younger than this are left to the Worker that recorded them"),
    example(
        num(&number::MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC, "the Manager mode: a row of lib-streaming's outbox claimed (`PROCESSING`) and left this long is taken over by this Worker's relay (lib-commons' `ProcessingTimeout`; Go relays keep their own); shorter than a relay's publish of its batch, that relay's events are published twice"),
        Example::Off("600"),
    ),
    example(
        num(&number::MANAGER_OUTBOX_RETRY_AFTER_SEC, "the Manager mode: a row of lib-streaming's outbox whose publish failed (`FAILED`) is retried by this Worker's relay once left this long (lib-commons' `RetryWindow`); its tenth failure makes it `INVALID`, never retried"),
        Example::Off("300"),
    ),
    num(&number::OUTBOX_RETENTION_HOURS, "published outbox rows are deleted after this long (the mirror's MQTT rows go once delivered)"),
    example(
        var("RESULT_RETENTION_DAYS", Unset("off"), "1 to 36525: a completed job's result is deleted this many days after it completed, through the lifecycle's delete (`job.deletion_in_progress`, `job.deleted` with comment `retention`; the job's tombstone stays); 0 or below → refused"),
        Example::Off("90"),
    ),
    example(
        var("JOB_RETENTION_DAYS", Unset("off"), "1 to 36525: the rows of a job that ended holding no object (failed, canceled, a deleted job's tombstone), with its executions and published events, are deleted this many days after its last change; a completed job's row stays while its result does; 0 or below → refused"),
        Example::Off("400"),
    ),
    num(&number::RETENTION_INTERVAL_SEC, "how often the retention pass runs; one replica at a time runs it (a lease in the state database)"),
    example(
        var("MQTT_URL", Unset("off"), "turns the MQTT mirror on (below): `mqtt://host[:port]` (1883) or `mqtts://host[:port]` (8883, TLS with the system's roots or `MQTT_CA_FILE`); credentials in the URL are refused"),
        Example::Off("mqtt://mosquitto:1883"),
    ),
    example(
        var("MQTT_CLIENT_ID", Unset("the Worker id"), "the mirror's client id; its session is persistent (`clean_session` off)"),
        Example::Off(""),
    ),
    example(
        var("MQTT_USERNAME", Unset("none"), "the MQTT broker's user"),
        Example::Off(""),
    ),
    example(
        secret("MQTT_PASSWORD", Unset("none"), "the MQTT broker's password"),
        Example::Off(""),
    ),
    example(
        var("MQTT_ALLOW_CLEARTEXT_PASSWORD", Value("false"), "`true` lets `MQTT_USERNAME` and `MQTT_PASSWORD` cross an unencrypted `mqtt://` connection; otherwise credentials need `mqtts://` and are refused at start"),
        Example::Off("false"),
    ),
    example(
        var("MQTT_TOPIC_PREFIX", Value("fetcher"), "replaces IoT's `$aws`; `$`, `+`, `#` and empty levels are refused at start"),
        Example::Off("fetcher"),
    ),
    example(
        num(&number::MQTT_KEEP_ALIVE_SEC, "MQTT keep-alive"),
        Example::Off("30"),
    ),
    example(
        var("MQTT_CA_FILE", Unset("none"), "PEM CA certificates to trust for `mqtts://`"),
        Example::Off(""),
    ),
    var("HEALTH_BIND", Value("0.0.0.0"), "the health server's address (all interfaces, so probes from outside the pod reach it; `127.0.0.1` keeps it local)"),
    num(&number::HEALTH_PORT, "health and metrics server: at most 64 connections at once and 16 from one client address (more are closed on accept), request headers within 5 s, answers within 10 s, connections closed after 60 s; `/readyz` runs its checks at most once per 1.5 s however many probes ask"),
    var("API_ENABLED", Value("true"), "serve the control API (below); `false` turns it off. In the Manager mode (`STATE_BACKEND` mongodb) it is off unless set to `true` (the Manager's `GET` stays the authority there; the API adds cancel, delete and the lifecycle's view of a job, not finding jobs)"),
    num(&number::API_PORT, "the control API's port, on `HEALTH_BIND`, a listener of its own with the health server's connection limits; must differ from `HEALTH_PORT`"),
    num(&number::READYZ_DRAIN_DELAY_SEC, "after SIGTERM, `/readyz` says 503 this long before consuming stops (upstream maps a negative value to 1 s, this Worker to the default)"),
    num(&number::SHUTDOWN_GRACE_SEC, "how long in-flight jobs get to finish during the drain"),
    example(
        var("TOKIO_WORKER_THREADS", Unset("one per core available"), "the async runtime's threads (Tokio's own variable, checked here: 1 to 1024). One thread made 18 % fewer system calls per small job but the same CPU per job and 10 % fewer jobs/s on 2 cores (BENCHMARKS.md, \"One runtime thread, measured\"); results that are big or read from several datasources at once use more than one"),
        Example::Off("1"),
    ),
    var("LOG_LEVEL", Value("info"), "a `tracing` filter (`debug`, `worker=debug,info`, ...); lapin's per-message lines for returned (unroutable) events stay off unless the filter names `lapin::returned_messages` (`fetcher_events_returned_total` counts them)"),
    example(
        var("LOG_FORMAT", Value("text"), "`json` for JSON lines"),
        Example::Value("json"),
    ),
    example(
        var("ENABLE_TELEMETRY", Value("false"), "`true` exports traces (a `job` span per delivery, a span per stage) over OTLP/HTTP to `OTEL_EXPORTER_OTLP_*`, continuing the message's `Traceparent`; the job's events then carry `ce-traceparent` (upstream's switch)"),
        Example::Off("true"),
    ),
    example(
        var("OTEL_EXPORTER_OTLP_ENDPOINT", Unset("`http://localhost:4318`"), "the collector's OTLP/HTTP base URL (`http://` or `https://`, TLS with the system's roots); `/v1/traces` is appended. Port 4317 (gRPC's) is warned about"),
        Example::Off("http://otel-collector:4318"),
    ),
    var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Unset("from `OTEL_EXPORTER_OTLP_ENDPOINT`"), "the traces URL, used as it is (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`)"),
    var("OTEL_EXPORTER_OTLP_PROTOCOL", Value("http/protobuf"), "`http/protobuf` or `http/json`; `grpc` is refused"),
    secret("OTEL_EXPORTER_OTLP_HEADERS", Unset("none"), "headers sent with every export, `name=value,...` (values percent-encoded): credentials, never printed"),
    var("OTEL_SERVICE_NAME", Value("fetcher-worker"), "the traces' `service.name`"),
    var("OTEL_RESOURCE_ATTRIBUTES", Unset("none"), "more resource attributes, `key=value,...` (values percent-encoded)"),
    example(
        var("WORKER_ID", Unset("host-pid-random"), "this replica's name in claims and leases"),
        Example::Off(""),
    ),
];

/// The `DATASOURCE_<NAME>_*` group (below: "Datasources"), with the example's one datasource.
pub(super) const DATASOURCE_VARIABLES: &[Variable] = &[
    example(
        var("DATASOURCE_<NAME>_CONFIG_NAME", Unset("`<name>` in lower case"), "the connection name jobs use"),
        Example::Off(""),
    ),
    example(
        var("DATASOURCE_<NAME>_TYPE", Required, "`POSTGRESQL`, `MYSQL`, `MONGODB`, `SQL_SERVER` (see \"Datasources\")"),
        Example::Value("POSTGRESQL"),
    ),
    example(
        var("DATASOURCE_<NAME>_HOST", Required, "the datasource's host"),
        Example::Value("ledger-db"),
    ),
    example(
        var("DATASOURCE_<NAME>_PORT", Unset("the type's port"), "the datasource's port"),
        Example::Value("5432"),
    ),
    example(
        var("DATASOURCE_<NAME>_DATABASE", Required, "the database jobs read"),
        Example::Value("ledger"),
    ),
    example(
        var("DATASOURCE_<NAME>_USER", Required, "its user (MongoDB may go without: no authentication); **its grants are the boundary of what jobs can read** unless `_SCHEMAS` narrows it"),
        Example::Value("fetcher_reader"),
    ),
    secret("DATASOURCE_<NAME>_PASSWORD", Unset("none"), "its password"),
    example(
        var("DATASOURCE_<NAME>_SSLMODE", Value("prefer"), "`disable`, `prefer`, `require`, `verify-ca`, `verify-full` (see \"Datasources\")"),
        Example::Value("require"),
    ),
    example(
        var("DATASOURCE_<NAME>_OPTIONS", Unset("none"), "`key=value` pairs (see \"Datasources\")"),
        Example::Off(""),
    ),
    example(
        var("DATASOURCE_<NAME>_MAX_CONCURRENT", Unset("no cap"), "how many jobs read this datasource at once across every replica, 1 to 1000 (slots in the state database; a job waiting for one stays `QUEUED`); set alone (or with `_CONFIG_NAME`), it caps the stored connection of that name (see \"Concurrency caps\")"),
        Example::Off("4"),
    ),
    example(
        var("DATASOURCE_<NAME>_SCHEMAS", Unset("the user's grants"), "the schemas (MySQL: databases) jobs may read, comma-separated"),
        Example::Value("public"),
    ),
];

/// The name the example's datasource has.
const EXAMPLE_DATASOURCE: &str = "LEDGER";

impl Variable {
    /// The `default` column.
    pub(super) fn default_text(&self) -> String {
        match self.default {
            Required => "required".to_owned(),
            Value("") => "empty".to_owned(),
            Value(value) => format!("`{value}`"),
            DefaultValue::Number(spec) => match human_bytes(spec) {
                Some(human) => format!("`{}` ({human})", spec.default),
                None => format!("`{}`", spec.default),
            },
            Unset(words) => words.to_owned(),
        }
    }

    /// The `meaning` column: the meaning, a numeric variable's limits, and whether it is secret.
    pub(super) fn meaning_text(&self) -> String {
        let mut text = self.meaning.to_owned();
        if let DefaultValue::Number(spec) = self.default {
            text.push_str("; ");
            text.push_str(&spec.limits());
        }
        if self.secret {
            text.push_str(" (secret: never printed)");
        }
        text
    }

    /// The value the example gives the variable, `None` for a line commented out.
    fn example_value(&self) -> (bool, String) {
        match self.example {
            Example::Off(value) => (false, value.to_owned()),
            _ if self.secret => (true, String::new()),
            Example::Value(value) => (true, value.to_owned()),
            Example::Default => match self.default {
                Required | Unset(_) => (true, String::new()),
                Value(value) => (true, value.to_owned()),
                DefaultValue::Number(spec) => (true, spec.default.to_string()),
            },
        }
    }
}

/// The configuration table of `docs/configuration.md`, as Markdown.
pub fn markdown() -> String {
    let mut out = String::from("| variable | default | meaning |\n|---|---|---|\n");
    for variable in VARIABLES.iter().chain(DATASOURCE_VARIABLES) {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            variable.name,
            variable.default_text(),
            variable.meaning_text()
        ));
    }
    out
}

/// `deploy/worker.env.example`: every variable, optional features commented out, secrets empty.
pub fn env_example() -> String {
    let mut out = String::from(
        "# fetcher-worker configuration, printed by `fetcher-worker config reference --env-example`\n\
         # (docs/configuration.md says what each variable means). Secrets are left\n\
         # empty: they belong in a secret store, not in this file. Lines commented out are\n\
         # optional features, off.\n",
    );
    let line = |out: &mut String, name: &str, variable: &Variable| {
        let (on, value) = variable.example_value();
        let hash = if on { "" } else { "# " };
        out.push_str(&format!("{hash}{name}={value}\n"));
    };
    for variable in VARIABLES {
        line(&mut out, variable.name, variable);
    }
    out.push_str(&format!(
        "# One datasource (more: DATASOURCE_<NAME>_*), named {}.\n",
        EXAMPLE_DATASOURCE.to_ascii_lowercase()
    ));
    for variable in DATASOURCE_VARIABLES {
        let name = variable.name.replace("<NAME>", EXAMPLE_DATASOURCE);
        line(&mut out, &name, variable);
    }
    out
}

/// `4 MiB` for a byte count that is a whole number of KiB, MiB, GiB or TiB.
fn human_bytes(spec: &Number) -> Option<String> {
    if spec.unit != number::Unit::Bytes {
        return None;
    }
    ["TiB", "GiB", "MiB", "KiB"]
        .iter()
        .zip([40, 30, 20, 10])
        .find(|(_, shift)| spec.default >= 1 << shift && spec.default.is_multiple_of(1 << shift))
        .map(|(unit, shift)| format!("{} {unit}", spec.default >> shift))
}
