//! `fetcherctl submit`: builds or reads a job message, validates it as the Worker will, signs it
//! with the internal HMAC key (contract §3; derived from `APP_ENC_KEY` or given as hex) and
//! publishes it to the work queue with confirms.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use chrono::{SecondsFormat, Utc};
use contract::envelope::{sign, Route, SIGNATURE_HEADER, TIMESTAMP_HEADER, VERSION_HEADER};
use contract::{JobMessage, MessageError};
use crypto::HmacKey;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Confirmation};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::amqp::{self, BrokerArgs};
use crate::keys::{self, MASTER_KEY_ENV};

use contract::wire::{DEFAULT_WORK_QUEUE, REQUEST_ID_HEADER, TENANT_HEADER};
/// The variable that may hold the internal HMAC key as hex, instead of `--hmac-key`.
pub const HMAC_KEY_ENV: &str = "FETCHER_INTERNAL_HMAC_KEY";

#[derive(clap::Args)]
pub struct Args {
    /// A job message (JSON) sent byte for byte as given; `-` reads standard input. When it has
    /// no jobId, a v7 UUID is generated and inserted as its first member.
    #[arg(
        long,
        value_name = "JOB.JSON",
        conflicts_with_all = ["connection", "table", "fields", "filter", "metadata", "job_id"]
    )]
    file: Option<PathBuf>,

    /// Connection name the job extracts from (without --file).
    #[arg(long, value_name = "NAME", required_unless_present = "file")]
    connection: Option<String>,

    /// Table to extract (`table`, `schema.table` or `catalog.schema.table`).
    #[arg(long, value_name = "TABLE", required_unless_present = "file")]
    table: Option<String>,

    /// Fields of the table, comma-separated.
    #[arg(
        long,
        value_name = "A,B,C",
        value_delimiter = ',',
        required_unless_present = "file"
    )]
    fields: Vec<String>,

    /// Conditions on the table's fields, as JSON: `{"<field>":{"<op>":[values]}}` with the
    /// operators eq, ne, gt, gte, lt, lte, between, in, nin, like.
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,

    /// Metadata carried through to the job's events, as a JSON object.
    #[arg(long, value_name = "JSON")]
    metadata: Option<String>,

    /// The job id (default: a new v7 UUID).
    #[arg(long, value_name = "UUID")]
    job_id: Option<Uuid>,

    /// The job's tenant: sent as X-Tenant-ID and covered by the signature.
    #[arg(long, value_name = "TENANT")]
    tenant: Option<String>,

    /// Correlation id for the Worker's logs and the job's events (X-Request-Id).
    #[arg(long, value_name = "ID")]
    request_id: Option<String>,

    /// The work queue (routing key on the default exchange).
    #[arg(
        long,
        value_name = "QUEUE",
        env = "RABBITMQ_FETCHER_WORK_QUEUE",
        default_value = DEFAULT_WORK_QUEUE
    )]
    queue: String,

    /// The internal HMAC key as 64 hex characters (what `fetcherctl derive-key --internal`
    /// prints), for a submitter that is not given the master key. Exactly one of this and
    /// APP_ENC_KEY. A flag is visible in the process list: prefer the variable.
    #[arg(
        long,
        value_name = "HEX",
        env = HMAC_KEY_ENV,
        hide_env_values = true
    )]
    hmac_key: Option<String>,

    #[command(flatten)]
    broker: BrokerArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    // Everything that can be refused is refused before the broker is contacted: an invalid
    // message is never published.
    let (body, job_id) = match &args.file {
        Some(path) => body_from_file(path)?,
        None => body_from_flags(&args)?,
    };
    let key = internal_key(args.hmac_key.as_deref())?;
    let queue = ShortString::try_new(args.queue.as_str())
        .map_err(|_| anyhow!("--queue is longer than 255 bytes"))?;
    let tenant = args.tenant.as_deref().filter(|tenant| !tenant.is_empty());
    let request_id = args.request_id.as_deref().filter(|id| !id.is_empty());

    let now = Utc::now().timestamp();
    let route = Route {
        tenant: tenant.unwrap_or(""),
        exchange: "",
        routing_key: &args.queue,
    };
    let signature = sign(now, &route, &body, |payload| key.sign_hex(payload));
    let mut headers = FieldTable::default();
    headers.insert(
        SIGNATURE_HEADER.into(),
        amqp::long_string(&signature.signature),
    );
    headers.insert(
        TIMESTAMP_HEADER.into(),
        amqp::long_string(&signature.timestamp),
    );
    headers.insert(VERSION_HEADER.into(), amqp::long_string(signature.version));
    if let Some(tenant) = tenant {
        headers.insert(TENANT_HEADER.into(), amqp::long_string(tenant));
    }
    if let Some(request_id) = request_id {
        headers.insert(REQUEST_ID_HEADER.into(), amqp::long_string(request_id));
    }
    let properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
        .with_message_id(job_id.to_string().into())
        .with_timestamp(u64::try_from(now).unwrap_or(0))
        .with_app_id("fetcherctl".into())
        .with_headers(headers);

    let connection = args.broker.connect("fetcherctl-submit").await?;
    let published = publish(&args.broker, &connection, queue, &body, properties).await;
    // Best effort: the outcome is known already.
    let _ = connection.close(200, "OK".into()).await;
    published?;
    println!("Submitted job {job_id}");
    Ok(())
}

