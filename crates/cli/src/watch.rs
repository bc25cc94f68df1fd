//! `fetcherctl watch`: consumes job events, verifies their signature with the external HMAC key
//! (contract §3, §8; how old it may be: `max_age`), checks that their ce-id is the one the
//! signed parts imply (`dedupe`), drops duplicates by ce-id, and prints them.

use std::collections::HashSet;
use std::io::Write as _;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use contract::envelope::{
    signed_job_id, verify, Route, SignatureHeaders, VerifyPolicy, SIGNATURE_HEADER,
    TIMESTAMP_HEADER, VERSION_HEADER,
};
use crypto::HmacKey;
use futures_util::StreamExt as _;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Connection, ExchangeKind};
use serde::Serialize;
use tokio::time::Instant;
use uuid::Uuid;

use crate::amqp::{self, BrokerArgs};
use crate::dedupe::{dedupe_key, Attribute, Attributes};
use crate::keys;
use crate::max_age::{self, MaxAge};

/// The events exchange's conventional name (contract §8).
pub const DEFAULT_EXCHANGE: &str = "fetcher.job.events";
/// The variable that may hold the external HMAC key as hex, instead of `--hmac-key`.
pub const HMAC_KEY_ENV: &str = "FETCHER_EXTERNAL_HMAC_KEY";

#[derive(clap::Args)]
pub struct Args {
    /// The events exchange (a durable topic exchange; declared if missing).
    #[arg(
        long,
        value_name = "EXCHANGE",
        env = "RABBITMQ_JOB_EVENTS_EXCHANGE",
        default_value = DEFAULT_EXCHANGE
    )]
    exchange: String,

    /// Binding pattern (job-level routing keys: job.completed, job.failed, and the lifecycle's
    /// job.cancellation_in_progress, job.canceled, job.deletion_in_progress, job.deleted;
    /// `job.#` adds the executions' job.execution.<status>).
    #[arg(long, value_name = "PATTERN", default_value = "job.*")]
    pattern: String,

    /// Consume from this named, durable queue (used as it is when it exists, else declared;
    /// bound either way), which keeps events while nobody watches. Default: a private,
    /// server-named queue that lives as long as this command. Every event taken from the queue
    /// is acknowledged, those skipped by --job and those rejected too.
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,

    /// Oldest signature accepted: seconds, or a number with s, m, h or d (5m), or none.
    /// Default: 5m on a private queue; none with --queue, whose backlog may be of any age.
    /// Every signature is verified whatever its age.
    #[arg(long, value_name = "AGE", value_parser = max_age::parse)]
    max_age: Option<MaxAge>,

    /// The external HMAC key as 64 hex characters (what `fetcherctl derive-key` prints), for
    /// consumers that are not given the master key. Default: derived from APP_ENC_KEY. A flag is
    /// visible in the process list: prefer the variable.
    #[arg(
        long,
        value_name = "HEX",
        env = HMAC_KEY_ENV,
        hide_env_values = true
    )]
    hmac_key: Option<String>,

    /// Exit after this many distinct, verified events.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,

    /// Stop after this many seconds; with --count, not reaching the count is an error.
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,

    /// Only events of this job (by the jobId of the signed body).
    #[arg(long, value_name = "UUID")]
    job: Option<Uuid>,

    /// Print one JSON object per line (headers summary and body) instead of two text lines.
    #[arg(long)]
    json: bool,

    /// Watch the MQTT mirror on this broker instead (mqtt://host[:port] or mqtts://; user and
    /// password from MQTT_USERNAME and MQTT_PASSWORD): its `<prefix>/events/#`, deduplicated by
    /// eventId. --job, --count, --timeout and --json apply; the AMQP options do not.
    #[arg(long, value_name = "URL")]
    mqtt: Option<String>,

    /// The mirror's topic prefix (the Worker's MQTT_TOPIC_PREFIX).
    #[arg(
        long,
        value_name = "PREFIX",
        env = "MQTT_TOPIC_PREFIX",
        default_value = "fetcher"
    )]
    mqtt_prefix: String,

    /// PEM CA certificates to trust for mqtts:// (the Worker's MQTT_CA_FILE); without it, the
    /// system's roots.
    #[arg(long, value_name = "PATH", env = "MQTT_CA_FILE")]
    mqtt_ca_file: Option<std::path::PathBuf>,

    #[command(flatten)]
    broker: BrokerArgs,
}

