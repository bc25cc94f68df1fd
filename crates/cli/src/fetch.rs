//! `fetcherctl fetch`: downloads a stored result, opens it with the storage key and checks its
//! HMAC under the external key (contract §2, §7), with the Worker's own storage module, as a
//! stream: memory stays the same whatever the result's size.

use std::io::{IsTerminal as _, Seek as _, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use crypto::{HmacStream, KeySet, OpenError, OpenStream};
use indicatif::{ProgressBar, ProgressStyle};
use storage::{object_key, ObjectBody, ObjectStore, StaticCredentials, StorageConfig};
use uuid::Uuid;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("object").required(true).args(["path", "job"])))]
pub struct Args {
    /// The event's result.path (the object key without OBJECT_STORAGE_KEY_PREFIX).
    #[arg(long, value_name = "PATH")]
    path: Option<String>,

    /// The job whose result to fetch: the key is computed as the Worker does.
    #[arg(long, value_name = "UUID")]
    job: Option<Uuid>,

    /// The job's tenant (with --job), when it had one.
    #[arg(long, value_name = "TENANT", requires = "job")]
    tenant: Option<String>,

    /// The event's result.hmac: the result must have exactly this HMAC under the external key,
    /// else nothing is printed and the command fails.
    #[arg(long, value_name = "HEX")]
    hmac: Option<String>,

    /// Write the result to this file instead of standard output: always a new file with mode
    /// 0600 (an existing file is replaced); a symbolic link there is refused.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let keys = crate::keys::from_env(
        "fetch opens the result with the storage key, which only the master key gives",
    )?;
    let expected = args.hmac.as_deref().map(normalized_hmac).transpose()?;
    let config = storage_config(|name| std::env::var(name).ok())?;
    let key = match (&args.path, args.job) {
        (Some(path), _) => format!("{}{path}", config.key_prefix),
        (None, Some(job)) => object_key(&config.key_prefix, args.tenant.as_deref(), job)?.full,
        // clap requires one of the two.
        (None, None) => bail!("--path or --job is required"),
    };

    let store = ObjectStore::new(config).await?;
    let body = store.get_stream(&key).await?;
    // Until every check has passed, the plaintext goes only to a private file nobody else sees:
    // the temporary file beside `--out`, or an unnamed spool for standard output. Both are
    // removed when this function returns early.
    match &args.out {
        Some(path) => {
            let mut file = crate::private_file::PrivateFile::beside(path)?;
            let written = download(body, &key, &keys, &mut file).await?;
            report_hmac(&key, expected.as_deref(), written.hmac)?;
            file.commit()?;
            eprintln!("Wrote {} bytes to {}", written.len, path.display());
        }
        None => {
            let mut spool = crate::private_file::anonymous()?;
            let written = download(body, &key, &keys, &mut spool).await?;
            report_hmac(&key, expected.as_deref(), written.hmac)?;
            spool
                .rewind()
                .context("Failed to read back the spooled result")?;
            let mut stdout = std::io::stdout().lock();
            std::io::copy(&mut spool, &mut stdout).context("Failed to write the result")?;
            // The result has no trailing newline; a terminal gets one, a pipe the exact bytes.
            if stdout.is_terminal() {
                stdout.write_all(b"\n")?;
            }
            stdout.flush()?;
        }
    }
    Ok(())
}

/// What [`download`] wrote: the plaintext's length and its HMAC under the external key.
struct Written {
    len: u64,
    hmac: HmacStream,
}

/// Reads the stored body piece by piece, opens it with the storage key and writes the plaintext
/// to `sink` while computing its HMAC; memory does not depend on the result's size. Returns only
/// once the whole body has been read and the GCM tag verified: on an error, what was written to
/// `sink` is unauthenticated and must be discarded.
async fn download(
    mut body: ObjectBody,
    key: &str,
    keys: &KeySet,
    sink: &mut impl Write,
) -> anyhow::Result<Written> {
    let progress = progress_bar(body.announced_len());
    let mut open = OpenStream::new(keys.storage());
    let mut hmac = keys.external_hmac().start();
    let mut plaintext = Vec::new();
    let mut len = 0u64;
    let mut write = |plaintext: &mut Vec<u8>| -> anyhow::Result<()> {
        hmac.update(plaintext);
        sink.write_all(plaintext)
            .context("Failed to write the result to its temporary file")?;
        len += plaintext.len() as u64;
        plaintext.clear();
        Ok(())
    };
    let outcome = async {
        while let Some(chunk) = body.next_chunk().await? {
            progress.set_position(body.received());
            open.update(&chunk, &mut plaintext)
                .map_err(|error| open_failed(key, &error))?;
            write(&mut plaintext)?;
        }
        open.finish(&mut plaintext)
            .map_err(|error| open_failed(key, &error))?;
        write(&mut plaintext)
    }
    .await;
    progress.finish_and_clear();
    outcome?;
    Ok(Written { len, hmac })
}

/// The failed step of opening, named: the GCM tag, or a body that is not a sealed result.
fn open_failed(key: &str, error: &OpenError) -> anyhow::Error {
    match error {
        OpenError::AuthenticationFailed => anyhow!(
            "Failed to open object {key}: the GCM tag check failed (a different APP_ENC_KEY, or \
             an altered object); nothing was written"
        ),
        other => anyhow!(
            "Failed to open object {key}: {other} (not a sealed result); nothing was written"
        ),
    }
}

