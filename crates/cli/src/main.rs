//! `fetcherctl`: the operator's and consumer's tool for the Fetcher Worker.

mod derive_key;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "fetcherctl", version, about = "Tools for the Fetcher Worker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the external HMAC key (for event consumers) derived from the master key.
    ///
    /// The master key is read from APP_ENC_KEY, else from the first line of standard input,
    /// else from --key (which other users of the machine can see in the process list).
    DeriveKey(derive_key::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::DeriveKey(args) => derive_key::run(args),
    }
}
