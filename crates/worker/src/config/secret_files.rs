//! `<NAME>_FILE` for every secret variable: the path of a file whose content is the value, as
//! container platforms mount secrets. Read before anything else, so the reader sees the value as
//! if it had been set; a file's content is never printed, only its variable and path.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use super::variables::{DATASOURCE_VARIABLES, VARIABLES};

/// What a `_FILE` variable's name ends with.
pub(super) const SUFFIX: &str = "_FILE";

/// The most a secret file may hold: a secret is a key, a password or a URL, never this large,
/// and a path to a device that never ends must not hang the start.
const MAX_BYTES: u64 = 64 << 10;

/// The variables with every `<NAME>_FILE` secret read into `<NAME>`, and the problems found:
/// both set, a file that cannot be read, is empty, too large or not UTF-8. `failed` lists the
/// secrets whose file was not read, so "is required" is not said of them as well.
pub(super) struct Resolved {
    pub(super) vars: BTreeMap<String, String>,
    pub(super) problems: Vec<String>,
    pub(super) failed: Vec<String>,
}

/// The secret a `_FILE` variable stands for, if it is one: a secret of the reference, or
/// `DATASOURCE_<NAME>_PASSWORD`.
pub(super) fn secret_of(file_var: &str) -> Option<&str> {
    let name = file_var.strip_suffix(SUFFIX)?;
    let listed = VARIABLES.iter().any(|v| v.secret && v.name == name);
    (listed || datasource_secret(name)).then_some(name)
}

/// Whether `name` is a `DATASOURCE_<NAME>_<FIELD>` secret (its password).
fn datasource_secret(name: &str) -> bool {
    DATASOURCE_VARIABLES
        .iter()
        .filter(|v| v.secret)
        .filter_map(|v| v.name.split_once("<NAME>"))
        .any(|(before, after)| {
            name.strip_prefix(before)
                .and_then(|rest| rest.strip_suffix(after))
                .is_some_and(|group| !group.is_empty())
        })
}

/// Reads every secret's `_FILE` variant into the variables.
pub(super) fn resolve(mut vars: BTreeMap<String, String>) -> Resolved {
    let mut problems = Vec::new();
    let mut failed = Vec::new();
    let files: Vec<(String, String)> = vars
        .iter()
        .filter(|(name, path)| secret_of(name).is_some() && !path.trim().is_empty())
        .map(|(name, path)| (name.clone(), path.trim().to_owned()))
        .collect();
    for (file_var, path) in files {
        let Some(name) = secret_of(&file_var).map(str::to_owned) else {
            continue;
        };
        if vars
            .get(&name)
            .is_some_and(|value| !value.trim().is_empty())
        {
            problems.push(format!(
                "{name} and {file_var} are both set: set the value or the file, not both"
            ));
            continue;
        }
        match read(Path::new(&path)) {
            Ok(value) => {
                vars.insert(name, value);
            }
            Err(why) => {
                problems.push(format!("{file_var} names {path:?}, which {why}"));
                failed.push(name);
            }
        }
    }
    Resolved {
        vars,
        problems,
        failed,
    }
}

/// A secret file's content without its trailing line end, or why it cannot be the value.
fn read(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("holds more than {MAX_BYTES} bytes"));
    }
    let mut text = String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    if text.trim().is_empty() {
        return Err("is empty".to_owned());
    }
    Ok(text)
}
