//! Which queue `fetcherctl dlq` reads: the one named with `--dlq`, else the one dead-letter
//! queue of a known provisioning ([`contract::wire::KNOWN_DEAD_LETTERS`]: upstream's repository
//! definitions, `fetcher.dlq`, or LerianStudio's Helm chart, `fetcher.extract-external-data.dlq`)
//! that exists in the vhost. The Worker reads the work queue's arguments by declaring it; a
//! reading tool declares nothing, so it looks for the queues instead and, when both or neither
//! exist, asks for `--dlq` rather than guess.

use anyhow::{bail, Context as _};
use contract::wire::{DeadLetters, KNOWN_DEAD_LETTERS};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::Connection;

/// `named`, or the one known dead-letter queue that exists.
pub async fn find(connection: &Connection, named: Option<&str>) -> anyhow::Result<String> {
    if let Some(named) = named {
        return Ok(named.to_owned());
    }
    let mut present: Vec<&DeadLetters> = Vec::new();
    for known in &KNOWN_DEAD_LETTERS {
        if exists(connection, known.queue).await? {
            present.push(known);
        }
    }
    let listed = |separator: &str| -> String {
        KNOWN_DEAD_LETTERS
            .iter()
            .map(|known| format!("{} ({})", known.queue, known.origin))
            .collect::<Vec<_>>()
            .join(separator)
    };
    match present.as_slice() {
        [one] => Ok(one.queue.to_owned()),
        [] => bail!(
            "no dead-letter queue in this vhost: neither {} exists; name the queue the work \
             queue dead-letters to with --dlq",
            listed(" nor ")
        ),
        _ => bail!(
            "both {} exist; name the one the work queue dead-letters to with --dlq",
            listed(" and ")
        ),
    }
}

/// A passive declare on a channel of its own (NOT_FOUND closes it).
async fn exists(connection: &Connection, queue: &str) -> anyhow::Result<bool> {
    let channel = connection
        .create_channel()
        .await
        .context("Failed to open a channel")?;
    let options = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let declared = channel
        .queue_declare(queue.into(), options, FieldTable::default())
        .await;
    match declared {
        Ok(_) => {
            let _ = channel.close(200, "OK".into()).await;
            Ok(true)
        }
        Err(error) => match error.kind() {
            lapin::ErrorKind::ProtocolError(amqp) if amqp.get_id() == 404 => Ok(false),
            _ => Err(error).with_context(|| format!("Failed to look for the queue {queue}")),
        },
    }
}
