//! The dead-letter queue, declared with upstream's retention unless the broker keeps it with
//! other retention: that decides only how long refused messages are kept, so it is no conflict.

use std::collections::BTreeMap;
use std::sync::Mutex;

use lapin::types::{AMQPValue, FieldTable};
use lapin::Connection;

use super::inequivalent::{refusal, Inequivalent};
use super::{close, dead_letter_queue_arguments, durable};

/// The dead-letter queue's arguments a broker may have otherwise without harm.
const RETENTION_ARGUMENTS: [&str; 2] = ["x-message-ttl", "x-max-length"];

/// Each dead-letter queue's arguments the broker last accepted, so that the declarations of
/// later connections (the consumer's, each reconnection) succeed at once instead of being
/// refused, and warned about, again.
static ACCEPTED: Mutex<BTreeMap<String, FieldTable>> = Mutex::new(BTreeMap::new());

/// Declares `queue` with upstream's retention; where the broker has other retention, declares
/// it with the broker's (each retention argument at most once), warning.
pub(super) async fn declare(connection: &Connection, queue: &str) -> anyhow::Result<()> {
    let accepted = || {
        ACCEPTED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let mut arguments = accepted()
        .get(queue)
        .cloned()
        .unwrap_or_else(dead_letter_queue_arguments);
    let what = format!("the dead-letter queue {queue:?}");
    for _ in 0..=RETENTION_ARGUMENTS.len() {
        let channel = connection.create_channel().await?;
        let declared = channel
            .queue_declare(queue.into(), durable(), arguments.clone())
            .await;
        let error = match declared {
            Ok(_) => {
                close(channel).await;
                accepted().insert(queue.to_owned(), arguments);
                return Ok(());
            }
            Err(error) => error,
        };
        let Some(differs) = Inequivalent::parse(&error.to_string()) else {
            return Err(refusal(what)(error));
        };
        if !RETENTION_ARGUMENTS.contains(&differs.argument.as_str()) {
            return Err(differs.refusal(&what));
        }
        let kept = match differs.current.as_str() {
            "none" => None,
            text => match text.parse::<i64>() {
                Ok(value) => Some(value),
                Err(_) => return Err(differs.refusal(&what)),
            },
        };
        tracing::warn!(
            queue,
            argument = %differs.argument,
            broker = %differs.current,
            worker = %differs.received,
            "The dead-letter queue exists with other retention; it is kept as the broker has it."
        );
        let mut adjusted = FieldTable::default();
        for (key, value) in arguments.inner() {
            if key.as_str() != differs.argument {
                adjusted.insert(key.clone(), value.clone());
            }
        }
        if let Some(value) = kept {
            adjusted.insert(
                differs.argument.as_str().into(),
                AMQPValue::LongLongInt(value),
            );
        }
        arguments = adjusted;
    }
    Err(anyhow::anyhow!(
        "{what} could not be declared: the broker keeps refusing its retention arguments"
    ))
}
