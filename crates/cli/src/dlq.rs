//! `fetcherctl dlq list | show | requeue | purge`: the dead-letter queue (`--dlq`, else the one
//! of `fetcher.dlq` and `fetcher.extract-external-data.dlq` that exists; see
//! [`crate::dead_letter_queue`]) for an operator.
//!
//! Reading never consumes for good: messages are taken with `basic.get` unacknowledged and, once
//! read, all handed back with one `basic.nack` (requeue), which RabbitMQ puts back in their
//! places. Meanwhile they are invisible to anyone else reading the queue, and each comes back
//! marked redelivered.
//!
//! What a letter says of itself counts only when the Worker's stamp on it verifies under the
//! internal key (`APP_ENC_KEY`, or `--hmac-key` / `FETCHER_INTERNAL_HMAC_KEY`; see
//! [`crate::dead_letter`]): anyone who may publish to the work queue can plant a letter with
//! `x-fetcher-*` (and `x-death`) headers of their choosing. Without a key, or without a stamp
//! that verifies, a letter is listed as unverified with RabbitMQ's `x-death` account only,
//! `--reason` never selects it, and `requeue` sends it only to a route the operator names
//! (`--to-queue`, or `--to-exchange` with `--to-routing-key`): never to a route its headers name.
//!
//! `requeue` publishes a selected message to a trusted route (the verified stamp's, which is
//! the route it was first published with and which its signature covers, or the one named), its
//! body and properties (headers included) as they are, waits for the broker's confirm, and only
//! then acknowledges the dead letter: a failure in between leaves it in the queue, and a crash
//! after the confirm leaves one copy in each (the Worker runs a job once). Nothing is re-signed,
//! so a message whose signature failed, or that is sent to another route than it was signed
//! for, is refused again, and one older than `RABBITMQ_SIGNATURE_MAX_AGE_SEC` is refused as
//! stale unless its job was accepted before.

use anyhow::{anyhow, bail, Context as _};
use chrono::Utc;
use crypto::HmacKey;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Confirmation, Connection};

use crate::amqp::BrokerArgs;
use crate::dead_letter::{DeadLetter, Unverified};
use crate::keys::MASTER_KEY_ENV;
use crate::submit::{internal_key, HMAC_KEY_ENV};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(clap::Subcommand)]
enum DlqCommand {
    /// One line per dead letter: position, job id, reason and queue, age, size, deaths.
    /// A letter whose Worker stamp does not verify is marked unverified and shown with
    /// RabbitMQ's x-death reason and queue only. Nothing is consumed: the messages are read
    /// and handed back in their places.
    List(List),
    /// One dead letter's properties, headers and body (capped), by job id or position.
    Show(Show),
    /// Publish the selected dead letters, unchanged, to the route they were first published
    /// with (the work queue) as the Worker's verified stamp names it, or to the route given
    /// with --to-queue or --to-exchange and --to-routing-key; each acknowledged only once the
    /// broker confirmed its copy. An unverified letter without a named route stays.
    Requeue(Requeue),
    /// Delete every message of the dead-letter queue for good (needs --yes).
    Purge(Purge),
}

#[derive(clap::Args)]
struct Queue {
    #[command(flatten)]
    broker: BrokerArgs,

    /// The dead-letter queue. Default: whichever of fetcher.dlq (upstream's repository
    /// definitions) and fetcher.extract-external-data.dlq (LerianStudio's Helm chart) exists.
    #[arg(long, value_name = "QUEUE", visible_alias = "dead-letter-queue")]
    dlq: Option<String>,
}

/// The key that checks the Worker's stamps.
#[derive(clap::Args)]
struct StampKey {
    /// The internal HMAC key as 64 hex characters (`fetcherctl derive-key --internal`), which
    /// checks the Worker's stamp on each dead letter; or APP_ENC_KEY (exactly one of the two).
    /// Without either, every letter is unverified. A flag is visible in the process list:
    /// prefer the variable.
    #[arg(long, value_name = "HEX", env = HMAC_KEY_ENV, hide_env_values = true)]
    hmac_key: Option<String>,
}

