//! Unit tests of the `DATASOURCE_<NAME>_*` loader.

use super::*;

const SECRET: &str = "pa ss-w0rd-sentinel";

fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn ledger() -> Vec<(String, String)> {
    vars(&[
        ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
        ("DATASOURCE_LEDGER_HOST", "db.internal"),
        ("DATASOURCE_LEDGER_DATABASE", "ledger"),
        ("DATASOURCE_LEDGER_USER", "reader"),
        ("DATASOURCE_LEDGER_PASSWORD", SECRET),
    ])
}

fn with(mut base: Vec<(String, String)>, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    base.extend(vars(extra));
    base
}

fn error_of(list: Vec<(String, String)>) -> String {
    let error = from_env_vars(list).unwrap_err();
    let text = error.to_string();
    assert!(!text.contains(SECRET), "{text}");
    assert!(!format!("{error:?}").contains(SECRET));
    text
}

#[test]
fn a_complete_group_becomes_a_connection_with_defaults() {
    let configs = from_env_vars(ledger()).unwrap();
    let config = &configs["ledger"];
    assert_eq!(config.name, "ledger");
    assert_eq!(config.kind, DatasourceKind::Postgres);
    assert_eq!(config.host, "db.internal");
    assert_eq!(config.port, 5432);
    assert_eq!(config.database, "ledger");
    assert_eq!(config.user, "reader");
    assert_eq!(config.password.expose(), SECRET);
    assert_eq!(config.ssl_mode, SslMode::Prefer);
    assert!(config.options.is_empty());
}

#[test]
fn unrelated_variables_are_ignored() {
    let list = with(
        ledger(),
        &[
            ("PATH", "/bin"),
            ("DATASOURCE_LEDGER_TIMEOUT", "5"),
            ("DATASOURCES", "x"),
        ],
    );
    assert_eq!(from_env_vars(list).unwrap().len(), 1);
    assert!(from_env_vars(vars(&[("HOME", "/root")]))
        .unwrap()
        .is_empty());
}

#[test]
fn names_may_contain_underscores() {
    let list = vars(&[
        ("DATASOURCE_MY_USER_DB_TYPE", "mysql"),
        ("DATASOURCE_MY_USER_DB_HOST", "h"),
        ("DATASOURCE_MY_USER_DB_DATABASE", "d"),
        ("DATASOURCE_MY_USER_DB_USER", "u"),
        ("DATASOURCE_MY_USER_DB_PORT", "3307"),
    ]);
    let configs = from_env_vars(list).unwrap();
    let config = &configs["my_user_db"];
    assert_eq!(config.kind, DatasourceKind::MySql);
    assert_eq!(config.port, 3307);
    assert_eq!(config.user, "u");
    assert!(config.password.is_empty());
}

#[test]
fn config_name_overrides_the_lowercased_name() {
    let list = with(
        ledger(),
        &[("DATASOURCE_LEDGER_CONFIG_NAME", "Ledger-Main")],
    );
    let configs = from_env_vars(list).unwrap();
    assert_eq!(configs.keys().collect::<Vec<_>>(), ["Ledger-Main"]);
    assert_eq!(configs["Ledger-Main"].name, "Ledger-Main");
}

#[test]
fn a_group_called_config_is_not_mistaken_for_a_config_name() {
    let list = vars(&[
        ("DATASOURCE_CONFIG_TYPE", "POSTGRESQL"),
        ("DATASOURCE_CONFIG_HOST", "h"),
        ("DATASOURCE_CONFIG_DATABASE", "d"),
        ("DATASOURCE_CONFIG_USER", "u"),
        ("DATASOURCE_CONFIG_CONFIG_NAME", "cfg"),
    ]);
    let configs = from_env_vars(list).unwrap();
    assert_eq!(configs.keys().collect::<Vec<_>>(), ["cfg"]);
}

