//! Concurrency caps (`DATASOURCE_<NAME>_MAX_CONCURRENT`): by connection name, for a group that
//! defines its datasource and for one that only caps a stored connection, in either state
//! backend; a cap out of range and a name capped twice refuse the start.

use super::tests::with;
use super::*;

const LEDGER: [(&str, &str); 5] = [
    ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
    ("DATASOURCE_LEDGER_HOST", "ledger.internal"),
    ("DATASOURCE_LEDGER_DATABASE", "ledger"),
    ("DATASOURCE_LEDGER_USER", "reader"),
    ("DATASOURCE_LEDGER_PASSWORD", "ds-pw-1"),
];

fn ledger_with(extra: &[(&'static str, &'static str)]) -> Vec<(String, String)> {
    let mut vars = LEDGER.to_vec();
    vars.extend_from_slice(extra);
    with(&vars)
}

fn problems(vars: Vec<(String, String)>) -> Vec<String> {
    Settings::from_vars(vars)
        .expect_err("must be refused")
        .problems
}

#[test]
fn no_cap_is_the_default() {
    let settings = Settings::from_vars(ledger_with(&[])).expect("valid");
    assert!(settings.jobs.datasource_caps.is_empty());
}

#[test]
fn a_cap_belongs_to_the_connection_name_of_its_group() {
    let settings = Settings::from_vars(ledger_with(&[("DATASOURCE_LEDGER_MAX_CONCURRENT", "2")]))
        .expect("valid");
    assert_eq!(
        settings.jobs.datasource_caps,
        BTreeMap::from([("ledger".into(), 2)])
    );
    assert!(settings.datasources.contains_key("ledger"));

    let named = ledger_with(&[
        ("DATASOURCE_LEDGER_CONFIG_NAME", "ledger-eu"),
        ("DATASOURCE_LEDGER_MAX_CONCURRENT", "1000"),
    ]);
    let settings = Settings::from_vars(named).expect("valid");
    assert_eq!(
        settings.jobs.datasource_caps,
        BTreeMap::from([("ledger-eu".into(), 1000)])
    );
    assert!(settings.datasources.contains_key("ledger-eu"));
}

#[test]
fn a_cap_alone_caps_the_stored_connection_of_its_name_and_defines_no_datasource() {
    let vars = with(&[
        ("DATASOURCE_CRM_MAX_CONCURRENT", "3"),
        ("DATASOURCE_BILLING_CONFIG_NAME", "billing-db"),
        ("DATASOURCE_BILLING_MAX_CONCURRENT", "1"),
    ]);
    let settings = Settings::from_vars(vars).expect("a cap alone is not a broken datasource");
    assert_eq!(
        settings.jobs.datasource_caps,
        BTreeMap::from([("billing-db".into(), 1), ("crm".into(), 3)])
    );
    assert!(settings.datasources.is_empty());
    assert!(
        settings
            .warnings
            .iter()
            .all(|w| !w.contains("MAX_CONCURRENT")),
        "{:?}",
        settings.warnings
    );
}

#[test]
fn a_cap_out_of_range_is_refused_naming_its_variable() {
    for value in ["0", "-1", "1001", "two", "1.5"] {
        let found = problems(ledger_with(&[("DATASOURCE_LEDGER_MAX_CONCURRENT", value)]));
        assert_eq!(
            found,
            ["DATASOURCE_LEDGER_MAX_CONCURRENT must be a whole number from 1 to 1000 (unset: no cap)"],
            "{value}"
        );
    }
}

#[test]
fn a_connection_capped_twice_is_refused() {
    let found = problems(ledger_with(&[
        ("DATASOURCE_LEDGER_MAX_CONCURRENT", "2"),
        ("DATASOURCE_OTHER_CONFIG_NAME", "ledger"),
        ("DATASOURCE_OTHER_MAX_CONCURRENT", "3"),
    ]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("datasource \"ledger\" is capped twice, by DATASOURCE_LEDGER_MAX_CONCURRENT and DATASOURCE_OTHER_MAX_CONCURRENT"),
        "{found:?}"
    );
}

#[test]
fn a_cap_holds_in_the_manager_mode_too() {
    let mut vars = with(&[
        ("MONGO_URI", "mongodb"),
        ("MONGO_HOST", "fetcher-mongodb"),
        ("MONGO_NAME", "Fetcher-DB"),
        ("MONGO_USER", "fetcher"),
        ("MONGO_PASSWORD", "mongo-pw"),
        ("MONGO_PORT", "5709"),
        ("MONGO_PARAMETERS", "authSource=admin&tls=true"),
        ("DATASOURCE_CRM_MAX_CONCURRENT", "2"),
    ]);
    vars.retain(|(name, _)| name != "DATABASE_URL");
    let settings = Settings::from_vars(vars).expect("valid");
    assert!(matches!(settings.state, StateSettings::MongoDb(_)));
    assert_eq!(
        settings.jobs.datasource_caps,
        BTreeMap::from([("crm".into(), 2)])
    );
}