/// What the loop has seen so far.
#[derive(Default)]
struct Tally {
    shown: u64,
    duplicates: u64,
    rejected: u64,
    skipped: u64,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if let Some(url) = &args.mqtt {
        return crate::watch_mqtt::run(crate::watch_mqtt::MqttWatch {
            url,
            prefix: &args.mqtt_prefix,
            ca_file: args.mqtt_ca_file.as_deref(),
            job: args.job,
            count: args.count,
            timeout: args.timeout,
            json: args.json,
        })
        .await;
    }
    let key = external_key(args.hmac_key.as_deref())?;
    let exchange = ShortString::try_new(args.exchange.as_str())
        .map_err(|_| anyhow!("--exchange is longer than 255 bytes"))?;
    let pattern = ShortString::try_new(args.pattern.as_str())
        .map_err(|_| anyhow!("--pattern is longer than 255 bytes"))?;

    let connection = args.broker.connect("fetcherctl-watch").await?;
    let watched = watch(&args, &connection, exchange, pattern, &key).await;
    // Best effort; a private queue goes away with the connection, unacked events go back.
    let _ = connection.close(200, "OK".into()).await;
    watched
}

fn external_key(hex: Option<&str>) -> anyhow::Result<HmacKey> {
    match hex.filter(|hex| !hex.trim().is_empty()) {
        Some(hex) => keys::external_from_hex(hex, &format!("--hmac-key (or {HMAC_KEY_ENV})")),
        None => {
            let keys = keys::from_env(&format!(
                "watch verifies events with the external HMAC key: set APP_ENC_KEY, or give the \
                 key itself with --hmac-key or {HMAC_KEY_ENV}"
            ))?;
            Ok(keys.external_hmac().clone())
        }
    }
}