#[test]
fn a_missing_type_names_the_variable() {
    let list: Vec<_> = ledger()
        .into_iter()
        .filter(|(k, _)| !k.ends_with("_TYPE"))
        .collect();
    assert_eq!(
        error_of(list),
        "connection ledger: DATASOURCE_LEDGER_TYPE is not set"
    );
}

#[test]
fn an_unknown_type_names_the_variable_and_the_value() {
    let list = with(ledger(), &[("DATASOURCE_LEDGER_TYPE", "cassandra")]);
    let text = error_of(list);
    assert!(
        text.starts_with("connection ledger: DATASOURCE_LEDGER_TYPE: \"cassandra\" is not"),
        "{text}"
    );
}

#[test]
fn a_missing_host_names_the_variable() {
    let list = with(ledger(), &[("DATASOURCE_LEDGER_HOST", "  ")]);
    assert_eq!(
        error_of(list),
        "connection ledger: DATASOURCE_LEDGER_HOST is not set"
    );
}

#[test]
fn a_bad_port_names_the_variable() {
    for port in ["0", "65536", "-1", "54x", "5432.0"] {
        let list = with(ledger(), &[("DATASOURCE_LEDGER_PORT", port)]);
        assert_eq!(
            error_of(list),
            "connection ledger: DATASOURCE_LEDGER_PORT is not a port number (1-65535)",
            "{port}"
        );
    }
}

#[test]
fn an_empty_port_takes_the_default() {
    let list = with(ledger(), &[("DATASOURCE_LEDGER_PORT", "")]);
    assert_eq!(from_env_vars(list).unwrap()["ledger"].port, 5432);
}

#[test]
fn ssl_modes_parse_in_both_spellings() {
    for (text, mode) in [
        ("verify-full", SslMode::VerifyFull),
        ("VERIFY_IDENTITY", SslMode::VerifyFull),
        ("disable", SslMode::Disable),
        ("REQUIRED", SslMode::Require),
    ] {
        let list = with(ledger(), &[("DATASOURCE_LEDGER_SSLMODE", text)]);
        assert_eq!(from_env_vars(list).unwrap()["ledger"].ssl_mode, mode);
    }
    let list = with(ledger(), &[("DATASOURCE_LEDGER_SSLMODE", "sometimes")]);
    assert!(error_of(list).contains("DATASOURCE_LEDGER_SSLMODE"));
}

#[test]
fn options_are_parsed_and_checked_against_the_driver() {
    let list = with(
        ledger(),
        &[(
            "DATASOURCE_LEDGER_OPTIONS",
            "sslrootcert=/ca.pem statement_timeout=5s",
        )],
    );
    let configs = from_env_vars(list).unwrap();
    assert_eq!(configs["ledger"].options["statement_timeout"], "5s");

    let list = with(ledger(), &[("DATASOURCE_LEDGER_OPTIONS", "nopair")]);
    assert_eq!(
        error_of(list),
        "connection ledger: DATASOURCE_LEDGER_OPTIONS: option 1 is not a key=value pair"
    );
    let list = with(ledger(), &[("DATASOURCE_LEDGER_OPTIONS", "bad-key=1")]);
    assert!(error_of(list).contains("DATASOURCE_LEDGER_OPTIONS: option \"bad-key\""));
}

#[test]
fn two_groups_with_one_connection_name_are_an_error() {
    let list = with(
        ledger(),
        &[
            ("DATASOURCE_OTHER_CONFIG_NAME", "ledger"),
            ("DATASOURCE_OTHER_TYPE", "MYSQL"),
            ("DATASOURCE_OTHER_HOST", "h"),
            ("DATASOURCE_OTHER_DATABASE", "d"),
            ("DATASOURCE_OTHER_USER", "u"),
        ],
    );
    assert_eq!(
        error_of(list),
        "connection ledger: defined twice, by DATASOURCE_LEDGER_* and DATASOURCE_OTHER_*"
    );
}

#[test]
fn a_variable_without_a_name_is_an_error() {
    let text = error_of(vars(&[("DATASOURCE_HOST", "h")]));
    assert!(
        text.contains("DATASOURCE_HOST names no datasource"),
        "{text}"
    );
}

