//! Consuming the work queue: manual acks, prefetch = concurrency, one task per delivery, and
//! reconnection after a broker restart. Each message is acked only once its job's terminal state
//! is committed (or the drop is decided); a refused one once its dead letter is placed
//! ([`dead_letter`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};
use secrecy::{ExposeSecret, SecretString};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::amqp::topology::{self, DeadLetters};
use crate::amqp::{dead_letter, headers};
use crate::dependencies::ProbeError;
use crate::job::{Disposition, JobCore, Requeue};
use crate::metrics;

/// Where and how much to consume.
#[derive(Clone)]
pub struct ConsumerConfig {
    pub uri: SecretString,
    pub work_queue: String,
    pub events_exchange: String,
    /// Prefetch, and so the number of jobs run at once.
    pub prefetch: u16,
    pub worker_id: String,
}

/// Connects, declares the topology and checks it: the startup check that refuses to start on a
/// work queue dead-lettering where no known provisioning does. Returns the connection and
/// where the work queue dead-letters.
pub async fn connect(config: &ConsumerConfig) -> anyhow::Result<(Connection, DeadLetters)> {
    let connection = open(config).await?;
    let dead_letters =
        topology::declare(&connection, &config.events_exchange, &config.work_queue).await?;
    Ok((connection, dead_letters))
}

/// Opens a connection to the broker, declaring nothing: whether RabbitMQ answers.
pub async fn open(config: &ConsumerConfig) -> anyhow::Result<Connection> {
    probe(config).await.map_err(|error| match error {
        ProbeError::Unreachable(reason) => anyhow::anyhow!(reason),
        ProbeError::Refused { reason, fix } => anyhow::anyhow!("{reason}; {fix}"),
    })
}

/// [`open`], telling a broker that refuses the Worker (its login, its vhost) from one that does
/// not answer. The reasons are redacted (lapin's error texts never carry the URI's password).
pub(crate) async fn probe(config: &ConsumerConfig) -> Result<Connection, ProbeError> {
    let properties = ConnectionProperties::default()
        .with_connection_name(format!("fetcher-worker {}", config.worker_id).into());
    tokio::time::timeout(
        Duration::from_secs(10),
        Connection::connect(config.uri.expose_secret(), properties),
    )
    .await
    .map_err(|_| ProbeError::Unreachable("RabbitMQ did not answer within 10 s".to_owned()))?
    .map_err(|e| match crate::probes::amqp(&e) {
        ProbeError::Unreachable(reason) => {
            ProbeError::Unreachable(format!("cannot connect to RabbitMQ: {reason}"))
        }
        refused => refused,
    })
}

/// The connection and the consuming channel left open when consumption stops on purpose: the
/// in-flight deliveries are settled on that channel, and dropping its last handle closes it
/// (lapin's `ChannelCloser`), which would poison their ackers.
pub struct Stopped {
    pub connection: Connection,
    pub channel: Channel,
}

/// Consumes until `stop` is cancelled, reconnecting whenever the connection is lost. Handlers
/// run on `tracker`. Returns the live connection and channel, which the caller keeps open until
/// the handlers have settled their deliveries.
pub async fn run(
    config: ConsumerConfig,
    core: Arc<JobCore>,
    connected: Arc<AtomicBool>,
    stop: CancellationToken,
    tracker: TaskTracker,
) -> Option<Stopped> {
    let mut backoff = Duration::from_millis(500);
    while !stop.is_cancelled() {
        match consume(&config, &core, &connected, &stop, &tracker).await {
            Ok(stopped) => return Some(stopped),
            Err(error) => {
                connected.store(false, Ordering::SeqCst);
                tracing::warn!(error = %contract::redact(&error.to_string()), retry_in_ms = backoff.as_millis() as u64, "Lost the work queue; reconnecting.");
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(15));
            }
        }
    }
    None
}