impl StampKey {
    /// The internal key, `None` (said once on standard error) when none is given.
    fn key(&self) -> anyhow::Result<Option<HmacKey>> {
        let given = self
            .hmac_key
            .as_deref()
            .is_some_and(|h| !h.trim().is_empty());
        if !given && !crate::keys::master_is_set() {
            eprintln!(
                "No internal key ({MASTER_KEY_ENV}, or --hmac-key / {HMAC_KEY_ENV}): no Worker \
                 stamp can be checked, every dead letter is unverified."
            );
            return Ok(None);
        }
        internal_key(self.hmac_key.as_deref()).map(Some)
    }
}

#[derive(clap::Args)]
struct List {
    #[command(flatten)]
    queue: Queue,

    #[command(flatten)]
    stamps: StampKey,

    /// Read at most this many messages.
    #[arg(long, default_value_t = 1000)]
    limit: usize,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true)))]
struct Show {
    #[command(flatten)]
    queue: Queue,

    #[command(flatten)]
    stamps: StampKey,

    /// The first dead letter of this job.
    #[arg(long, group = "which")]
    job: Option<String>,

    /// The dead letter at this position (1 is the oldest, as `list` numbers them).
    #[arg(long, group = "which")]
    index: Option<usize>,

    /// Print at most this many bytes of the body.
    #[arg(long, default_value_t = 4096)]
    max_bytes: usize,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(false)))]
struct Requeue {
    #[command(flatten)]
    queue: Queue,

    #[command(flatten)]
    stamps: StampKey,

    #[command(flatten)]
    to: Destination,

    /// The dead letters of this job (repeatable).
    #[arg(long, group = "which")]
    job: Vec<String>,

    /// The dead letters with this reason, as the Worker's verified stamp gives it (such as
    /// `signature_mismatch`). An unverified letter is never selected by its reason.
    #[arg(long, group = "which")]
    reason: Option<String>,

    /// Every dead letter.
    #[arg(long, group = "which")]
    all: bool,
}

/// A route the operator names for the requeued letters, instead of their verified stamps'.
/// A job's signature covers its exchange and routing key (contract §3): a letter sent to any
/// other route than it was signed for is refused again.
#[derive(clap::Args)]
struct Destination {
    /// Requeue to this work queue (the default exchange, this routing key), as jobs are
    /// normally published (fetcherctl submit's --queue).
    #[arg(long, value_name = "QUEUE", conflicts_with_all = ["to_exchange", "to_routing_key"])]
    to_queue: Option<String>,

    /// Requeue to this exchange (with --to-routing-key).
    #[arg(long, value_name = "EXCHANGE", requires = "to_routing_key")]
    to_exchange: Option<String>,

    /// Requeue with this routing key (on --to-exchange, else the default exchange).
    #[arg(long, value_name = "KEY")]
    to_routing_key: Option<String>,
}

impl Destination {
    /// The named route, if any; refused when AMQP cannot carry it (names of at most 255 bytes)
    /// or it names no queue.
    fn route(&self) -> anyhow::Result<Option<(String, String)>> {
        let route = match (&self.to_queue, &self.to_exchange, &self.to_routing_key) {
            (Some(queue), _, _) => (String::new(), queue.clone()),
            (None, exchange, Some(key)) => (exchange.clone().unwrap_or_default(), key.clone()),
            _ => return Ok(None),
        };
        if route.0.len() > 255 || route.1.len() > 255 {
            bail!("--to-queue, --to-exchange and --to-routing-key take at most 255 bytes");
        }
        if route.0.is_empty() && route.1.is_empty() {
            bail!("--to-queue (or --to-routing-key) must name the work queue");
        }
        Ok(Some(route))
    }
}

#[derive(clap::Args)]
struct Purge {
    #[command(flatten)]
    queue: Queue,

