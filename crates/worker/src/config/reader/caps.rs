//! Concurrency caps (issue 37): `DATASOURCE_<NAME>_MAX_CONCURRENT`, how many reads of one
//! datasource run at once across every replica. The cap belongs to the connection name the group
//! names (`DATASOURCE_<NAME>_CONFIG_NAME`, else `<name>` in lower case), whether the group
//! defines that connection or not: a group of `MAX_CONCURRENT` alone (with `CONFIG_NAME` or
//! not) caps the stored connection of that name (the `connections` table).

use std::collections::BTreeMap;

use super::super::variables::DATASOURCE_VARIABLES;
use super::Reader;

const PREFIX: &str = "DATASOURCE_";
const SUFFIX: &str = "_MAX_CONCURRENT";
/// The largest cap: more reads of one datasource at once than any replica set runs.
pub(in crate::config) const MAX_CAP: u32 = 1000;

/// The caps, by connection name; and `vars` without the variables of the groups that only cap
/// (their `CONFIG_NAME` would otherwise read as a datasource missing its `TYPE`), for the
/// datasources' reader.
pub(super) fn read(
    r: &mut Reader<'_>,
    vars: &BTreeMap<String, String>,
) -> (BTreeMap<String, u32>, BTreeMap<String, String>) {
    let mut caps = BTreeMap::new();
    let mut capped_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut rest = vars.clone();
    for name in vars.keys() {
        let Some(group) = name
            .strip_prefix(PREFIX)
            .and_then(|tail| tail.strip_suffix(SUFFIX))
            .filter(|group| !group.is_empty())
        else {
            continue;
        };
        let config_name = format!("{PREFIX}{group}_CONFIG_NAME");
        let connection = r
            .get(&config_name)
            .map_or_else(|| group.to_lowercase(), str::to_owned);
        if cap_only(group, vars) {
            rest.remove(&config_name);
        }
        let Some(cap) = cap(r, name) else {
            continue;
        };
        capped_by
            .entry(connection.clone())
            .or_default()
            .push(name.clone());
        caps.insert(connection, cap);
    }
    for (connection, names) in capped_by.into_iter().filter(|(_, n)| n.len() > 1) {
        r.problem(format!(
            "datasource {connection:?} is capped twice, by {}: set one",
            names.join(" and ")
        ));
    }
    (caps, rest)
}

/// `name`'s cap, 1 to [`MAX_CAP`]; a problem otherwise (0 would never read the datasource, and
/// a cap silently dropped would spare the customer's database nothing).
fn cap(r: &mut Reader<'_>, name: &str) -> Option<u32> {
    let text = r.get(name)?;
    match text.parse::<u32>() {
        Ok(cap) if (1..=MAX_CAP).contains(&cap) => Some(cap),
        _ => {
            r.problem(format!(
                "{name} must be a whole number from 1 to {MAX_CAP} (unset: no cap)"
            ));
            None
        }
    }
}

/// Whether `DATASOURCE_<group>_*` sets nothing but its cap and its connection name.
fn cap_only(group: &str, vars: &BTreeMap<String, String>) -> bool {
    DATASOURCE_VARIABLES
        .iter()
        .map(|variable| variable.name.replace("<NAME>", group))
        .flat_map(|name| [format!("{name}_FILE"), name])
        .filter(|name| !name.ends_with(SUFFIX) && !name.ends_with("_CONFIG_NAME"))
        .all(|name| !vars.contains_key(&name))
}
