//! Variables that look like the Worker's but are not read: upstream Fetcher's that this Worker
//! does without, and near misses of a name it reads (`RABBITMQ_NUMBER_OF_WORKERS`). Each is a
//! warning, never a refusal. Only names with one of the Worker's prefixes are compared, so a
//! machine's own environment (`PATH`, `HOME`, `KUBERNETES_*`) gives none; no value is printed.

use std::collections::BTreeMap;

use super::secret_files;
use super::variables::{DATASOURCE_VARIABLES, VARIABLES};

/// Upstream Fetcher's Worker variables that this Worker does not read, with what upstream used
/// them for. `*` ends a prefix; `<NAME>` stands for a datasource's name. A name leaves this
/// table when the Worker starts reading it (and enters `variables.rs`): a test fails while it
/// is in both. (`VERSION`, upstream's `/readyz` fallback, is left out: too common a name.)
pub(super) const UPSTREAM_ONLY: &[(&str, &str)] = &[
    (
        "OTEL_RESOURCE_SERVICE_NAME",
        "lib-commons' service name (here: OTEL_SERVICE_NAME)",
    ),
    (
        "OTEL_RESOURCE_SERVICE_VERSION",
        "lib-commons' service version (here: the build's version)",
    ),
    (
        "OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT",
        "lib-commons' resource attribute (here: OTEL_RESOURCE_ATTRIBUTES)",
    ),
    ("OTEL_LIBRARY_NAME", "lib-commons' tracer name"),
    (
        "OTEL_INSECURE_EXPORTER",
        "lib-commons' gRPC TLS switch (here: OTLP over http://)",
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT_PORT",
        "the Helm chart's port of the endpoint (here: in OTEL_EXPORTER_OTLP_ENDPOINT)",
    ),
    (
        "MULTI_TENANT_*",
        "the Tenant Manager mode (a vhost and a database per tenant)",
    ),
    ("DEPLOYMENT_MODE", "TLS enforcement by deployment mode"),
    ("ENV_NAME", "the logger's environment"),
    ("RABBITMQ_PORT_HOST", "the broker's management port"),
    (
        "RABBITMQ_HEALTH_CHECK_URL",
        "the broker's management health check",
    ),
    (
        "RABBITMQ_TLS",
        "the tenant vhosts' TLS (here: RABBITMQ_URI=amqps)",
    ),
    ("OBJECT_STORAGE_TTL", "nothing (read but unused upstream)"),
    (
        "STREAMING_BROKERS",
        "lib-streaming's Kafka producer; this Worker publishes to RabbitMQ",
    ),
    ("STREAMING_CLIENT_ID", "lib-streaming's Kafka producer"),
    ("STREAMING_COMPRESSION", "lib-streaming's Kafka producer"),
    ("STREAMING_REQUIRED_ACKS", "lib-streaming's Kafka producer"),
    (
        "STREAMING_CLOSE_TIMEOUT_S",
        "lib-streaming's Kafka producer",
    ),
    ("STREAMING_CB_*", "lib-streaming's circuit breaker"),
    (
        "STREAMING_EVENT_POLICIES",
        "per-event delivery policies; this Worker always uses its outbox",
    ),
    (
        "DATASOURCE_<NAME>_SSL_CA",
        "a datasource's CA file (here: `sslrootcert` in _OPTIONS)",
    ),
    (
        "DATASOURCE_<NAME>_SSL_CERT",
        "a datasource's client certificate (here: `sslcert` in _OPTIONS)",
    ),
    (
        "DATASOURCE_<NAME>_SSL_KEY",
        "a datasource's client key (here: `sslkey` in _OPTIONS)",
    ),
];

const DATASOURCE: &str = "DATASOURCE_";

/// One warning for each variable set that the Worker does not read but that looks like one
/// of its own or of upstream's.
pub(super) fn warnings(vars: &BTreeMap<String, String>) -> Vec<String> {
    let known = Known::new();
    vars.iter()
        .filter(|(name, value)| !known.reads(name) && !service_link(name, value))
        .filter_map(|(name, _)| known.warning(name))
        .collect()
}

/// The names the Worker reads.
struct Known {
    /// Every variable of the reference, and the `_FILE` variant of each secret.
    names: Vec<String>,
    /// The datasource fields (`HOST`, `PASSWORD_FILE`, ...).
    fields: Vec<String>,
    /// `RABBITMQ_`, `LOG_`, ...: the names' first words.
    prefixes: Vec<String>,
}