    /// Really delete them.
    #[arg(long)]
    yes: bool,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let queue = match &args.command {
        DlqCommand::List(list) => &list.queue,
        DlqCommand::Show(show) => &show.queue,
        DlqCommand::Requeue(requeue) => &requeue.queue,
        DlqCommand::Purge(purge) => &purge.queue,
    };
    if let DlqCommand::Requeue(requeue) = &args.command {
        // A route that cannot be used is refused before the broker is contacted.
        requeue.to.route()?;
    }
    let (connection, channel) = open(queue).await?;
    let outcome = match crate::dead_letter_queue::find(&connection, queue.dlq.as_deref()).await {
        Ok(dlq) => match &args.command {
            DlqCommand::List(list) => self::list(list, &channel, &dlq).await,
            DlqCommand::Show(show) => self::show(show, &channel, &dlq).await,
            DlqCommand::Requeue(requeue) => self::requeue(requeue, &channel, &dlq).await,
            DlqCommand::Purge(purge) => self::purge(purge, &channel, &dlq).await,
        },
        Err(error) => Err(error),
    };
    // Closed and answered before the process ends, so whatever was handed back is in the queue
    // again by the time the command returns.
    let _ = channel.close(200, "OK".into()).await;
    let _ = connection.close(200, "OK".into()).await;
    outcome
}

async fn list(args: &List, channel: &Channel, dlq: &str) -> anyhow::Result<()> {
    let key = args.stamps.key()?;
    let depth = depth(channel, dlq).await?;
    let letters = peek(channel, dlq, args.limit.min(depth)).await?;
    release(channel, &letters).await?;
    let now = Utc::now();
    println!(
        "{} message(s) in {}{}",
        depth,
        dlq,
        if letters.len() < depth {
            format!(", the first {} shown", letters.len())
        } else {
            String::new()
        }
    );
    println!("#\tjob\treason\tage\tsize\tdeaths");
    for (index, delivery) in letters.iter().enumerate() {
        let letter = DeadLetter::read(delivery, key.as_ref());
        println!(
            "{}\t{}\t{}\t{}\t{} B\t{}",
            index + 1,
            letter.job_id,
            letter.summary(),
            letter.age(now),
            letter.size,
            letter.deaths()
        );
    }
    Ok(())
}

async fn show(args: &Show, channel: &Channel, dlq: &str) -> anyhow::Result<()> {
    let key = args.stamps.key()?;
    let depth = depth(channel, dlq).await?;
    let letters = peek(channel, dlq, depth).await?;
    release(channel, &letters).await?;
    let found = letters.iter().enumerate().find(|(index, delivery)| {
        args.index == Some(index + 1)
            || args.job.as_deref() == Some(DeadLetter::read(delivery, None).job_id.as_str())
    });
    let Some((index, delivery)) = found else {
        bail!("no such dead letter in {}", dlq);
    };
    let letter = DeadLetter::read(delivery, key.as_ref());
    print!("{}", describe(index + 1, &letter, delivery, args.max_bytes));
    Ok(())
}

/// A dead letter for `show`: what `list` says, the route (the verified stamp's, or x-death's
/// marked untrusted), properties, headers and the body's first `max_bytes`. Texts go through
/// [`contract::redact`], so a connection string a body or a header might carry is not printed.
fn describe(position: usize, letter: &DeadLetter, delivery: &Delivery, max_bytes: usize) -> String {
    let properties = &delivery.properties;
    let mut out = format!(
        "position: {position}\njob: {}\nreason: {}\ndeaths: {}\nage: {}\n",
        letter.job_id,
        letter.summary(),
        letter.deaths(),
        letter.age(Utc::now())
    );
    match (&letter.stamp, &letter.death.route) {
        (Ok(stamped), _) => {
            let (exchange, key) = &stamped.route;
            out.push_str(&format!(
                "route: exchange {exchange:?}, routing key {key:?} (stamped by the Worker)\n"
            ));
        }
        (Err(_), Some((exchange, key))) => out.push_str(&format!(
            "route: exchange {exchange:?}, routing key {key:?} (x-death, unverified: requeue \
             needs --to-queue)\n"
        )),
        (Err(_), None) => {}
    }
    let optional = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    out.push_str(&format!(
        "content-type: {}\ndelivery-mode: {}\nmessage-id: {}\ntimestamp: {}\nheaders:\n",
        optional(properties.content_type().as_ref().map(|v| v.to_string())),
        optional(properties.delivery_mode().map(|v| v.to_string())),
        optional(properties.message_id().as_ref().map(|v| v.to_string())),
        optional(properties.timestamp().map(|v| v.to_string())),
    ));
    if let Some(headers) = properties.headers() {
        for (name, value) in headers.inner() {
            out.push_str(&format!("  {name}: {}\n", cap(&render(value), 512)));
        }
    }
    let shown = &delivery.data[..delivery.data.len().min(max_bytes)];
    out.push_str(&format!(
        "body ({} bytes):\n{}\n",
        letter.size,
        contract::redact(&String::from_utf8_lossy(shown))
    ));
    if shown.len() < delivery.data.len() {
        out.push_str(&format!(
            "… {} more bytes not shown (--max-bytes)\n",
            delivery.data.len() - shown.len()
        ));
    }
    out
}