/// Checks the plaintext's HMAC against `--hmac`, if given, and says so on standard error.
fn report_hmac(key: &str, expected: Option<&str>, actual: HmacStream) -> anyhow::Result<()> {
    match expected {
        Some(expected) if !actual.verify_hex(expected) => bail!(
            "HMAC mismatch: the result in {key} does not have the HMAC given with --hmac (another \
             job's result, another key, or an altered object); nothing was written"
        ),
        Some(_) => eprintln!("HMAC verified"),
        None => eprintln!("HMAC not checked: pass --hmac <result.hmac> to check it"),
    }
    Ok(())
}

/// Bytes downloaded of the object's size, on standard error when it is a terminal; hidden
/// otherwise (pipes, logs and tests see no control codes).
fn progress_bar(len: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (bar, template) = match len {
        Some(len) => (
            ProgressBar::new(len),
            "{bytes}/{total_bytes} [{wide_bar}] {bytes_per_sec}, {eta} left",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} {bytes} {bytes_per_sec}",
        ),
    };
    // Invariant: the templates above are valid.
    bar.set_style(ProgressStyle::with_template(template).expect("valid progress template"));
    bar
}

/// `--hmac` in the lowercase form the contract uses.
fn normalized_hmac(text: &str) -> anyhow::Result<String> {
    let text = text.trim().to_ascii_lowercase();
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--hmac must be 64 hex characters (the event's result.hmac)");
    }
    Ok(text)
}

/// The object storage settings from the Worker's variables (contract §7), every problem at once.
/// No message contains a value.
fn storage_config(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<StorageConfig> {
    let get = |name: &str| {
        var(name)
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    let mut problems = Vec::new();
    let bucket = get("OBJECT_STORAGE_BUCKET");
    if bucket.is_none() {
        problems.push("OBJECT_STORAGE_BUCKET is required".to_owned());
    }
    let credentials = match (
        get("OBJECT_STORAGE_ACCESS_KEY_ID"),
        get("OBJECT_STORAGE_SECRET_KEY"),
    ) {
        (Some(id), Some(secret)) => Some(StaticCredentials::new(id, secret)),
        (None, None) => None,
        _ => {
            problems.push(
                "OBJECT_STORAGE_ACCESS_KEY_ID and OBJECT_STORAGE_SECRET_KEY must be set together"
                    .to_owned(),
            );
            None
        }
    };
    let use_path_style = match get("OBJECT_STORAGE_USE_PATH_STYLE")
        .map(|value| value.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("false" | "0" | "no") => false,
        Some("true" | "1" | "yes") => true,
        Some(_) => {
            problems.push("OBJECT_STORAGE_USE_PATH_STYLE must be true or false".to_owned());
            false
        }
    };
    if !problems.is_empty() {
        bail!("Invalid object storage settings: {}", problems.join("; "));
    }
    let bucket = bucket.ok_or_else(|| anyhow!("OBJECT_STORAGE_BUCKET is required"))?;
    Ok(StorageConfig {
        endpoint: get("OBJECT_STORAGE_ENDPOINT"),
        region: get("OBJECT_STORAGE_REGION").unwrap_or_default(),
        // The prefix is taken as given (plain concatenation), only an empty one is "none".
        key_prefix: var("OBJECT_STORAGE_KEY_PREFIX").unwrap_or_default(),
        credentials,
        use_path_style,
        ..StorageConfig::new(bucket)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> anyhow::Result<StorageConfig> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        storage_config(|name| vars.get(name).cloned())
    }

    #[test]
    fn settings_follow_the_worker_variables() {
        let config = config(&[
            ("OBJECT_STORAGE_BUCKET", "results"),
            ("OBJECT_STORAGE_ENDPOINT", "http://127.0.0.1:9000"),
            ("OBJECT_STORAGE_KEY_PREFIX", "prod/"),
            ("OBJECT_STORAGE_ACCESS_KEY_ID", "id"),
            ("OBJECT_STORAGE_SECRET_KEY", "secret-sentinel"),
            ("OBJECT_STORAGE_USE_PATH_STYLE", "TRUE"),
        ])
        .expect("valid");
        assert_eq!(config.bucket, "results");
        assert_eq!(config.key_prefix, "prod/");
        assert_eq!(config.effective_region(), "us-east-1");
        assert!(config.use_path_style);
        assert!(config.credentials.is_some());
    }

    #[test]
    fn every_problem_is_named_without_values() {
        let error = config(&[
            ("OBJECT_STORAGE_SECRET_KEY", "secret-sentinel"),
            ("OBJECT_STORAGE_USE_PATH_STYLE", "maybe"),
        ])
        .expect_err("invalid");
        let text = error.to_string();
        assert!(text.contains("OBJECT_STORAGE_BUCKET is required"), "{text}");
        assert!(text.contains("must be set together"), "{text}");
        assert!(text.contains("OBJECT_STORAGE_USE_PATH_STYLE"), "{text}");
        assert!(!text.contains("secret-sentinel"), "{text}");
        assert!(!text.contains("maybe"), "{text}");
    }

    #[test]
    fn hmac_is_normalized_and_checked() {
        let hex = "AB".repeat(32);
        assert_eq!(
            normalized_hmac(&format!(" {hex} ")).expect("ok"),
            "ab".repeat(32)
        );
        assert!(normalized_hmac("abc").is_err());
        assert!(normalized_hmac(&"zz".repeat(32)).is_err());
    }
}
