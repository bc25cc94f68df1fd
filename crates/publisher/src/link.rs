//! The connection and its channels: opened lazily, dropped on failure, reopened by the next call.
//!
//! Recovery is deliberately simple. Any failure drops the channel it happened on (and the
//! connection, when the connection is gone or may be), and the next publish opens new ones, one
//! attempt per call bounded by the connect timeout. Waiting and retrying belong to the caller
//! (the outbox relay and repairer), which keeps the event until a publish is confirmed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use lapin::options::ConfirmSelectOptions;
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties, ConnectionStatus};
use tokio::sync::{Mutex, MutexGuard};

use crate::error::{PublishError, Result};

/// The live connection, tagged with a generation so a channel can tell it belongs to an older one.
struct Live {
    connection: Connection,
    generation: u64,
}

/// A lane's open channel, with confirms enabled, and the generation of its connection.
struct LaneChannel {
    channel: Channel,
    generation: u64,
}

/// Owns the connection and a fixed set of lanes (channels).
pub(crate) struct Link {
    /// Parsed at construction; it holds the password, so it is never printed.
    uri: AMQPUri,
    connection_name: String,
    connect_timeout: Duration,
    /// Held only while connecting or opening a channel, never while publishing.
    live: Mutex<Option<Live>>,
    /// Generation of the live connection; 0 when there is none.
    generation: AtomicU64,
    /// The last generation handed out.
    generations: AtomicU64,
    /// A cheap clone of the live connection's status, for [`Link::is_connected`] without awaiting.
    status: StdMutex<Option<ConnectionStatus>>,
    lanes: Vec<Mutex<Option<LaneChannel>>>,
    next_lane: AtomicUsize,
}

/// Exclusive use of one channel for the duration of one publish call.
///
/// Exclusive because RabbitMQ's returns and (multiple) acks are per channel: lapin attaches a
/// returned message to whichever pending confirm the next ack completes, so a call can only be
/// sure a return is one of its own messages when nobody else publishes on that channel.
pub(crate) struct Lane<'a> {
    link: &'a Link,
    slot: MutexGuard<'a, Option<LaneChannel>>,
}

impl Link {
    pub(crate) fn new(
        uri: &str,
        connection_name: String,
        connect_timeout: Duration,
        channels: usize,
    ) -> Result<Link> {
        // The parser's error text quotes the URI, password included: it is dropped here.
        let uri: AMQPUri = uri
            .parse()
            .map_err(|_| PublishError::Config("the AMQP URI does not parse"))?;
        Ok(Link {
            uri,
            connection_name,
            connect_timeout,
            live: Mutex::new(None),
            generation: AtomicU64::new(0),
            generations: AtomicU64::new(0),
            status: StdMutex::new(None),
            lanes: (0..channels.max(1)).map(|_| Mutex::new(None)).collect(),
            next_lane: AtomicUsize::new(0),
        })
    }

    /// Whether the connection is open right now. `false` before the first publish or declare,
    /// and after a failure until the next call reconnects.
    pub(crate) fn is_connected(&self) -> bool {
        self.lock_status()
            .as_ref()
            .is_some_and(ConnectionStatus::connected)
    }