#[test]
fn unsupported_types_still_resolve() {
    let list = with(ledger(), &[("DATASOURCE_LEDGER_TYPE", "ORACLE")]);
    let config = &from_env_vars(list).unwrap()["ledger"];
    assert_eq!(config.kind, DatasourceKind::Oracle);
    assert_eq!(config.port, 1521);
    assert!(config.ensure_supported().is_err());
}

#[test]
fn the_password_is_kept_verbatim_and_never_printed() {
    let configs = from_env_vars(ledger()).unwrap();
    assert_eq!(configs["ledger"].password.expose(), SECRET);
    let debug = format!("{configs:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    // Every error path with the password set: the text never carries it.
    for (key, value) in [
        ("DATASOURCE_LEDGER_TYPE", "x"),
        ("DATASOURCE_LEDGER_PORT", SECRET),
        ("DATASOURCE_LEDGER_OPTIONS", SECRET),
        ("DATASOURCE_LEDGER_DATABASE", ""),
        ("DATASOURCE_LEDGER_USER", ""),
    ] {
        error_of(with(ledger(), &[(key, value)]));
    }
}

#[test]
fn schemas_are_a_trimmed_comma_separated_allow_list() {
    let configs = from_env_vars(with(
        ledger(),
        &[("DATASOURCE_LEDGER_SCHEMAS", " public , sales,Archive ")],
    ))
    .unwrap();
    let schemas = configs["ledger"].schemas.as_ref().expect("an allow-list");
    let listed: Vec<&str> = schemas.iter().collect();
    assert_eq!(listed, ["Archive", "public", "sales"]);
    assert!(schemas.contains("sales"));
    assert!(!schemas.contains("Sales"), "names match exactly");
}

#[test]
fn without_schemas_there_is_no_allow_list() {
    let configs = from_env_vars(ledger()).unwrap();
    assert!(configs["ledger"].schemas.is_none());
    // Set but blank is the same as unset, like every other variable.
    let configs = from_env_vars(with(ledger(), &[("DATASOURCE_LEDGER_SCHEMAS", "  ")])).unwrap();
    assert!(configs["ledger"].schemas.is_none());
}

#[test]
fn empty_schema_entries_are_refused_naming_the_variable() {
    for (value, position) in [
        ("public,,sales", 2),
        ("public,", 2),
        (",public", 1),
        ("public, ,sales", 2),
    ] {
        let text = error_of(with(ledger(), &[("DATASOURCE_LEDGER_SCHEMAS", value)]));
        assert_eq!(
            text,
            format!(
                "connection ledger: DATASOURCE_LEDGER_SCHEMAS: entry {position} of the list is empty"
            ),
            "{value:?}"
        );
    }
}

#[test]
fn every_problem_of_every_bad_group_is_reported_and_the_good_groups_kept() {
    let list = with(
        ledger(),
        &[
            ("DATASOURCE_BROKEN_PORT", "99999"),
            ("DATASOURCE_BROKEN_SSLMODE", "sometimes"),
            ("DATASOURCE_BROKEN_PASSWORD", SECRET),
            ("DATASOURCE_ALSO_TYPE", "cassandra"),
            ("DATASOURCE_ALSO_HOST", "h"),
            ("DATASOURCE_ALSO_DATABASE", "d"),
            ("DATASOURCE_ALSO_USER", "u"),
            ("DATASOURCE_ALSO_SCHEMAS", "a,,b"),
        ],
    );
    let read = read_env_vars(list);
    assert_eq!(read.configs.keys().collect::<Vec<_>>(), ["ledger"]);
    let skipped: Vec<(&str, &str, Vec<&str>)> = read
        .skipped
        .iter()
        .map(|s| {
            let problems = s.problems.iter().map(String::as_str).collect();
            (s.group.as_str(), s.connection.as_str(), problems)
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "DATASOURCE_ALSO_*");
    assert_eq!(skipped[0].1, "also");
    assert_eq!(skipped[0].2.len(), 2, "{skipped:?}");
    assert!(skipped[0].2[0].starts_with("DATASOURCE_ALSO_TYPE: \"cassandra\" is not"));
    assert_eq!(
        skipped[0].2[1],
        "DATASOURCE_ALSO_SCHEMAS: entry 2 of the list is empty"
    );
    assert_eq!(skipped[1].0, "DATASOURCE_BROKEN_*");
    assert_eq!(skipped[1].1, "broken");
    let broken = &skipped[1].2;
    for expected in [
        "DATASOURCE_BROKEN_TYPE is not set",
        "DATASOURCE_BROKEN_HOST is not set",
        "DATASOURCE_BROKEN_PORT is not a port number (1-65535)",
        "DATASOURCE_BROKEN_DATABASE is not set",
        "DATASOURCE_BROKEN_USER is not set",
    ] {
        assert!(broken.contains(&expected), "{expected:?} not in {broken:?}");
    }
    assert!(broken
        .iter()
        .any(|p| p.starts_with("DATASOURCE_BROKEN_SSLMODE")));
    assert_eq!(broken.len(), 6, "{broken:?}");
    assert!(!format!("{read:?}").contains(SECRET));
}

#[test]
fn two_groups_with_one_connection_name_are_both_left_out() {
    let list = with(
        ledger(),
        &[
            ("DATASOURCE_OTHER_CONFIG_NAME", "ledger"),
            ("DATASOURCE_OTHER_TYPE", "MYSQL"),
            ("DATASOURCE_OTHER_HOST", "h"),
            ("DATASOURCE_OTHER_DATABASE", "d"),
            ("DATASOURCE_OTHER_USER", "u"),
            ("DATASOURCE_HOST", "h"),
        ],
    );
    let read = read_env_vars(list);
    assert!(read.configs.is_empty(), "{:?}", read.configs.keys());
    let groups: Vec<&str> = read.skipped.iter().map(|s| s.group.as_str()).collect();
    assert_eq!(
        groups,
        [
            "DATASOURCE_HOST",
            "DATASOURCE_LEDGER_*",
            "DATASOURCE_OTHER_*"
        ]
    );
    assert!(read.skipped[0].problems[0].contains("names no datasource"));
    for skipped in &read.skipped[1..] {
        assert_eq!(skipped.connection, "ledger");
        assert_eq!(
            skipped.problems,
            ["defined twice, by DATASOURCE_LEDGER_* and DATASOURCE_OTHER_*"]
        );
    }
}

#[test]
fn sql_server_require_with_a_password_is_warned_about_by_name_only() {
    let group = |name: &str, ssl_mode: &str, password: &str| {
        vars(&[
            (&format!("DATASOURCE_{name}_TYPE"), "SQL_SERVER"),
            (&format!("DATASOURCE_{name}_HOST"), "mssql.internal"),
            (&format!("DATASOURCE_{name}_DATABASE"), "ledger"),
            (&format!("DATASOURCE_{name}_USER"), "reader"),
            (&format!("DATASOURCE_{name}_SSLMODE"), ssl_mode),
            (&format!("DATASOURCE_{name}_PASSWORD"), password),
        ])
    };
    let mut list = group("REQUIRED", "require", SECRET);
    list.extend(group("VERIFIED", "verify-full", SECRET));
    list.extend(group("NOPASSWORD", "require", ""));
    list.extend(with(ledger(), &[("DATASOURCE_LEDGER_SSLMODE", "require")]));
    let configs = from_env_vars(list).unwrap();
    let warned: Vec<(&str, String)> = configs
        .values()
        .filter_map(|c| Some((c.name.as_str(), c.tls_warning()?)))
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    let (name, text) = &warned[0];
    assert_eq!(*name, "required");
    assert!(text.contains("\"required\""), "{text}");
    assert!(text.contains("verify-full"), "{text}");
    for secret in [SECRET, "mssql.internal", "reader"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}