async fn watch(
    args: &Args,
    connection: &Connection,
    exchange: ShortString,
    pattern: ShortString,
    key: &HmacKey,
) -> anyhow::Result<()> {
    let channel = connection
        .create_channel()
        .await
        .context("Failed to open a channel")?;
    channel
        .exchange_declare(
            exchange.clone(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .with_context(|| {
            format!(
                "Failed to declare the events exchange {:?} (topic, durable)",
                exchange.as_str()
            )
        })?;
    let (channel, queue) = match &args.queue {
        Some(name) => {
            let name = ShortString::try_new(name.as_str())
                .map_err(|_| anyhow!("--queue is longer than 255 bytes"))?;
            durable_queue(connection, channel, name).await?
        }
        None => {
            let options = QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..QueueDeclareOptions::default()
            };
            let queue = channel
                .queue_declare(ShortString::from(""), options, FieldTable::default())
                .await
                .context("Failed to declare the queue")?;
            let queue = queue.name().clone();
            (channel, queue)
        }
    };
    channel
        .queue_bind(
            queue.clone(),
            exchange.clone(),
            pattern.clone(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .context("Failed to bind the queue to the events exchange")?;
    channel
        .basic_qos(100, BasicQosOptions::default())
        .await
        .context("Failed to set the prefetch")?;
    let mut deliveries = channel
        .basic_consume(
            queue.clone(),
            "fetcherctl-watch".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .context("Failed to consume")?;
    let max_age = MaxAge::or_default(args.max_age, args.queue.is_some());
    eprintln!(
        "Watching exchange {:?} (pattern {:?}) on queue {:?}; {}.",
        exchange.as_str(),
        pattern.as_str(),
        queue.as_str(),
        max_age.describe()
    );
    let policy = max_age.policy();

    let deadline = args
        .timeout
        .map(|secs| Instant::now() + Duration::from_secs(secs));
    let mut seen: HashSet<String> = HashSet::new();
    let mut tally = Tally::default();
    let mut timed_out = false;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    while args.count.is_none_or(|count| tally.shown < count) {
        let delivery = tokio::select! {
            next = deliveries.next() => match next {
                Some(Ok(delivery)) => delivery,
                Some(Err(error)) => return Err(error).context("The consumer failed"),
                None => bail!("the broker cancelled the consumer"),
            },
            () = until(deadline) => {
                timed_out = true;
                break;
            }
            _ = &mut interrupted => break,
        };
        handle(args, key, &policy, &delivery, &mut seen, &mut tally)?;
        delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .context("Failed to acknowledge an event")?;
    }
    let _ = channel.close(200, "OK".into()).await;

    eprintln!(
        "{} event(s) shown, {} duplicate(s) dropped, {} rejected{}.",
        tally.shown,
        tally.duplicates,
        tally.rejected,
        if args.job.is_some() {
            format!(", {} of other jobs skipped", tally.skipped)
        } else {
            String::new()
        }
    );
    match (args.count, timed_out) {
        (Some(count), true) if tally.shown < count => bail!(
            "timed out after {} s with {} of {count} event(s)",
            args.timeout.unwrap_or_default(),
            tally.shown
        ),
        _ => Ok(()),
    }
}

/// The durable queue `name`, used as it is when it exists (an operator may have declared it with
/// arguments of their own), else declared durable. A passive declare of a missing queue closes
/// its channel, so the declare goes on a new one, which is returned.
async fn durable_queue(
    connection: &Connection,
    channel: Channel,
    name: ShortString,
) -> anyhow::Result<(Channel, ShortString)> {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    if let Ok(queue) = channel
        .queue_declare(name.clone(), passive, FieldTable::default())
        .await
    {
        return Ok((channel, queue.name().clone()));
    }
    let channel = connection
        .create_channel()
        .await
        .context("Failed to open a channel")?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let queue = channel
        .queue_declare(name, durable, FieldTable::default())
        .await
        .context("Failed to declare the queue")?;
    Ok((channel, queue.name().clone()))
}

/// Resolves at `deadline`, never without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Filters, verifies, checks the identity of, deduplicates and prints one delivery.
fn handle(
    args: &Args,
    key: &HmacKey,
    policy: &VerifyPolicy,
    delivery: &Delivery,
    seen: &mut HashSet<String>,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let headers = delivery.properties.headers().as_ref();
    let body = delivery.data.as_slice();
    if let Some(job) = args.job {
        if Uuid::parse_str(&signed_job_id(body)).ok() != Some(job) {
            tally.skipped += 1;
            return Ok(());
        }
    }

    let ce_id = amqp::text_header(headers, "ce-id");
    let value = |name: &str| amqp::header(headers, name).map(amqp::signature_value);
    let signature = SignatureHeaders {
        signature: value(SIGNATURE_HEADER),
        timestamp: value(TIMESTAMP_HEADER),
        version: value(VERSION_HEADER),
    };
    let tenant = amqp::string_header(headers, contract::wire::TENANT_HEADER);
    let route = Route {
        tenant: tenant.unwrap_or(""),
        exchange: delivery.exchange.as_str(),
        routing_key: delivery.routing_key.as_str(),
    };
    let now = chrono::Utc::now().timestamp();
    let verified = verify(&signature, &route, body, policy, now, |payload, hex| {
        key.verify_hex_parts(payload, hex)
    });

    let mut out = std::io::stdout().lock();
    // The signature first, then whether the ce-id is the one the signed parts imply.
    let identity = match verified {
        Ok(_) => dedupe_key(route.routing_key, body, &attributes(headers))
            .map_err(|error| (error.to_string(), error.code())),
        Err(error) => Err((error.to_string(), error.code())),
    };
    let ce_id_key = match identity {
        Ok(ce_id_key) => ce_id_key,
        Err((reason, code)) => {
            // A rejected event never enters `seen`: a forgery must not hide the real event.
            tally.rejected += 1;
            print_rejected(&mut out, args.json, &reason, code, ce_id, &route)?;
            return Ok(());
        }
    };
    if !seen.insert(ce_id_key) {
        tally.duplicates += 1;
        return Ok(());
    }
    tally.shown += 1;

    let ce_type = amqp::text_header(headers, "ce-type");
    let tenant = tenant.or_else(|| amqp::text_header(headers, "ce-tenantid"));
    let body_json = json_text(body);
    if args.json {
        let line = Event {
            ce_type,
            ce_id,
            ce_time: amqp::text_header(headers, "ce-time"),
            ce_subject: amqp::text_header(headers, "ce-subject"),
            tenant,
            request_id: amqp::string_header(headers, contract::wire::REQUEST_ID_HEADER),
            exchange: route.exchange,
            routing_key: route.routing_key,
            signature: "ok",
        };
        writeln!(
            out,
            "{}",
            with_body(&serde_json::to_string(&line)?, &body_json)
        )?;
    } else {
        writeln!(
            out,
            "{} {} tenant={} signature=ok",
            ce_type.unwrap_or("-"),
            ce_id.unwrap_or("-"),
            tenant.unwrap_or("-")
        )?;
        writeln!(out, "{body_json}")?;
    }
    out.flush()?;
    Ok(())
}

/// The headers [`dedupe_key`] checks, as received.
fn attributes(headers: Option<&FieldTable>) -> Attributes<'_> {
    let attribute = |name: &str| match (
        amqp::header(headers, name),
        amqp::text_header(headers, name),
    ) {
        (None, _) => Attribute::Absent,
        (Some(_), Some(text)) => Attribute::Text(text),
        (Some(_), None) => Attribute::NotText,
    };
    Attributes {
        id: attribute("ce-id"),
        kind: attribute("ce-type"),
        event_type: attribute("ce-eventtype"),
        subject: attribute("ce-subject"),
    }
}

/// One `REJECTED` line (or its `--json` object) for an event that is not shown.
fn print_rejected(
    out: &mut impl std::io::Write,
    json: bool,
    reason: &str,
    code: &'static str,
    ce_id: Option<&str>,
    route: &Route<'_>,
) -> anyhow::Result<()> {
    if json {
        let line = Rejected {
            rejected: true,
            reason,
            code,
            ce_id,
            exchange: route.exchange,
            routing_key: route.routing_key,
        };
        writeln!(out, "{}", serde_json::to_string(&line)?)?;
    } else {
        writeln!(
            out,
            "REJECTED {reason} (ce-id {}, routing key {})",
            ce_id.unwrap_or("-"),
            route.routing_key
        )?;
    }
    out.flush()?;
    Ok(())
}

/// One verified event, as `--json` prints it (the body is added after).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    ce_type: Option<&'a str>,
    ce_id: Option<&'a str>,
    ce_time: Option<&'a str>,
    ce_subject: Option<&'a str>,
    tenant: Option<&'a str>,
    request_id: Option<&'a str>,
    exchange: &'a str,
    routing_key: &'a str,
    signature: &'static str,
}

/// One rejected event, as `--json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rejected<'a> {
    rejected: bool,
    reason: &'a str,
    code: &'static str,
    ce_id: Option<&'a str>,
    exchange: &'a str,
    routing_key: &'a str,
}

/// `object` (a serialized JSON object) with a last member `"body":<body_json>`.
fn with_body(object: &str, body_json: &str) -> String {
    let members = object.strip_suffix('}').unwrap_or(object);
    let separator = if members.ends_with('{') { "" } else { "," };
    format!("{members}{separator}\"body\":{body_json}}}")
}

/// The body as compact JSON text with its members in their order, or, when it is not JSON, as a
/// JSON string of its text.
fn json_text(body: &[u8]) -> String {
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        // Valid JSON is UTF-8, and compaction only removes ASCII whitespace.
        String::from_utf8_lossy(&compact(body)).into_owned()
    } else {
        serde_json::Value::from(String::from_utf8_lossy(body).into_owned()).to_string()
    }
}

/// Valid JSON `text` without the whitespace between its tokens.
fn compact(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            out.push(byte);
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
        } else if !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = byte == b'"';
            out.push(byte);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_strings_and_member_order() {
        let text = b"{ \"b\" : [1, 2],\n \"a\": \"x \\\" y\\\\\", \"c\":{} }";
        assert_eq!(
            json_text(text),
            r#"{"b":[1,2],"a":"x \" y\\","c":{}}"#.to_owned()
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_a_json_string() {
        assert_eq!(json_text(b"not json"), "\"not json\"");
    }

    #[test]
    fn the_body_is_the_last_member() {
        assert_eq!(with_body(r#"{"a":1}"#, "{}"), r#"{"a":1,"body":{}}"#);
        assert_eq!(with_body("{}", "[1]"), r#"{"body":[1]}"#);
    }
}
