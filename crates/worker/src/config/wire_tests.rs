//! Credentials on the wire as `config check` reports them: MQTT credentials over `mqtt://` are
//! a problem unless `MQTT_ALLOW_CLEARTEXT_PASSWORD=true`; a SQL Server datasource with
//! `sslmode=require` and a password is a warning naming it.

use super::command;
use super::tests::with;

const MQTT_PASSWORD: &str = "mqtt-cleartext-sentinel";

fn check(extra: &[(&str, &str)]) -> command::Outcome {
    let args = ["config".to_owned(), "check".to_owned()];
    command::run(&args, with(extra)).expect("a config command")
}

#[test]
fn mqtt_credentials_over_mqtt_are_refused_unless_allowed() {
    for credentials in [
        &[
            ("MQTT_USERNAME", "mirror"),
            ("MQTT_PASSWORD", MQTT_PASSWORD),
        ][..],
        &[("MQTT_USERNAME", "mirror")],
        &[("MQTT_PASSWORD", MQTT_PASSWORD)],
    ] {
        let mut vars = vec![("MQTT_URL", "mqtt://broker.internal:1883")];
        vars.extend_from_slice(credentials);
        let refused = check(&vars);
        assert_eq!(refused.code, 2, "{credentials:?}: {refused:?}");
        assert!(
            refused
                .stderr
                .contains("MQTT_USERNAME and MQTT_PASSWORD would cross to the broker in the clear")
                && refused
                    .stderr
                    .contains("MQTT_ALLOW_CLEARTEXT_PASSWORD=true"),
            "{}",
            refused.stderr
        );
        assert!(!refused.stderr.contains(MQTT_PASSWORD));

        vars.push(("MQTT_ALLOW_CLEARTEXT_PASSWORD", "true"));
        let allowed = check(&vars);
        assert_eq!(allowed.code, 0, "{credentials:?}: {allowed:?}");
        assert!(
            allowed.stdout.starts_with("configuration OK"),
            "{allowed:?}"
        );
    }
}

#[test]
fn mqtt_without_credentials_or_over_tls_needs_no_allowance() {
    for vars in [
        &[("MQTT_URL", "mqtt://broker.internal:1883")][..],
        &[
            ("MQTT_URL", "mqtts://broker.internal:8883"),
            ("MQTT_USERNAME", "mirror"),
            ("MQTT_PASSWORD", MQTT_PASSWORD),
        ],
    ] {
        let outcome = check(vars);
        assert_eq!(outcome.code, 0, "{vars:?}: {outcome:?}");
    }
    let misspelt = check(&[
        ("MQTT_ALLOW_CLEARTEXT_PASSWORD", "maybe"),
        ("MQTT_URL", "mqtt://b:1883"),
    ]);
    assert_eq!(misspelt.code, 2);
    assert!(misspelt
        .stderr
        .contains("MQTT_ALLOW_CLEARTEXT_PASSWORD must be true or false"));
}

#[test]
fn sql_server_require_with_a_password_is_a_warning_naming_the_datasource() {
    let datasource = |ssl_mode: &'static str| {
        [
            ("DATASOURCE_MSSQL_TYPE", "SQL_SERVER"),
            ("DATASOURCE_MSSQL_HOST", "mssql.internal"),
            ("DATASOURCE_MSSQL_DATABASE", "ledger"),
            ("DATASOURCE_MSSQL_USER", "reader"),
            ("DATASOURCE_MSSQL_PASSWORD", "mssql-sentinel-pw"),
            ("DATASOURCE_MSSQL_SSLMODE", ssl_mode),
        ]
    };
    let warned = check(&datasource("require"));
    assert_eq!(warned.code, 0, "{warned:?}");
    assert!(
        warned.stdout.starts_with("configuration OK (1 warning(s))"),
        "{}",
        warned.stdout
    );
    let line = warned
        .stdout
        .lines()
        .find(|l| l.contains("warning:"))
        .expect("the warning");
    assert!(
        line.contains("datasource \"mssql\" (SQL Server) has sslmode=require")
            && line.contains("verify-ca or verify-full"),
        "{line}"
    );
    assert!(!warned.stdout.contains("mssql-sentinel-pw"));

    let verified = check(&datasource("verify-full"));
    assert!(
        verified
            .stdout
            .starts_with("configuration OK (0 warning(s))"),
        "{}",
        verified.stdout
    );
}