fn render(value: &AMQPValue) -> String {
    let text = match value {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::ShortString(s) => s.to_string(),
        AMQPValue::ByteArray(b) => String::from_utf8_lossy(b.as_slice()).into_owned(),
        other => format!("{other:?}"),
    };
    contract::redact(&text)
}

fn cap(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

async fn requeue(args: &Requeue, channel: &Channel, dlq: &str) -> anyhow::Result<()> {
    let stamp_key = args.stamps.key()?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .context("Failed to enable publisher confirms")?;
    // Only the messages there now: one the Worker refuses again lands behind them.
    let depth = depth(channel, dlq).await?;
    let named = args.to.route()?;
    let mut kept: Vec<Delivery> = Vec::new();
    let mut requeued = 0;
    for _ in 0..depth {
        let Some(delivery) = get(channel, dlq).await? else {
            break;
        };
        let letter = DeadLetter::read(&delivery, stamp_key.as_ref());
        let selected = args.all
            || args.job.contains(&letter.job_id)
            || (args.reason.is_some() && args.reason.as_deref() == letter.verified_reason());
        if !selected {
            kept.push(delivery);
            continue;
        }
        let trusted = named
            .clone()
            .or_else(|| letter.stamp.as_ref().ok().map(|s| s.route.clone()));
        let Some((exchange, key)) = trusted else {
            eprintln!("{}", unrouted(&letter));
            kept.push(delivery);
            continue;
        };
        if let Err(error) = republish(channel, &delivery, &exchange, &key).await {
            kept.push(delivery);
            release(channel, &kept).await?;
            return Err(error.context(format!(
                "Failed to requeue the dead letter of job {} (it stays in {dlq}; {requeued} \
                 requeued before it)",
                letter.job_id
            )));
        }
        channel
            .basic_ack(delivery.delivery_tag, BasicAckOptions::default())
            .await
            .context("Failed to acknowledge a requeued dead letter")?;
        requeued += 1;
        println!(
            "Requeued job {} to exchange {exchange:?}, routing key {key:?}",
            letter.job_id
        );
    }
    release(channel, &kept).await?;
    println!("Requeued {requeued} of {depth} message(s) in {dlq}");
    Ok(())
}

/// The one line that says why a selected letter stays: it is unverified and no route was named.
fn unrouted(letter: &DeadLetter) -> String {
    let why = letter.stamp.as_ref().err().map_or("", |why| why.why());
    let hint = match letter.stamp {
        Err(Unverified::NoKey) => "give the internal key, or name the work queue with --to-queue",
        _ => "its headers' route is not trusted; name the work queue with --to-queue",
    };
    format!(
        "Kept the dead letter of job {}: unverified ({why}); {hint}",
        letter.job_id
    )
}

/// Publishes the dead letter's body and properties as they are, mandatory, and waits for the
/// broker's confirm.
async fn republish(
    channel: &Channel,
    delivery: &Delivery,
    exchange: &str,
    key: &str,
) -> anyhow::Result<()> {
    let options = BasicPublishOptions {
        mandatory: true,
        immediate: false,
    };
    let confirmation = channel
        .basic_publish(
            exchange.into(),
            key.into(),
            options,
            &delivery.data,
            delivery.properties.clone(),
        )
        .await
        .context("Failed to publish")?
        .await
        .context("Failed to get the broker's confirm")?;
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(_)) | Confirmation::Nack(Some(_)) => Err(anyhow!(
            "the broker returned it as unroutable: is the work queue there?"
        )),
        Confirmation::Nack(None) => Err(anyhow!("the broker refused it (nack)")),
        Confirmation::NotRequested => Err(anyhow!("the broker did not confirm it")),
    }
}

