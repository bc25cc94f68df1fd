//! The MQTT event loop's task: it alone queues publishes on the client and polls the loop, so
//! the order it queued them is the order the loop reports their packet ids, and each PUBACK is
//! matched to its publish.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, Packet, QoS};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::config::MqttConfig;
use super::error::MqttError;
use super::pings::Pings;

/// A publish to make, and where its outcome goes.
pub(super) struct Command {
    pub topic: String,
    pub payload: Vec<u8>,
    pub done: oneshot::Sender<Result<(), MqttError>>,
}

type Done = oneshot::Sender<Result<(), MqttError>>;

/// The first wait before reconnecting.
const FIRST_RECONNECT_DELAY: Duration = Duration::from_millis(100);

pub(super) struct Driver {
    options: MqttOptions,
    in_flight: usize,
    connect_timeout: Duration,
    max_reconnect_delay: Duration,
    commands: mpsc::Receiver<Command>,
    connected: Arc<AtomicBool>,
    stop: CancellationToken,
}

/// How one connection ended.
enum Ended {
    Stopped,
    Broke,
}

impl Driver {
    pub fn new(
        options: MqttOptions,
        config: &MqttConfig,
        commands: mpsc::Receiver<Command>,
        connected: Arc<AtomicBool>,
        stop: CancellationToken,
    ) -> Driver {
        Driver {
            options,
            in_flight: usize::from(config.in_flight.max(1)),
            connect_timeout: config.connect_timeout,
            max_reconnect_delay: config.max_reconnect_delay,
            commands,
            connected,
            stop,
        }
    }

    /// Connects, publishes, and reconnects after every failure with a capped, doubling delay
    /// (reset once a connection is accepted), until stopped.
    pub async fn run(mut self) {
        let mut delay = FIRST_RECONNECT_DELAY;
        loop {
            let (ended, accepted) = self.connection().await;
            self.connected.store(false, Ordering::Release);
            if let Ended::Stopped = ended {
                self.fail_queued(MqttError::Closed);
                return;
            }
            if accepted {
                delay = FIRST_RECONNECT_DELAY;
            }
            // While away, publishes fail at once: the relay backs off instead of waiting here.
            let wait = tokio::time::sleep(delay);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    _ = &mut wait => break,
                    _ = self.stop.cancelled() => {
                        self.fail_queued(MqttError::Closed);
                        return;
                    }
                    command = self.commands.recv() => match command {
                        Some(command) => {
                            let _ = command.done.send(Err(MqttError::NotConnected));
                        }
                        None => return,
                    },
                }
            }
            delay = (delay * 2).min(self.max_reconnect_delay.max(FIRST_RECONNECT_DELAY));
        }
    }

    fn fail_queued(&mut self, error: MqttError) {
        while let Ok(command) = self.commands.try_recv() {
            let _ = command.done.send(Err(error.clone()));
        }
    }

    /// One connection, on a fresh client and event loop, until it breaks or the driver stops.
    /// Also tells whether the broker accepted it.
    async fn connection(&mut self) -> (Ended, bool) {
        let capacity = self.in_flight * 2;
        let (client, mut events) = AsyncClient::new(self.options.clone(), capacity);
        events
            .network_options
            .set_connection_timeout(self.connect_timeout.as_secs().max(1));
        // Each publish is flushed on its own and leaves at once (see `pings` for the broker's
        // side of the same delay).
        events.network_options.set_tcp_nodelay(true);
        // The interval the CONNECT carries (`MqttConfig` keeps it at 1 s or more).
        let interval = self.options.keep_alive();
        let mut pings = Pings::new(interval);
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Queued on the client, waiting for the loop to report their packet ids, in order.
        let mut queued: VecDeque<Done> = VecDeque::new();
        // Sent, waiting for their PUBACK.
        let mut sent: HashMap<u16, Done> = HashMap::new();
        let mut accepted = false;
        let ended = loop {
            let room = accepted && queued.len() + sent.len() < self.in_flight;
            tokio::select! {
                _ = self.stop.cancelled() => {
                    disconnect(&client, &mut events).await;
                    break Ended::Stopped;
                }
                _ = keep_alive.tick(), if accepted => pings.keep_alive(&mut events),
                command = self.commands.recv(), if room => {
                    let Some(command) = command else { break Ended::Stopped };
                    match client.try_publish(command.topic, QoS::AtLeastOnce, false, command.payload) {
                        Ok(()) => queued.push_back(command.done),
                        Err(_) => {
                            let _ = command.done.send(Err(MqttError::Message(
                                "the topic is not a valid MQTT topic name",
                            )));
                        }
                    }
                }
                event = events.poll() => match event {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        accepted = true;
                        pings.take_over(&mut events);
                        keep_alive.reset();
                        self.connected.store(true, Ordering::Release);
                        tracing::info!(client_id = %self.options.client_id(), "Connected to the MQTT broker.");
                    }
                    Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                        if let Some(done) = queued.pop_front() {
                            if let Some(earlier) = sent.insert(pkid, done) {
                                // The loop reuses an id only once its PUBACK came; an id still
                                // waiting would be a broken promise: fail it, never confirm it.
                                let _ = earlier.send(Err(MqttError::ConnectionLost));
                            }
                        }
                        if queued.is_empty() {
                            pings.nudge(&mut events);
                        }
                    }
                    Ok(Event::Incoming(Packet::PubAck(ack))) => {
                        if let Some(done) = sent.remove(&ack.pkid) {
                            let _ = done.send(Ok(()));
                        }
                        pings.acked();
                        if queued.is_empty() && !sent.is_empty() {
                            pings.nudge(&mut events);
                        }
                    }
                    Ok(Event::Incoming(Packet::PingResp)) => {
                        if pings.answered() && queued.is_empty() && !sent.is_empty() {
                            pings.nudge(&mut events);
                        }
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(
                            error = %error,
                            in_flight = queued.len() + sent.len(),
                            "MQTT connection failed; its publishes in flight will be retried."
                        );
                        break Ended::Broke;
                    }
                },
            }
        };
        let error = match ended {
            Ended::Stopped => MqttError::Closed,
            Ended::Broke => MqttError::ConnectionLost,
        };
        for done in queued.into_iter().chain(sent.into_values()) {
            let _ = done.send(Err(error.clone()));
        }
        (ended, accepted)
    }
}

/// Sends DISCONNECT and gives the loop a moment to write it, so the broker ends the session's
/// connection cleanly (no will, no half-open socket).
async fn disconnect(client: &AsyncClient, events: &mut rumqttc::EventLoop) {
    if client.try_disconnect().is_err() {
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match events.poll().await {
                Ok(Event::Outgoing(Outgoing::Disconnect)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}
