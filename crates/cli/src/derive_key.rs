//! `fetcherctl derive-key`: prints the external HMAC key, the one event consumers are given, and
//! on request the internal one, which lets a submitter sign jobs without the master key.

use std::io::{BufRead, IsTerminal};

use anyhow::{bail, Context};

#[derive(clap::Args)]
pub struct Args {
    /// The master key (standard base64), when neither APP_ENC_KEY nor standard input has it.
    #[arg(long)]
    key: Option<String>,

    /// Also print the internal HMAC key (for `fetcherctl submit --hmac-key`). Whoever holds it
    /// can submit jobs the Worker accepts: give it to submitters only.
    #[arg(long)]
    internal: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let master = master_key(args.key)?;
    // The error names APP_ENC_KEY and what is wrong with it, never the value.
    let keys = crypto::KeySet::from_base64(&master).context("Failed to derive the keys")?;
    println!(
        "External HMAC Key (hex): {}",
        keys.external_hmac().reveal_hex()
    );
    if args.internal {
        println!(
            "Internal HMAC Key (hex): {}",
            keys.internal_hmac().reveal_hex()
        );
    }
    Ok(())
}

/// APP_ENC_KEY, else the first line of a piped standard input, else `--key`.
fn master_key(flag: Option<String>) -> anyhow::Result<String> {
    if let Some(key) = std::env::var("APP_ENC_KEY").ok().filter(|k| !k.is_empty()) {
        return Ok(key);
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .context("Failed to read the master key from standard input")?;
        let line = line.trim_end_matches(['\r', '\n']);
        if !line.is_empty() {
            return Ok(line.to_owned());
        }
    }
    match flag {
        Some(key) => Ok(key),
        None => bail!("no master key: set APP_ENC_KEY, pipe it on standard input, or pass --key"),
    }
}