/// The internal HMAC key from exactly one of `APP_ENC_KEY` and `--hmac-key` /
/// [`HMAC_KEY_ENV`]: with both, which one signs would be a guess.
pub(crate) fn internal_key(hex: Option<&str>) -> anyhow::Result<HmacKey> {
    let source = format!("--hmac-key (or {HMAC_KEY_ENV})");
    match (
        keys::master_is_set(),
        hex.filter(|hex| !hex.trim().is_empty()),
    ) {
        (true, Some(_)) => {
            bail!("both {MASTER_KEY_ENV} and {source} are set: give one of them, not both")
        }
        (false, Some(hex)) => keys::internal_from_hex(hex, &source),
        (true, None) => {
            let keys = keys::from_env("submit signs the job message with the internal HMAC key")?;
            Ok(keys.internal_hmac().clone())
        }
        (false, None) => bail!(
            "submit signs the job message with the internal HMAC key: set {MASTER_KEY_ENV}, or \
             give the key itself with {source}"
        ),
    }
}

/// Publishes persistent and mandatory on the default exchange, and waits for the confirm.
async fn publish(
    broker: &BrokerArgs,
    connection: &lapin::Connection,
    queue: ShortString,
    body: &[u8],
    properties: BasicProperties,
) -> anyhow::Result<()> {
    let exchange = ShortString::from("");
    let confirming = async {
        let channel = connection
            .create_channel()
            .await
            .context("Failed to open a channel")?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("Failed to enable publisher confirms")?;
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        let confirm = channel
            .basic_publish(exchange, queue.clone(), options, body, properties)
            .await
            .context("Failed to publish the job message")?;
        confirm
            .await
            .context("Failed to get the broker's confirm of the job message")
    };
    let confirmation = tokio::time::timeout(broker.timeout(), confirming)
        .await
        .map_err(|_| {
            anyhow!(
                "the broker did not confirm the job message within {} s",
                broker.timeout().as_secs()
            )
        })??;
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => bail!(
            "the broker returned the job message as unroutable ({} {}): is there a queue named \
             {:?}?",
            returned.reply_code,
            returned.reply_text.as_str(),
            queue.as_str()
        ),
        Confirmation::Nack(None) => bail!("the broker refused the job message (nack)"),
        Confirmation::NotRequested => bail!("the broker did not confirm the job message"),
    }
}

/// The file's bytes, validated; a jobId is inserted when the message has none.
fn body_from_file(path: &PathBuf) -> anyhow::Result<(Vec<u8>, Uuid)> {
    let body = if path.as_os_str() == "-" {
        let mut body = Vec::new();
        std::io::stdin()
            .read_to_end(&mut body)
            .context("Failed to read the job message from standard input")?;
        body
    } else {
        std::fs::read(path)
            .with_context(|| format!("Failed to read the job message {}", path.display()))?
    };
    match JobMessage::parse(&body) {
        Ok(message) => Ok((body, message.job_id)),
        Err(MessageError::MissingJobId) => {
            let body = with_job_id(&body, Uuid::now_v7())?;
            let message = JobMessage::parse(&body).map_err(invalid)?;
            Ok((body, message.job_id))
        }
        Err(error) => Err(invalid(error)),
    }
}

