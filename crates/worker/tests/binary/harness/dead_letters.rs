//! [`DeadLetters`]: a queue of the test's own on the shared dead-letter exchange, counting only
//! the test run's own dead letters.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::types::AMQPValue;

use super::{World, RUN_HEADER};

/// A queue of the test's own on the shared dead-letter exchange.
pub struct DeadLetters {
    consumer: lapin::Consumer,
    run: String,
}

impl DeadLetters {
    pub async fn tap(world: &World) -> DeadLetters {
        let queue = format!("fetcher.test.dlq.{}", world.id);
        let consumer = world.tap(&queue, "fetcher.dlx", "fetcher.dlq.key").await;
        DeadLetters {
            consumer,
            run: world.id.clone(),
        }
    }

    /// The bodies of this run's dead letters: waits up to `within` for `expected` of them, then
    /// a second more for any extra. The exchange is shared, so other tests' dead letters pass
    /// through too; they are skipped, and never keep this waiting.
    pub async fn collect(&mut self, expected: usize, within: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + within;
        let linger = || Some(Instant::now() + Duration::from_secs(1));
        let mut linger_until = if expected == 0 { linger() } else { None };
        let mut bodies = Vec::new();
        loop {
            let until = linger_until.map_or(deadline, |l| l.min(deadline));
            let left = until.saturating_duration_since(Instant::now());
            let Ok(Some(Ok(delivery))) = tokio::time::timeout(left, self.consumer.next()).await
            else {
                break;
            };
            let ours = matches!(
                testkit::amqp::header(&delivery, RUN_HEADER),
                Some(AMQPValue::LongString(s)) if s.as_bytes() == self.run.as_bytes()
            );
            if ours {
                bodies.push(delivery.data);
                if bodies.len() >= expected && linger_until.is_none() {
                    linger_until = linger();
                }
            }
        }
        bodies
    }
}
