//! `fetcherctl`: the operator's and consumer's tool for the Fetcher Worker.
//!
//! One module per command (`derive_key`, `submit`, `watch` with `watch_mqtt` for the MQTT mirror,
//! `fetch`; `control` for `status`, `jobs` for `jobs list` and `jobs show`,
//! `cancel` and `delete`; `dlq` with `dead_letter` for the dead-letter queue); `keys`, `amqp` and
//! `broker_env` (the Worker's `RABBITMQ_*` variables) hold what they share, `dedupe` the check
//! that makes an event's ce-id safe to deduplicate on, `max_age` how old a watched event's
//! signature may be. No command prints a secret: not the master key, not the AMQP URI (it may
//! hold a password), not the S3 secret key; `derive-key` prints the HMAC keys it is asked for
//! and nothing else.

mod amqp;
mod broker_env;
mod control;
mod dead_letter;
mod dead_letter_queue;
mod dedupe;
mod derive_key;
mod dlq;
mod fetch;
mod jobs;
mod keys;
mod max_age;
mod private_file;
mod submit;
mod watch;
mod watch_mqtt;

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "fetcherctl", version, about = "Tools for the Fetcher Worker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the external HMAC key (for event consumers) derived from the master key, and with
    /// --internal the internal one (for job submitters).
    ///
    /// The master key is read from APP_ENC_KEY, else from the first line of standard input,
    /// else from --key (which other users of the machine can see in the process list).
    DeriveKey(derive_key::Args),

    /// Sign a job message with the internal HMAC key and publish it to the work queue.
    ///
    /// The message is read from --file or built from --connection, --table and --fields, and
    /// validated as the Worker validates it before anything is sent. Signed with the internal
    /// HMAC key: derived from APP_ENC_KEY, or given with --hmac-key / FETCHER_INTERNAL_HMAC_KEY
    /// (exactly one of the two).
    /// Prints `Submitted job <uuid>` once the broker confirmed the message.
    Submit(submit::Args),

    /// Print job events, each checked against its signature (external HMAC key).
    ///
    /// One event per ce-id. Events whose signature fails, or whose ce-id, ce-type, ce-eventtype
    /// or ce-subject is not the one the signed routing key and body imply, are printed as
    /// `REJECTED <reason>` and never hide a later event with the same ce-id.
    /// The key comes from --hmac-key / FETCHER_EXTERNAL_HMAC_KEY, else from APP_ENC_KEY.
    /// Signatures older than 5 minutes are rejected on a private queue; with --queue (a durable
    /// backlog) any age is accepted unless --max-age says otherwise.
    Watch(watch::Args),

    /// Download a stored result, open it, check its HMAC and print it.
    ///
    /// Opening needs the master key (APP_ENC_KEY): the external key alone cannot decrypt.
    /// The object storage is configured with the Worker's OBJECT_STORAGE_* variables.
    Fetch(fetch::Args),

    /// Print a job's document from a Worker's control API (signed with the internal HMAC key:
    /// APP_ENC_KEY, or --hmac-key / FETCHER_INTERNAL_HMAC_KEY).
    Status(control::Target),

    /// Cancel a job (lifecycle §3): a queued or pending one at once; a running one gracefully
    /// (its statements end, nothing is stored), or at once with --force.
    Cancel(control::Cancel),

    /// Delete a finished job's stored result and mark it deleted; --force cancels a job that
    /// has not ended first.
    Delete(control::Change),

    /// Find jobs on a Worker's control API: `list` (newest first; --status, --limit, --cursor,
    /// --all) and `show <id>`.
    #[command(subcommand)]
    Jobs(jobs::Jobs),

    /// The dead-letter queue (fetcher.dlq, or the Helm chart's fetcher.extract-external-data.dlq):
    /// list, show, requeue or purge its messages.
    ///
    /// `list` and `show` consume nothing; `requeue` publishes a message unchanged (nothing is
    /// re-signed) and acknowledges the dead letter only once the broker confirmed the copy.
    /// A letter counts as the Worker's only when its stamp verifies under the internal key
    /// (APP_ENC_KEY, or --hmac-key / FETCHER_INTERNAL_HMAC_KEY); any other is unverified and
    /// requeued only to a route named with --to-queue (or --to-exchange, --to-routing-key).
    Dlq(dlq::Args),
}

fn main() -> ExitCode {
    let outcome = match Cli::parse().command {
        Command::DeriveKey(args) => derive_key::run(args),
        Command::Submit(args) => block_on(submit::run(args)),
        Command::Watch(args) => block_on(watch::run(args)),
        Command::Fetch(args) => block_on(fetch::run(args)),
        Command::Status(args) => block_on(control::status(args)),
        Command::Cancel(args) => block_on(control::cancel(args)),
        Command::Delete(args) => block_on(control::delete(args)),
        Command::Jobs(command) => block_on(jobs::run(command)),
        Command::Dlq(args) => block_on(dlq::run(args)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn block_on(command: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("Failed to start the async runtime")?;
    let outcome = runtime.block_on(command);
    // Background tasks (the broker connection's I/O, the S3 client's pool) are not awaited.
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}
