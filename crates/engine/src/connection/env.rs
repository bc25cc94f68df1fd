//! Environment-defined datasources: `DATASOURCE_<NAME>_*` variables grouped into connections.

use std::collections::BTreeMap;

use super::options::parse_options;
use super::{AllowedSchemas, ConnectionConfig, DatasourceKind, Password, SslMode};
use crate::error::{EngineError, Result};

const PREFIX: &str = "DATASOURCE_";

/// One variable of a datasource group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Field {
    ConfigName,
    Type,
    Host,
    Port,
    Database,
    User,
    Password,
    SslMode,
    Options,
    Schemas,
}

const FIELDS: [(&str, Field); 10] = [
    ("CONFIG_NAME", Field::ConfigName),
    ("TYPE", Field::Type),
    ("HOST", Field::Host),
    ("PORT", Field::Port),
    ("DATABASE", Field::Database),
    ("USER", Field::User),
    ("PASSWORD", Field::Password),
    ("SSLMODE", Field::SslMode),
    ("OPTIONS", Field::Options),
    ("SCHEMAS", Field::Schemas),
];

/// Reads the datasources defined by `DATASOURCE_<NAME>_<SUFFIX>` variables (the suffixes are in
/// the module docs), keyed by connection name. Other variables are ignored. Pure: give it
/// `std::env::vars()` or a test's list.
///
/// Fails on the first problem, in `<NAME>` order, naming the variable: a missing or unknown
/// `TYPE`, a missing `HOST`, `DATABASE` or `USER`, a `PORT` that is not 1–65535, an unknown
/// `SSLMODE`, malformed or unsupported `OPTIONS`, an empty entry in `SCHEMAS`, or two groups
/// with one connection name.
/// Values are never echoed except those of `TYPE` and `SSLMODE`.
pub fn from_env_vars(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<BTreeMap<String, ConnectionConfig>> {
    let mut groups: BTreeMap<String, BTreeMap<Field, String>> = BTreeMap::new();
    for (key, value) in vars {
        let Some(rest) = key.strip_prefix(PREFIX) else {
            continue;
        };
        match split_field(rest) {
            Some((name, field)) => {
                groups
                    .entry(name.to_owned())
                    .or_default()
                    .insert(field, value);
            }
            None if FIELDS.iter().any(|(suffix, _)| rest == *suffix) => {
                return Err(EngineError::InvalidConnection {
                    connection: key.to_lowercase(),
                    reason: format!("{key} names no datasource (expected {PREFIX}<NAME>_{rest})"),
                });
            }
            None => {}
        }
    }

    let mut configs = BTreeMap::new();
    let mut defined_by: BTreeMap<String, String> = BTreeMap::new();
    for (group, values) in groups {
        let config = build(&group, values)?;
        if let Some(first) = defined_by.insert(config.name.clone(), group.clone()) {
            return Err(config.invalid(format!(
                "defined twice, by {PREFIX}{first}_* and {PREFIX}{group}_*"
            )));
        }
        configs.insert(config.name.clone(), config);
    }
    Ok(configs)
}

/// [`from_env_vars`] over the process environment. A `DATASOURCE_` variable whose value is not
/// UTF-8 is an error; other variables are not looked at.
pub fn from_process_env() -> Result<BTreeMap<String, ConnectionConfig>> {
    let mut vars = Vec::new();
    for (key, value) in std::env::vars_os() {
        let Some(key) = key.to_str().filter(|k| k.starts_with(PREFIX)) else {
            continue;
        };
        let Ok(value) = value.into_string() else {
            return Err(EngineError::InvalidConnection {
                connection: key.to_lowercase(),
                reason: format!("{key} is not valid UTF-8"),
            });
        };
        vars.push((key.to_owned(), value));
    }
    from_env_vars(vars)
}

/// `MY_DB_HOST` → (`MY_DB`, `Host`): the longest known suffix after an underscore, with a
/// non-empty name before it.
fn split_field(rest: &str) -> Option<(&str, Field)> {
    FIELDS
        .iter()
        .filter_map(|(suffix, field)| {
            let name = rest.strip_suffix(suffix)?.strip_suffix('_')?;
            (!name.is_empty()).then_some((name, *field, suffix.len()))
        })
        .max_by_key(|(_, _, len)| *len)
        .map(|(name, field, _)| (name, field))
}

fn suffix(field: Field) -> &'static str {
    FIELDS
        .iter()
        .find(|(_, f)| *f == field)
        .map_or("", |(suffix, _)| suffix)
}

/// One group's variables turned into a connection.
fn build(group: &str, mut values: BTreeMap<Field, String>) -> Result<ConnectionConfig> {
    let var = |field: Field| format!("{PREFIX}{group}_{}", suffix(field));
    let mut take = |field: Field| {
        values
            .remove(&field)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };

    let name = take(Field::ConfigName).unwrap_or_else(|| group.to_lowercase());
    let invalid = |reason: String| EngineError::InvalidConnection {
        connection: name.clone(),
        reason,
    };
    let required = |value: Option<String>, field: Field| {
        value.ok_or_else(|| invalid(format!("{} is not set", var(field))))
    };

    let kind: DatasourceKind = required(take(Field::Type), Field::Type)?
        .parse()
        .map_err(|e| invalid(format!("{}: {e}", var(Field::Type))))?;
    let host = required(take(Field::Host), Field::Host)?;
    let port = match take(Field::Port) {
        None => kind.default_port(),
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| {
                invalid(format!(
                    "{} is not a port number (1-65535)",
                    var(Field::Port)
                ))
            })?,
    };
    let database = required(take(Field::Database), Field::Database)?;
    let user = required(take(Field::User), Field::User)?;
    let ssl_mode = match take(Field::SslMode) {
        None => SslMode::default(),
        Some(text) => text
            .parse()
            .map_err(|e| invalid(format!("{}: {e}", var(Field::SslMode))))?,
    };
    let options = match take(Field::Options) {
        None => BTreeMap::new(),
        Some(text) => {
            parse_options(&text).map_err(|e| invalid(format!("{}: {e}", var(Field::Options))))?
        }
    };
    let schemas = take(Field::Schemas)
        .map(|text| AllowedSchemas::parse(&text))
        .transpose()
        .map_err(|e| invalid(format!("{}: {e}", var(Field::Schemas))))?;
    // Taken last and untrimmed: a password's spaces are its own.
    let password = Password::new(values.remove(&Field::Password).unwrap_or_default());

    let config = ConnectionConfig {
        name: name.clone(),
        kind,
        host,
        port,
        database,
        user,
        password,
        ssl_mode,
        options,
        schemas,
    };
    // The remaining checks are about the options (the host is known to be set).
    config.validate().map_err(|error| match error {
        EngineError::InvalidConnection { connection, reason } => EngineError::InvalidConnection {
            connection,
            reason: format!("{}: {reason}", var(Field::Options)),
        },
        other => other,
    })?;
    Ok(config)
}

#[cfg(test)]
mod tests;
