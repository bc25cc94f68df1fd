//! The connection's PINGREQs, sent by the driver instead of `rumqttc`'s keep-alive timer: one
//! every keep-alive interval, as `rumqttc` would send them, and a nudge whenever publishes wait
//! for their PUBACKs and nothing else is being sent.
//!
//! Why the nudge: a broker that leaves Nagle's algorithm on (Mosquitto's default,
//! `set_tcp_nodelay false`) holds back a small segment, such as a PUBACK, while an earlier one
//! is unacknowledged, and the client's kernel delays that acknowledgment (40 ms on Linux) while
//! the client sends nothing. The last PUBACKs of every batch then arrive 40 ms late, and a relay
//! that waits for them publishes a quarter as fast (`BENCHMARKS.md`, "MQTT mirror relay"). A
//! PINGREQ carries the acknowledgment at once; the broker answers and sends what it held.

use std::time::{Duration, Instant};

use rumqttc::{EventLoop, PingReq, Request};

pub(super) struct Pings {
    keep_alive: Duration,
    /// When the PINGREQ still unanswered was queued.
    outstanding_since: Option<Instant>,
    /// PUBACKs arrived while a PINGREQ was unanswered: the broker is releasing what it held, and
    /// the next nudge may release more.
    acked_while_outstanding: bool,
}

impl Pings {
    pub fn new(keep_alive: Duration) -> Pings {
        Pings {
            keep_alive,
            outstanding_since: None,
            acked_while_outstanding: false,
        }
    }

    /// After the CONNACK: the loop stops its own keep-alive pings (the CONNECT carried the
    /// interval; the broker still expects a packet within it), these take over.
    pub fn take_over(&mut self, events: &mut EventLoop) {
        events.mqtt_options.set_keep_alive(Duration::ZERO);
        self.outstanding_since = None;
    }

    /// The keep-alive interval passed. A PINGREQ unanswered for a whole interval is sent again
    /// anyway: the loop then fails the connection (`AwaitPingResp`), as its own timer would.
    pub fn keep_alive(&mut self, events: &mut EventLoop) {
        match self.outstanding_since {
            Some(since) if since.elapsed() < self.keep_alive => {}
            _ => self.send(events),
        }
    }

    /// Publishes wait for their PUBACKs and nothing more is queued: ping, unless a PINGREQ is
    /// unanswered already, or the loop is in a packet id collision (the broker acknowledged out
    /// of order; the loop counts pings there and gives the connection up at the second).
    pub fn nudge(&mut self, events: &mut EventLoop) {
        if self.outstanding_since.is_none() && events.state.collision.is_none() {
            self.send(events);
        }
    }

    /// A PUBACK arrived.
    pub fn acked(&mut self) {
        if self.outstanding_since.is_some() {
            self.acked_while_outstanding = true;
        }
    }

    /// The PINGRESP arrived. True when PUBACKs came meanwhile: nudge again if publishes still
    /// wait (without that progress, pinging again would only repeat itself).
    pub fn answered(&mut self) -> bool {
        self.outstanding_since = None;
        std::mem::take(&mut self.acked_while_outstanding)
    }

    fn send(&mut self, events: &mut EventLoop) {
        events.pending.push_back(Request::PingReq(PingReq));
        self.outstanding_since = Some(Instant::now());
        self.acked_while_outstanding = false;
    }
}
