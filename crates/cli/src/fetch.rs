//! `fetcherctl fetch`: downloads a stored result, opens it with the storage key and checks its
//! HMAC under the external key (contract §2, §7), with the Worker's own storage module.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use storage::{object_key, ObjectStore, StaticCredentials, StorageConfig};
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
    let stored = store.get(&key).await?;
    let plaintext = keys.storage().open_bytes(&stored).with_context(|| {
        format!("Failed to open object {key} (a different APP_ENC_KEY, or not a sealed result)")
    })?;
    match &expected {
        Some(expected) if !keys.external_hmac().verify_hex(&plaintext, expected) => bail!(
            "HMAC mismatch: the result in {key} does not have the HMAC given with --hmac (another \
             job's result, another key, or an altered object)"
        ),
        Some(_) => eprintln!("HMAC verified"),
        None => eprintln!("HMAC not checked: pass --hmac <result.hmac> to check it"),
    }

    match &args.out {
        Some(path) => {
            crate::private_file::write_private(path, &plaintext)?;
            eprintln!("Wrote {} bytes to {}", plaintext.len(), path.display());
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&plaintext)?;
            // The result has no trailing newline; a terminal gets one, a pipe the exact bytes.
            if stdout.is_terminal() {
                stdout.write_all(b"\n")?;
            }
            stdout.flush()?;
        }
    }
    Ok(())
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
