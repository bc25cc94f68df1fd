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

/// What the `DATASOURCE_*` variables define: the usable connections, and every group that is
/// not usable with all of its problems.
#[derive(Debug, Default)]
pub struct EnvDatasources {
    /// The usable connections, by connection name.
    pub configs: BTreeMap<String, ConnectionConfig>,
    /// The groups left out, in `<NAME>` order.
    pub skipped: Vec<SkippedGroup>,
}

/// A `DATASOURCE_<NAME>_*` group that defines no connection, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedGroup {
    /// The variables' common prefix, `DATASOURCE_<NAME>_*` (or the lone variable's name).
    pub group: String,
    /// The connection name the group would have defined.
    pub connection: String,
    /// Every problem found, each naming its variable and never a secret.
    pub problems: Vec<String>,
}

/// Reads the datasources defined by `DATASOURCE_<NAME>_<SUFFIX>` variables (the suffixes are in
/// the module docs). Other variables are ignored. Pure: give it `std::env::vars()` or a test's
/// list.
///
/// A group with problems is left out and reported with each of them: a missing or unknown
/// `TYPE`, a missing `HOST`, `DATABASE` or `USER`, a `PORT` that is not 1–65535, an unknown
/// `SSLMODE`, malformed or unsupported `OPTIONS`, an empty entry in `SCHEMAS`. Two groups with
/// one connection name are both left out, so a job never reads from the one the operator did
/// not mean. Values are never echoed except those of `TYPE` and `SSLMODE`.
pub fn read_env_vars(vars: impl IntoIterator<Item = (String, String)>) -> EnvDatasources {
    let mut groups: BTreeMap<String, BTreeMap<Field, String>> = BTreeMap::new();
    let mut read = EnvDatasources::default();
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
                read.skipped.push(SkippedGroup {
                    connection: key.to_lowercase(),
                    problems: vec![format!(
                        "{key} names no datasource (expected {PREFIX}<NAME>_{rest})"
                    )],
                    group: key,
                });
            }
            None => {}
        }
    }

    let mut defined_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (group, values) in groups {
        match build(&group, values) {
            Ok(config) => {
                defined_by
                    .entry(config.name.clone())
                    .or_default()
                    .push(group);
                read.configs.insert(config.name.clone(), config);
            }
            Err((connection, problems)) => read.skipped.push(SkippedGroup {
                group: format!("{PREFIX}{group}_*"),
                connection,
                problems,
            }),
        }
    }
    for (name, groups) in defined_by.into_iter().filter(|(_, g)| g.len() > 1) {
        read.configs.remove(&name);
        let listed = groups
            .iter()
            .map(|g| format!("{PREFIX}{g}_*"))
            .collect::<Vec<_>>()
            .join(" and ");
        for group in &groups {
            read.skipped.push(SkippedGroup {
                group: format!("{PREFIX}{group}_*"),
                connection: name.clone(),
                problems: vec![format!("defined twice, by {listed}")],
            });
        }
    }
    read.skipped.sort_by(|a, b| a.group.cmp(&b.group));
    read
}

/// [`read_env_vars`], strictly: fails on the first problem of the first group left out, naming
/// the variable. For tools and tests that want every datasource or none.
pub fn from_env_vars(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<BTreeMap<String, ConnectionConfig>> {
    let read = read_env_vars(vars);
    match read.skipped.into_iter().next() {
        None => Ok(read.configs),
        Some(skipped) => Err(EngineError::InvalidConnection {
            connection: skipped.connection,
            reason: skipped.problems.into_iter().next().unwrap_or_default(),
        }),
    }
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

/// One group's variables turned into a connection, or its connection name with every problem.
fn build(
    group: &str,
    mut values: BTreeMap<Field, String>,
) -> std::result::Result<ConnectionConfig, (String, Vec<String>)> {
    let var = |field: Field| format!("{PREFIX}{group}_{}", suffix(field));
    let mut take = |field: Field| {
        values
            .remove(&field)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let mut problems = Vec::new();
    let required = |value: Option<String>, field: Field, problems: &mut Vec<String>| {
        if value.is_none() {
            problems.push(format!("{} is not set", var(field)));
        }
        value
    };

    let name = take(Field::ConfigName).unwrap_or_else(|| group.to_lowercase());
    let kind = required(take(Field::Type), Field::Type, &mut problems).and_then(|text| {
        text.parse::<DatasourceKind>()
            .map_err(|e| problems.push(format!("{}: {e}", var(Field::Type))))
            .ok()
    });
    let host = required(take(Field::Host), Field::Host, &mut problems);
    let port = match take(Field::Port) {
        None => kind.map(DatasourceKind::default_port),
        Some(text) => {
            let port = text.parse::<u16>().ok().filter(|p| *p != 0);
            if port.is_none() {
                problems.push(format!(
                    "{} is not a port number (1-65535)",
                    var(Field::Port)
                ));
            }
            port
        }
    };
    let database = required(take(Field::Database), Field::Database, &mut problems);
    // A MongoDB deployment may run without authentication: no user, no credentials.
    let user = match kind {
        Some(DatasourceKind::MongoDb) => Some(take(Field::User).unwrap_or_default()),
        _ => required(take(Field::User), Field::User, &mut problems),
    };
    let ssl_mode = match take(Field::SslMode) {
        None => Some(SslMode::default()),
        Some(text) => text
            .parse()
            .map_err(|e| problems.push(format!("{}: {e}", var(Field::SslMode))))
            .ok(),
    };
    let options = match take(Field::Options) {
        None => Some(BTreeMap::new()),
        Some(text) => parse_options(&text)
            .map_err(|e| problems.push(format!("{}: {e}", var(Field::Options))))
            .ok(),
    };
    let schemas = match take(Field::Schemas) {
        None => Some(None),
        Some(text) => AllowedSchemas::parse(&text)
            .map(Some)
            .map_err(|e| problems.push(format!("{}: {e}", var(Field::Schemas))))
            .ok(),
    };
    // Taken last and untrimmed: a password's spaces are its own.
    let password = Password::new(values.remove(&Field::Password).unwrap_or_default());

    let (
        Some(kind),
        Some(host),
        Some(port),
        Some(database),
        Some(user),
        Some(ssl_mode),
        Some(options),
        Some(schemas),
    ) = (kind, host, port, database, user, ssl_mode, options, schemas)
    else {
        return Err((name, problems));
    };
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
    match config.validate() {
        Ok(()) => Ok(config),
        Err(EngineError::InvalidConnection { reason, .. }) => {
            Err((name, vec![format!("{}: {reason}", var(Field::Options))]))
        }
        Err(other) => Err((name, vec![other.to_string()])),
    }
}

#[cfg(test)]
mod tests;