    /// Takes a free lane, or waits for the next one in turn when all are busy.
    pub(crate) async fn lane(&self) -> Lane<'_> {
        let start = self.next_lane.fetch_add(1, Ordering::Relaxed);
        let count = self.lanes.len();
        for offset in 0..count {
            if let Ok(slot) = self.lanes[(start + offset) % count].try_lock() {
                return Lane { link: self, slot };
            }
        }
        Lane {
            link: self,
            slot: self.lanes[start % count].lock().await,
        }
    }

    /// Closes every channel and the connection. Publishing afterwards reconnects.
    pub(crate) async fn close(&self) {
        for lane in &self.lanes {
            if let Some(open) = lane.lock().await.take() {
                // Best effort: the channel may already be gone with its connection.
                let _ = open.channel.close(200, "OK".into()).await;
            }
        }
        let live = self.live.lock().await.take();
        self.generation.store(0, Ordering::Release);
        *self.lock_status() = None;
        if let Some(live) = live {
            let _ = live.connection.close(200, "OK".into()).await;
        }
    }

    /// Opens a channel with publisher confirms on the live connection, connecting first when
    /// there is none or it is no longer open.
    async fn open_channel(&self) -> Result<LaneChannel> {
        let mut live = self.live.lock().await;
        let current: &Live = match &mut *live {
            Some(current) if current.connection.status().connected() => current,
            slot => {
                *slot = None;
                self.generation.store(0, Ordering::Release);
                *self.lock_status() = None;
                let connection = self.connect().await?;
                let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
                *self.lock_status() = Some(connection.status().clone());
                self.generation.store(generation, Ordering::Release);
                tracing::info!(generation, "Connected to the broker.");
                slot.insert(Live {
                    connection,
                    generation,
                })
            }
        };
        let generation = current.generation;
        let opening = async {
            let channel = current
                .connection
                .create_channel()
                .await
                .map_err(PublishError::Channel)?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(PublishError::Channel)?;
            Ok(channel)
        };
        match tokio::time::timeout(self.connect_timeout, opening).await {
            Ok(Ok(channel)) => Ok(LaneChannel {
                channel,
                generation,
            }),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                // A connection that cannot open a channel in time is not trusted any more.
                *live = None;
                self.generation.store(0, Ordering::Release);
                *self.lock_status() = None;
                Err(PublishError::ConnectTimeout(self.connect_timeout))
            }
        }
    }

    async fn connect(&self) -> Result<Connection> {
        let properties = ConnectionProperties::default()
            .with_connection_name(self.connection_name.clone().into());
        match tokio::time::timeout(
            self.connect_timeout,
            Connection::connect_uri(self.uri.clone(), properties),
        )
        .await
        {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => Err(PublishError::Connect(error)),
            Err(_) => Err(PublishError::ConnectTimeout(self.connect_timeout)),
        }
    }

    /// Drops the connection of `generation` if it is still the live one.
    async fn drop_connection(&self, generation: u64) {
        let mut live = self.live.lock().await;
        if live.as_ref().is_some_and(|l| l.generation == generation) {
            *live = None;
            self.generation.store(0, Ordering::Release);
            *self.lock_status() = None;
            tracing::warn!(
                generation,
                "Dropped the broker connection; the next publish reconnects."
            );
        }
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, Option<ConnectionStatus>> {
        // The guarded value is a plain Option that every writer leaves whole: a poisoned lock
        // still holds a consistent value.
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Lane<'_> {
    /// The lane's channel: the open one when it still belongs to the live connection, else a new
    /// one (reconnecting when needed).
    pub(crate) async fn channel(&mut self) -> Result<Channel> {
        let current = self.link.generation.load(Ordering::Acquire);
        let open = match self.slot.take() {
            Some(open)
                if current != 0
                    && open.generation == current
                    && open.channel.status().connected() =>
            {
                open
            }
            _ => self.link.open_channel().await?,
        };
        let channel = open.channel.clone();
        *self.slot = Some(open);
        Ok(channel)
    }

    /// Forgets the lane's channel after `error`, and its connection too when that connection is
    /// closed or cannot be trusted (a confirm that never came may mean a dead peer). Nacks and
    /// returns leave both in place: the channel is fine.
    pub(crate) async fn discard(&mut self, error: &PublishError) {
        if matches!(error, PublishError::Returned { .. } | PublishError::Nack) {
            return;
        }
        let Some(open) = self.slot.take() else {
            return;
        };
        let generation = open.generation;
        drop(open);
        if matches!(error, PublishError::ConfirmTimeout(_)) || !self.link.is_connected() {
            self.link.drop_connection(generation).await;
        }
    }
}
