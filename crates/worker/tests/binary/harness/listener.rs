//! The Worker's events as a consumer receives them: [`Listener`] on a queue of the test's own
//! bound to the world's events exchange, [`Event`] with its headers, body and signature.

use std::time::{Duration, Instant};

use contract::envelope::{self, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::types::AMQPValue;
use uuid::Uuid;

use super::World;

impl World {
    /// Declares `queue` (deleted with the world), binds it to `exchange` with `routing_key` and
    /// consumes it without acknowledgements.
    pub async fn tap(&self, queue: &str, exchange: &str, routing_key: &str) -> lapin::Consumer {
        self.broker.declare_queue(queue).await;
        self.broker.bind(queue, exchange, routing_key).await;
        self.broker.consume(queue).await
    }

    /// A queue bound to the events exchange with `job.*` (the job-level events; declared here
    /// too: the Worker declares it the same).
    pub async fn listen(&self) -> Listener {
        self.listen_to("job.*").await
    }

    /// A queue bound to the events exchange with `pattern` (`job.#`: executions' events too).
    pub async fn listen_to(&self, pattern: &str) -> Listener {
        self.broker.declare_exchange(&self.exchange).await;
        let queue = format!("fetcher.test.listen.{}", Uuid::new_v4().simple());
        let consumer = self.tap(&queue, &self.exchange, pattern).await;
        Listener {
            consumer,
            skipped: Vec::new(),
        }
    }
}

/// A received event.
pub struct Event {
    pub delivery: Delivery,
}

impl Event {
    pub fn header(&self, name: &str) -> Option<&AMQPValue> {
        testkit::amqp::header(&self.delivery, name)
    }

    pub fn text(&self, name: &str) -> String {
        match self.header(name) {
            Some(AMQPValue::LongString(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            Some(AMQPValue::ByteArray(b)) => String::from_utf8_lossy(b.as_slice()).into_owned(),
            other => panic!("header {name}: {other:?}"),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::from_slice(&self.delivery.data).expect("event body is JSON")
    }

    /// Verifies the event's signature with the external key.
    pub fn verify(&self, keys: &crypto::KeySet) -> Result<(), envelope::SignatureError> {
        let value = |name: &str| match self.header(name) {
            Some(AMQPValue::LongString(s)) => Some(HeaderValue::Text(s.as_bytes())),
            Some(_) => Some(HeaderValue::Other("other")),
            None => None,
        };
        let tenant = self.text("X-Tenant-ID");
        let route = Route {
            tenant: &tenant,
            exchange: self.delivery.exchange.as_str(),
            routing_key: self.delivery.routing_key.as_str(),
        };
        let headers = SignatureHeaders {
            signature: value("x-message-signature"),
            timestamp: value("t"),
            version: value("signature-version"),
        };
        envelope::verify(
            &headers,
            &route,
            &self.delivery.data,
            &VerifyPolicy::default(),
            chrono::Utc::now().timestamp(),
            |p, s| keys.external_hmac().verify_hex_parts(p, s),
        )
        .map(drop)
    }
}

pub struct Listener {
    consumer: lapin::Consumer,
    /// Events received while waiting for another job's, kept for later `event_for` calls.
    skipped: Vec<Event>,
}

impl Listener {
    /// The next event, or `None` after `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Event> {
        match tokio::time::timeout(within, self.consumer.next()).await {
            Ok(Some(Ok(delivery))) => Some(Event { delivery }),
            Ok(Some(Err(error))) => panic!("listener failed: {error}"),
            Ok(None) => panic!("listener ended"),
            Err(_) => None,
        }
    }

    /// Waits for `job_id`'s next event, skipping others.
    pub async fn event_for(&mut self, job_id: Uuid, within: Duration) -> Event {
        let subject = job_id.to_string();
        if let Some(i) = self
            .skipped
            .iter()
            .position(|e| e.text("ce-subject") == subject)
        {
            return self.skipped.remove(i);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no event for job {job_id} within {within:?}"));
            if event.text("ce-subject") == subject {
                return event;
            }
            self.skipped.push(event);
        }
    }

    /// Waits for each of `jobs`' next event, asserting it is its `job.completed`.
    pub async fn all_completed(&mut self, jobs: &[Uuid], within: Duration) {
        for job_id in jobs {
            let event = self.event_for(*job_id, within).await;
            assert_eq!(
                event.delivery.routing_key.as_str(),
                "job.completed",
                "{job_id}: {}",
                event.body()
            );
        }
    }

    /// Every event that arrives within `within`.
    pub async fn drain(&mut self, within: Duration) -> Vec<Event> {
        let mut events = Vec::new();
        let deadline = Instant::now() + within;
        while let Some(event) = self
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            events.push(event);
        }
        events
    }
}