impl Known {
    fn new() -> Known {
        let mut names: Vec<String> = VARIABLES.iter().map(|v| v.name.to_owned()).collect();
        names.extend(
            VARIABLES
                .iter()
                .filter(|v| v.secret)
                .map(|v| format!("{}{}", v.name, secret_files::SUFFIX)),
        );
        let mut fields: Vec<String> = Vec::new();
        for variable in DATASOURCE_VARIABLES {
            let field = variable.name.rsplit_once("<NAME>_").map_or("", |(_, f)| f);
            fields.push(field.to_owned());
            if variable.secret {
                fields.push(format!("{field}{}", secret_files::SUFFIX));
            }
        }
        let mut prefixes: Vec<String> = names
            .iter()
            .filter_map(|name| name.split_once('_'))
            .map(|(first, _)| format!("{first}_"))
            .chain([DATASOURCE.to_owned()])
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        Known {
            names,
            fields,
            prefixes,
        }
    }

    fn reads(&self, name: &str) -> bool {
        self.names.iter().any(|known| known == name)
            || name.strip_prefix(DATASOURCE).is_some_and(|rest| {
                self.fields.iter().any(|field| {
                    rest.strip_suffix(field.as_str())
                        .and_then(|group| group.strip_suffix('_'))
                        .is_some_and(|group| !group.is_empty())
                })
            })
    }

    /// The warning for a name the Worker does not read, if it is upstream's or looks like one
    /// the Worker reads.
    fn warning(&self, name: &str) -> Option<String> {
        if let Some((_, what)) = UPSTREAM_ONLY.iter().find(|(p, _)| matches(p, name)) {
            return Some(format!("{name} is ignored (upstream only: {what})."));
        }
        if let Some(base) = name.strip_suffix(secret_files::SUFFIX) {
            if self.reads(base) {
                return Some(format!(
                    "{name} is ignored: only secrets are read from a file (<NAME>_FILE), set \
                     {base} itself."
                ));
            }
        }
        let upper = name.to_ascii_uppercase();
        if !self.prefixes.iter().any(|p| upper.starts_with(p.as_str())) {
            return None;
        }
        let near = self.nearest(&upper)?;
        let case = if near == upper {
            " (names are case-sensitive)"
        } else {
            ""
        };
        Some(format!(
            "{name} is not a variable the Worker reads, it is ignored: did you mean {near}?{case}"
        ))
    }

    /// The known name closest to `name`, if close enough to be a slip of the keyboard.
    fn nearest(&self, name: &str) -> Option<String> {
        let mut candidates: Vec<String> = self.names.clone();
        if let Some(rest) = name.strip_prefix(DATASOURCE) {
            // Each way of reading the rest as `<NAME>_<FIELD>`, with each known field.
            for (at, _) in rest.match_indices('_').filter(|(at, _)| *at > 0) {
                for field in &self.fields {
                    candidates.push(format!("{DATASOURCE}{}_{field}", &rest[..at]));
                }
            }
        }
        candidates
            .into_iter()
            .map(|candidate| (distance(name, &candidate), candidate))
            .filter(|(d, candidate)| *d <= tolerance(candidate))
            .min_by_key(|(d, _)| *d)
            .map(|(_, candidate)| candidate)
    }
}

/// How many edits still read as a slip for a name this long.
fn tolerance(name: &str) -> usize {
    match name.len() {
        0..8 => 1,
        8..16 => 2,
        _ => 3,
    }
}

/// Whether `name` is one `pattern` of [`UPSTREAM_ONLY`] describes.
fn matches(pattern: &str, name: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        return name.starts_with(prefix);
    }
    if let Some((before, after)) = pattern.split_once("<NAME>") {
        return name
            .strip_prefix(before)
            .and_then(|rest| rest.strip_suffix(after))
            .is_some_and(|group| !group.is_empty());
    }
    pattern == name
}

/// Kubernetes' service links (`<SERVICE>_SERVICE_HOST`, `<SERVICE>_PORT=tcp://...`,
/// `<SERVICE>_PORT_5672_TCP_ADDR`): a service named `rabbitmq` or `api` gives the pod such
/// names, which are nobody's typo.
fn service_link(name: &str, value: &str) -> bool {
    let protocol = ["tcp://", "udp://", "sctp://"]
        .iter()
        .any(|p| value.starts_with(p));
    let numbered_port = name.split("_PORT_").nth(1).is_some_and(|rest| {
        let digits = rest.split('_').next().unwrap_or_default();
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    });
    name.contains("_SERVICE_HOST")
        || name.contains("_SERVICE_PORT")
        || numbered_port
        || (name.ends_with("_PORT") && protocol)
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of
/// two neighbours, each one edit.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}