async fn purge(args: &Purge, channel: &Channel, dlq: &str) -> anyhow::Result<()> {
    if !args.yes {
        let depth = depth(channel, dlq).await?;
        bail!("purge deletes the {depth} message(s) of {dlq} for good; run it again with --yes");
    }
    let purged = channel
        .queue_purge(dlq.into(), QueuePurgeOptions::default())
        .await
        .with_context(|| format!("Failed to purge {dlq}"))?;
    println!("Purged {purged} message(s) from {dlq}");
    Ok(())
}

/// A connection and a channel that takes one message at a time.
async fn open(queue: &Queue) -> anyhow::Result<(Connection, Channel)> {
    let connection = queue.broker.connect("fetcherctl dlq").await?;
    let channel = connection
        .create_channel()
        .await
        .context("Failed to open a channel")?;
    channel
        .basic_qos(0, BasicQosOptions::default())
        .await
        .context("Failed to set the channel's prefetch")?;
    Ok((connection, channel))
}

/// How many messages the queue holds now (it must exist).
async fn depth(channel: &Channel, queue: &str) -> anyhow::Result<usize> {
    let options = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let declared = channel
        .queue_declare(queue.into(), options, FieldTable::default())
        .await
        .with_context(|| format!("Failed to find the queue {queue}"))?;
    Ok(declared.message_count() as usize)
}

async fn get(channel: &Channel, queue: &str) -> anyhow::Result<Option<Delivery>> {
    let got = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: false })
        .await
        .with_context(|| format!("Failed to read {queue}"))?;
    Ok(got.map(|message| message.delivery))
}

/// Up to `limit` messages, unacknowledged.
async fn peek(channel: &Channel, queue: &str, limit: usize) -> anyhow::Result<Vec<Delivery>> {
    let mut letters = Vec::new();
    while letters.len() < limit {
        match get(channel, queue).await {
            Ok(Some(delivery)) => letters.push(delivery),
            Ok(None) => break,
            Err(error) => {
                release(channel, &letters).await?;
                return Err(error);
            }
        }
    }
    Ok(letters)
}

/// Hands every message still unacknowledged on the channel back to its queue, in its place.
async fn release(channel: &Channel, letters: &[Delivery]) -> anyhow::Result<()> {
    let Some(last) = letters.iter().map(|d| d.delivery_tag).max() else {
        return Ok(());
    };
    channel
        .basic_nack(
            last,
            BasicNackOptions {
                multiple: true,
                requeue: true,
            },
        )
        .await
        .context("Failed to hand the messages back to the queue")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn destination(queue: Option<&str>, exchange: Option<&str>, key: Option<&str>) -> Destination {
        Destination {
            to_queue: queue.map(str::to_owned),
            to_exchange: exchange.map(str::to_owned),
            to_routing_key: key.map(str::to_owned),
        }
    }

    #[test]
    fn a_named_route_is_the_default_exchange_or_the_one_given() {
        let route = |d: Destination| d.route().expect("valid");
        assert_eq!(route(destination(None, None, None)), None);
        assert_eq!(
            route(destination(Some("work"), None, None)),
            Some((String::new(), "work".to_owned()))
        );
        assert_eq!(
            route(destination(None, Some("jobs"), Some("work"))),
            Some(("jobs".to_owned(), "work".to_owned()))
        );
        assert_eq!(
            route(destination(None, None, Some("work"))),
            Some((String::new(), "work".to_owned()))
        );
    }

    #[test]
    fn an_unusable_route_is_refused() {
        assert!(destination(Some(""), None, None).route().is_err());
        assert!(destination(Some(&"q".repeat(256)), None, None)
            .route()
            .is_err());
        assert!(destination(None, Some(&"e".repeat(256)), Some("k"))
            .route()
            .is_err());
    }
}
