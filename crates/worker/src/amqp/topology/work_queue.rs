//! Which dead-letter topology the work queue was provisioned with, read by declaring it.
//!
//! A passive declare tells whether the queue exists, not its arguments, and the management API
//! (a plugin, on another port, with its own permissions) is not something the Worker may
//! require. A declaration, though, is compared with the queue the broker has: equal arguments
//! are a no-op, and the first argument that differs is refused with its current value
//! ([`Inequivalent`]). So the Worker declares an existing queue with the repository's
//! dead-letter arguments; when the broker answers that its dead-letter exchange (or routing key)
//! is another known topology's, it declares it with that topology's, which the broker accepts
//! only when every argument is equal. Either way the queue ends as it was: nothing conflicting
//! is declared. A value no known topology has stops the start, naming the queue, the broker's
//! value and the Worker's. Each try has a channel of its own, since a refusal closes it.

use contract::wire::{DeadLetters, KNOWN_DEAD_LETTERS, REPOSITORY_DEAD_LETTERS};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::Connection;

use super::inequivalent::{refusal, Inequivalent};
use super::{close, durable, work_queue_arguments};

/// What the broker has under the work queue's name.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    Missing,
    Provisioned(DeadLetters),
}

/// Finds whether `queue` exists and, if it does, where it dead-letters.
pub(super) async fn find(connection: &Connection, queue: &str) -> anyhow::Result<Found> {
    let what = format!("the work queue {queue:?}");
    if !exists(connection, queue)
        .await
        .map_err(refusal(what.clone()))?
    {
        return Ok(Found::Missing);
    }
    let Err(error) = declare(connection, queue, &REPOSITORY_DEAD_LETTERS).await else {
        return Ok(Found::Provisioned(REPOSITORY_DEAD_LETTERS));
    };
    let Some(differs) = Inequivalent::parse(&error.to_string()) else {
        return Err(refusal(what)(error));
    };
    let Some(known) = KNOWN_DEAD_LETTERS.iter().find(|known| {
        let value = value_of(known, &differs.argument);
        !value.is_empty() && differs.current == value
    }) else {
        return Err(unknown(&what, &differs));
    };
    declare(connection, queue, known)
        .await
        .map_err(refusal(what))?;
    Ok(Found::Provisioned(*known))
}

/// A passive declare: `false` when the broker answers NOT_FOUND.
async fn exists(connection: &Connection, queue: &str) -> lapin::Result<bool> {
    let channel = connection.create_channel().await?;
    let options = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    match channel
        .queue_declare(queue.into(), options, FieldTable::default())
        .await
    {
        Ok(_) => {
            close(channel).await;
            Ok(true)
        }
        Err(error) if not_found(&error) => Ok(false),
        Err(error) => Err(error),
    }
}

fn not_found(error: &lapin::Error) -> bool {
    matches!(error.kind(), lapin::ErrorKind::ProtocolError(amqp) if amqp.get_id() == 404)
}

async fn declare(
    connection: &Connection,
    queue: &str,
    dead_letters: &DeadLetters,
) -> lapin::Result<()> {
    let channel = connection.create_channel().await?;
    channel
        .queue_declare(queue.into(), durable(), work_queue_arguments(dead_letters))
        .await?;
    close(channel).await;
    Ok(())
}

/// The known topology's value of a dead-letter argument; `""` for any other argument.
fn value_of(known: &DeadLetters, argument: &str) -> &'static str {
    match argument {
        "x-dead-letter-exchange" => known.exchange,
        "x-dead-letter-routing-key" => known.routing_key,
        _ => "",
    }
}

/// The refusal of a work queue that dead-letters where no known topology does.
fn unknown(what: &str, differs: &Inequivalent) -> anyhow::Error {
    let [repository, others @ ..] = KNOWN_DEAD_LETTERS;
    let argument = differs.argument.as_str();
    if value_of(&repository, argument).is_empty() {
        return differs.refusal(what);
    }
    let others: Vec<String> = others
        .iter()
        .map(|known| format!("{} ({})", value_of(known, argument), known.origin))
        .collect();
    anyhow::anyhow!(
        "{what} could not be declared: it exists with {argument} = {} on the broker, and the \
         Worker declares {argument} = {} ({}) or consumes it as provisioned with {}; provision \
         it as one of those, or delete it",
        differs.current,
        differs.received,
        repository.origin,
        others.join(" or ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_dead_letter_exchange_is_named_with_every_known_one() {
        let differs = Inequivalent {
            argument: "x-dead-letter-exchange".into(),
            received: "fetcher.dlx".into(),
            current: "elsewhere.dlx".into(),
        };
        let message = unknown("the work queue \"q\"", &differs).to_string();
        for expected in [
            "the work queue \"q\" could not be declared",
            "x-dead-letter-exchange = elsewhere.dlx on the broker",
            "the Worker declares x-dead-letter-exchange = fetcher.dlx",
            "fetcher.extract-external-data.dlx (LerianStudio's Helm chart)",
        ] {
            assert!(message.contains(expected), "{expected:?} not in {message}");
        }
        let other = Inequivalent {
            argument: "x-max-length".into(),
            received: "none".into(),
            current: "5".into(),
        };
        let message = unknown("the work queue \"q\"", &other).to_string();
        assert!(
            message.contains("x-max-length = 5 on the broker"),
            "{message}"
        );
    }

    #[test]
    fn a_known_routing_key_identifies_its_topology() {
        assert_eq!(
            value_of(&KNOWN_DEAD_LETTERS[1], "x-dead-letter-routing-key"),
            "fetcher.extract-external-data.dlq.key"
        );
        assert_eq!(value_of(&KNOWN_DEAD_LETTERS[1], "x-expires"), "");
    }
}