/// One connection's consumption; `Ok` with the connection and the channel when stopped on
/// purpose.
async fn consume(
    config: &ConsumerConfig,
    core: &Arc<JobCore>,
    connected: &AtomicBool,
    stop: &CancellationToken,
    tracker: &TaskTracker,
) -> anyhow::Result<Stopped> {
    let (connection, dead_letters) = connect(config).await?;
    let channel = connection.create_channel().await?;
    channel
        .basic_qos(config.prefetch, BasicQosOptions::default())
        .await?;
    // Dead letters are placed on a channel of their own, in confirm mode (`dead_letter`).
    let confirms = connection.create_channel().await?;
    confirms
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let queue: Arc<str> = Arc::from(config.work_queue.as_str());
    let tag = format!("fetcher-worker-{}", config.worker_id);
    let mut deliveries = channel
        .basic_consume(
            config.work_queue.as_str().into(),
            tag.as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    connected.store(true, Ordering::SeqCst);
    tracing::info!(queue = %config.work_queue, prefetch = config.prefetch, "Consuming job messages.");
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                let _ = channel.basic_cancel(tag.as_str().into(), BasicCancelOptions::default()).await;
                tracing::info!("Stopped consuming; in-flight jobs finish.");
                return Ok(Stopped { connection, channel });
            }
            next = deliveries.next() => match next {
                Some(Ok(delivery)) => {
                    let refusal = RefusalChannel { confirms: confirms.clone(), queue: queue.clone(), dead_letters };
                    let (core, stop, channel) = (core.clone(), stop.clone(), channel.clone());
                    // Boxed: the job's future is some 10 KiB, moved once here rather than
                    // at each step of the spawn and again when the task ends.
                    tracker.spawn(Box::pin(handle(core, delivery, channel, refusal, stop)));
                }
                Some(Err(error)) => return Err(error.into()),
                None => anyhow::bail!("the consumer was cancelled by the broker"),
            }
        }
    }
}

/// Acks `delivery` on the channel it came from, itself. lapin's `Acker::ack` sends the same
/// frame through the connection's internal RPC task, which spawns a task for each ack: a hop
/// and a task for every job. `Ok(false)`, as the acker answers, when the channel
/// failed meanwhile (its ackers are poisoned): nothing reaches the broker.
async fn ack(channel: &Channel, delivery: &Delivery) -> lapin::Result<bool> {
    if !delivery.acker.usable() {
        return Ok(false);
    }
    channel
        .basic_ack(delivery.delivery_tag, BasicAckOptions::default())
        .await
        .map(|()| true)
}

/// Where a refused delivery goes: the confirm channel, the queue it was consumed from, and
/// where that queue dead-letters.
struct RefusalChannel {
    confirms: Channel,
    queue: Arc<str>,
    dead_letters: DeadLetters,
}

async fn handle(
    core: Arc<JobCore>,
    delivery: Delivery,
    channel: Channel,
    refusal: RefusalChannel,
    stop: CancellationToken,
) {
    if delivery.redelivered {
        metrics::redelivered();
    }
    metrics::active(1.0);
    let disposition = core.handle(&headers::inbound(&delivery), &stop).await;
    metrics::active(-1.0);
    let requeued = matches!(disposition, Disposition::Retry(_));
    let outcome = match disposition {
        Disposition::Ack => ack(&channel, &delivery).await,
        Disposition::DeadLetter(reason) => {
            let refusal = dead_letter::Refusal {
                confirms: &refusal.confirms,
                queue: &refusal.queue,
                dead_letters: &refusal.dead_letters,
                max_bytes: core.max_message_bytes(),
                key: core.settings().keys.internal_hmac(),
            };
            // Boxed: a refusal's publish and confirm would double the size of every job's
            // future, which most jobs never use.
            Box::pin(dead_letter::refuse(&refusal, &delivery, reason)).await
        }
        Disposition::Retry(cause) => {
            metrics::requeued(cause, 1);
            // A short pause so an unreachable dependency is not hammered by the same message.
            if !stop.is_cancelled() {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            delivery
                .acker
                .nack(BasicNackOptions {
                    requeue: true,
                    multiple: false,
                })
                .await
        }
    };
    let error = match outcome {
        Ok(true) => return,
        // lapin answers `false` when the delivery's channel closed meanwhile (its ackers are
        // poisoned): nothing reached the broker.
        Ok(false) => "its channel is closed".to_owned(),
        Err(error) => error.to_string(),
    };
    // The channel is gone: the broker redelivers the message, and a finished job acks it. A
    // requeue was counted with its cause.
    if !requeued {
        metrics::requeued(Requeue::Broker, 1);
    }
    tracing::warn!(%error, "Could not settle a delivery; the broker will redeliver it.");
}