/// A message built from `--connection`, `--table`, `--fields`, `--filter` and `--metadata`.
fn body_from_flags(args: &Args) -> anyhow::Result<(Vec<u8>, Uuid)> {
    let (Some(connection), Some(table)) = (&args.connection, &args.table) else {
        // clap requires both without --file.
        bail!("--connection and --table are required without --file");
    };
    let job_id = args.job_id.unwrap_or_else(Uuid::now_v7);
    let nest = |value: Value| {
        let tables = Map::from_iter([(table.clone(), value)]);
        Value::Object(Map::from_iter([(
            connection.clone(),
            Value::Object(tables),
        )]))
    };
    let fields = Value::from(args.fields.clone());

    // Members in the order the upstream manager writes them; the parser does not care.
    let mut body = String::from("{\"jobId\":");
    body.push_str(&Value::from(job_id.to_string()).to_string());
    body.push_str(",\"mappedFields\":");
    body.push_str(&nest(fields).to_string());
    if let Some(filter) = &args.filter {
        let filter: Value = serde_json::from_str(filter).context("--filter is not valid JSON")?;
        body.push_str(",\"filters\":");
        body.push_str(&nest(filter).to_string());
    }
    if let Some(metadata) = &args.metadata {
        let metadata: Value =
            serde_json::from_str(metadata).context("--metadata is not valid JSON")?;
        body.push_str(",\"metadata\":");
        body.push_str(&metadata.to_string());
    }
    body.push_str(",\"createdAt\":");
    let created_at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    body.push_str(&Value::from(created_at).to_string());
    body.push('}');

    let body = body.into_bytes();
    let message = JobMessage::parse(&body).map_err(invalid)?;
    Ok((body, message.job_id))
}

fn invalid(error: MessageError) -> anyhow::Error {
    anyhow!("invalid job message: {error}")
}

/// `body` (a JSON object) with `"jobId":"<id>"` inserted as its first member; every other byte
/// stays as it was.
fn with_job_id(body: &[u8], job_id: Uuid) -> anyhow::Result<Vec<u8>> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let Some(open) = body.iter().position(|b| !is_space(b)) else {
        bail!("invalid job message: the body is empty");
    };
    if body[open] != b'{' {
        bail!("invalid job message: the body is not a JSON object");
    }
    let rest = &body[open + 1..];
    let empty = rest.iter().find(|b| !is_space(b)) == Some(&b'}');
    let member = format!(
        "\"jobId\":\"{}\"{}",
        job_id.as_hyphenated(),
        if empty { "" } else { "," }
    );
    let mut out = Vec::with_capacity(body.len() + member.len());
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "019391a2-7c1e-7a3b-9f00-0123456789ab";

    fn id() -> Uuid {
        Uuid::parse_str(ID).expect("uuid")
    }

    #[test]
    fn job_id_goes_first_and_the_rest_is_untouched() {
        let body = b" \n{ \"mappedFields\" : {\"c\":{\"t\":[\"a\"]}} }\n";
        let out = with_job_id(body, id()).expect("object");
        assert_eq!(
            String::from_utf8(out.clone()).expect("utf-8"),
            format!(" \n{{\"jobId\":\"{ID}\", \"mappedFields\" : {{\"c\":{{\"t\":[\"a\"]}}}} }}\n")
        );
        assert_eq!(JobMessage::parse(&out).expect("valid").job_id, id());
    }

    #[test]
    fn job_id_in_an_empty_object_has_no_comma() {
        let out = with_job_id(b"{ }", id()).expect("object");
        assert_eq!(out, format!("{{\"jobId\":\"{ID}\" }}").into_bytes());
    }

    #[test]
    fn non_objects_are_refused() {
        assert!(with_job_id(b"  ", id()).is_err());
        assert!(with_job_id(b"[1]", id()).is_err());
    }
}
