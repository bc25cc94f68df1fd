//! The state backend: which one the environment chooses, the Manager mode's `MONGO_*` read with
//! upstream's meaning, and its password never printed.

use base64::Engine as _;
use secrecy::ExposeSecret;

use super::command;
use super::tests::{minimal, with};
use super::*;

const PASSWORD: &str = "mongo-secret p@ss";

/// The chart's Manager-mode variables, TLS on, without `DATABASE_URL`.
fn manager_mode(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut vars = with(&[
        ("MONGO_URI", "mongodb"),
        ("MONGO_HOST", "fetcher-mongodb"),
        ("MONGO_NAME", "Fetcher-DB"),
        ("MONGO_USER", "fetcher"),
        ("MONGO_PASSWORD", PASSWORD),
        ("MONGO_PORT", "5709"),
        ("MONGO_PARAMETERS", "authSource=admin&tls=true"),
    ]);
    vars.retain(|(name, _)| name != "DATABASE_URL");
    for (k, v) in extra {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_string(), v.to_string()));
    }
    vars
}

fn mongo(settings: &Settings) -> &MongoSettings {
    match &settings.state {
        StateSettings::MongoDb(mongo) => mongo,
        other => panic!("not the Manager mode: {other:?}"),
    }
}

fn refused(vars: Vec<(String, String)>) -> ConfigError {
    Settings::from_vars(vars).expect_err("must be refused")
}

#[test]
fn mongo_variables_without_a_database_url_choose_the_manager_mode() {
    let settings = Settings::from_vars(manager_mode(&[])).expect("valid");
    assert_eq!(settings.state.name(), "mongodb");
    assert_eq!(settings.state_chosen_by, StateChoice::Environment);
    assert!(settings.database().is_none());
    let mongo = mongo(&settings);
    assert_eq!(
        mongo.uri.expose_secret(),
        "mongodb://fetcher:mongo-secret%20p%40ss@fetcher-mongodb:5709/?authSource=admin&tls=true"
    );
    assert_eq!(
        mongo.name, "Fetcher-DB",
        "as given; the store lower-cases it for jobs"
    );
    assert_eq!(mongo.max_pool_size, 100);
    assert!(mongo.tls);
    assert!(mongo.tls_ca_pem.is_none());
}

#[test]
fn a_database_url_without_mongo_variables_is_the_postgres_backend() {
    let settings = Settings::from_vars(minimal()).expect("valid");
    assert_eq!(settings.state.name(), "postgres");
    assert_eq!(settings.state_chosen_by, StateChoice::Environment);
    assert_eq!(
        settings.database().expect("postgres").url.expose_secret(),
        "postgres://app:db-secret-pw@db.internal/state"
    );
}

#[test]
fn both_backends_configured_need_state_backend_to_choose() {
    let mut both = manager_mode(&[]);
    both.push(("DATABASE_URL".into(), "postgres://app@db/state".into()));
    let error = refused(both.clone());
    assert_eq!(error.problems.len(), 1, "{error}");
    assert!(
        error.problems[0].contains("set STATE_BACKEND=postgres")
            && error.problems[0].contains("STATE_BACKEND=mongodb"),
        "{error}"
    );

    for (backend, name) in [("postgres", "postgres"), ("MongoDB", "mongodb")] {
        let mut chosen = both.clone();
        chosen.push(("STATE_BACKEND".into(), backend.into()));
        let settings = Settings::from_vars(chosen).expect(backend);
        assert_eq!(settings.state.name(), name);
        assert_eq!(settings.state_chosen_by, StateChoice::Variable);
    }
}

#[test]
fn an_unknown_state_backend_is_a_problem() {
    let error = refused(with(&[("STATE_BACKEND", "mysql")]));
    assert_eq!(
        error.problems,
        ["STATE_BACKEND must be postgres or mongodb"]
    );
}

#[test]
fn state_backend_mongodb_requires_the_host_and_the_name() {
    let error = refused(with(&[("STATE_BACKEND", "mongodb")]));
    for name in ["MONGO_HOST", "MONGO_NAME"] {
        assert!(
            error.problems.iter().any(|p| p.starts_with(name)),
            "{name}: {error}"
        );
    }
}

#[test]
fn a_plaintext_connection_needs_allow_insecure_tls_as_lib_commons_does() {
    let plain = manager_mode(&[("MONGO_PARAMETERS", "authSource=admin")]);
    let error = refused(plain.clone());
    assert!(
        error.problems[0].contains("ALLOW_INSECURE_TLS=true"),
        "{error}"
    );

    for spelling in ["true", "ON", "1", "yes"] {
        let mut allowed = plain.clone();
        allowed.push(("ALLOW_INSECURE_TLS".into(), spelling.into()));
        let settings = Settings::from_vars(allowed).expect(spelling);
        assert!(!mongo(&settings).tls);
        assert!(
            settings.warnings.iter().any(|w| w.contains("without TLS")),
            "{:?}",
            settings.warnings
        );
    }

    // Upstream reads any other text as false; so does this Worker, saying so.
    let mut reason = plain;
    reason.push(("ALLOW_INSECURE_TLS".into(), "local compose".into()));
    let error = refused(reason);
    assert!(error.problems[0].contains("without TLS"), "{error}");
    let settings = Settings::from_vars(manager_mode(&[("ALLOW_INSECURE_TLS", "local compose")]))
        .expect("TLS is on");
    assert!(
        settings
            .warnings
            .iter()
            .any(|w| w.starts_with("ALLOW_INSECURE_TLS is not true or false")),
        "{:?}",
        settings.warnings
    );
}

#[test]
fn a_ca_certificate_turns_tls_on_and_a_bad_one_is_a_problem() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let encoded = base64::engine::general_purpose::STANDARD.encode(pem);
    let settings = Settings::from_vars(manager_mode(&[
        ("MONGO_PARAMETERS", ""),
        ("MONGO_TLS_CA_CERT", &encoded),
    ]))
    .expect("valid");
    assert!(mongo(&settings).tls);
    assert_eq!(mongo(&settings).tls_ca_pem.as_deref(), Some(pem.as_bytes()));

    let not_base64 = refused(manager_mode(&[("MONGO_TLS_CA_CERT", "%%%")]));
    assert!(
        not_base64.problems[0].starts_with("MONGO_TLS_CA_CERT must be standard base64"),
        "{not_base64}"
    );
    let no_pem = base64::engine::general_purpose::STANDARD.encode("just text");
    let no_pem = refused(manager_mode(&[("MONGO_TLS_CA_CERT", &no_pem)]));
    assert!(
        no_pem.problems[0].starts_with("MONGO_TLS_CA_CERT decodes to no PEM certificate"),
        "{no_pem}"
    );
}

#[test]
fn the_upstream_defaults_and_gaps_are_filled_as_documented() {
    let settings = Settings::from_vars(manager_mode(&[
        ("MONGO_URI", ""),
        ("MONGO_PORT", ""),
        ("MONGO_USER", ""),
        ("MONGO_PASSWORD", ""),
        ("MONGO_MAX_POOL_SIZE", "0"),
    ]))
    .expect("valid");
    let mongo = mongo(&settings);
    assert_eq!(
        mongo.uri.expose_secret(),
        "mongodb://fetcher-mongodb:27017/?authSource=admin&tls=true"
    );
    assert_eq!(mongo.max_pool_size, 100, "≤0 means 100, as upstream");
    assert!(settings
        .warnings
        .iter()
        .any(|w| w.starts_with("MONGO_MAX_POOL_SIZE is 0")));
}

#[test]
fn mongo_values_upstream_would_misread_are_problems() {
    let cases: [(&[(&str, &str)], &str); 7] = [
        (
            &[("MONGO_URI", "mongodb+srv")],
            "MONGO_URI=mongodb+srv needs DNS SRV",
        ),
        (
            &[("MONGO_URI", "mongodb://h:1")],
            "MONGO_URI must be the scheme",
        ),
        (
            &[("MONGO_USER", "")],
            "MONGO_PASSWORD is set without MONGO_USER",
        ),
        (&[("MONGO_PORT", "0")], "MONGO_PORT must be a port number"),
        (
            &[("MONGO_MAX_POOL_SIZE", "1001")],
            "MONGO_MAX_POOL_SIZE must be",
        ),
        (
            &[("MONGO_HOST", "mongo:27017/admin")],
            "MONGO_HOST must be a host",
        ),
        (
            &[("MONGO_NAME", "fetcher.db")],
            "MONGO_NAME must be a MongoDB database name",
        ),
    ];
    for (extra, expected) in cases {
        let error = refused(manager_mode(extra));
        assert!(
            error.problems.iter().any(|p| p.starts_with(expected)),
            "{extra:?}: {error}"
        );
        assert!(!error.to_string().contains(PASSWORD), "{error}");
    }
    let odd = refused(manager_mode(&[(
        "MONGO_PARAMETERS",
        "tls=true&maxPoolSize=lots",
    )]));
    assert!(
        odd.problems[0].starts_with("MONGO_HOST, MONGO_PORT and MONGO_PARAMETERS do not make"),
        "{odd}"
    );
    assert!(!odd.to_string().contains("secret"), "{odd}");
}

#[test]
fn the_password_is_never_printed_and_may_come_from_a_file() {
    let dir = std::env::temp_dir().join(format!("mongo-secret-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir(&dir).expect("dir");
    let file = dir.join("mongo-password");
    std::fs::write(&file, format!("{PASSWORD}\n")).expect("secret file");
    let mut vars = manager_mode(&[("MONGO_PASSWORD", "")]);
    vars.push((
        "MONGO_PASSWORD_FILE".into(),
        file.to_str().expect("UTF-8").into(),
    ));
    let settings = Settings::from_vars(vars.clone()).expect("valid");
    assert!(mongo(&settings)
        .uri
        .expose_secret()
        .contains("mongo-secret%20p%40ss@"));
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    let printed = format!("{settings:?}");
    for form in [PASSWORD, "mongo-secret%20p%40ss"] {
        assert!(!printed.contains(form), "{printed}");
    }
    let checked =
        command::run(&["config".to_owned(), "check".to_owned()], vars).expect("a config command");
    assert_eq!(checked.code, 0, "{checked:?}");
    assert!(
        checked
            .stdout
            .contains("state backend: mongodb (chosen by the environment"),
        "{checked:?}"
    );
    assert!(!checked.stdout.contains("mongo-secret"), "{checked:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_check_reports_a_backend_state_backend_chose() {
    let checked = command::run(
        &["config".to_owned(), "check".to_owned()],
        with(&[("STATE_BACKEND", "postgres"), ("MONGO_HOST", "unused")]),
    )
    .expect("a config command");
    assert_eq!(checked.code, 0, "{checked:?}");
    assert!(
        checked
            .stdout
            .contains("state backend: postgres (set by STATE_BACKEND)"),
        "{checked:?}"
    );
}

#[test]
fn the_manager_mode_serves_the_control_api_only_when_asked_and_refuses_what_it_lacks() {
    let settings = Settings::from_vars(manager_mode(&[])).expect("valid");
    assert_eq!(
        settings.http.api_port, None,
        "the Manager's GET is the authority; upstream's Worker has no control API"
    );
    let asked = Settings::from_vars(manager_mode(&[
        ("API_ENABLED", "true"),
        ("API_PORT", "4100"),
    ]))
    .expect("the control API is served in the Manager mode when asked for");
    assert_eq!(asked.http.api_port, Some(4100));
    for (name, value) in [
        ("RESULT_RETENTION_DAYS", "30"),
        ("JOB_RETENTION_DAYS", "90"),
    ] {
        let error = refused(manager_mode(&[(name, value)]));
        assert_eq!(error.problems.len(), 1, "{name}: {error}");
        let problem = &error.problems[0];
        assert!(
            problem.starts_with(&format!("{name} is set, but "))
                && problem.contains("Manager mode"),
            "{name}: {problem}"
        );
    }
    // The MQTT mirror runs in the Manager mode, on a collection of its own.
    let mirrored =
        Settings::from_vars(manager_mode(&[("MQTT_URL", "mqtt://broker.internal:1883")]))
            .expect("the MQTT mirror is served in the Manager mode");
    assert!(mirrored.mqtt.is_some());
    // The PostgreSQL backend keeps its defaults: the control API on.
    let postgres = Settings::from_vars(minimal()).expect("valid");
    assert!(postgres.http.api_port.is_some());
}

#[test]
fn the_manager_outboxs_two_windows_default_to_lib_commons_and_are_bounded() {
    let settings = Settings::from_vars(manager_mode(&[])).expect("valid");
    assert_eq!(
        (
            settings.outbox.manager_claim_timeout,
            settings.outbox.manager_retry_after
        ),
        (Duration::from_secs(600), Duration::from_secs(300)),
        "lib-commons' ProcessingTimeout and RetryWindow"
    );
    let set = Settings::from_vars(manager_mode(&[
        ("MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC", "10"),
        ("MANAGER_OUTBOX_RETRY_AFTER_SEC", "86400"),
    ]))
    .expect("valid");
    assert_eq!(set.outbox.manager_claim_timeout, Duration::from_secs(10));
    assert_eq!(set.outbox.manager_retry_after, Duration::from_secs(86_400));
    let claim = "MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC must be a whole number from 10 to 86400 seconds";
    let retry = "MANAGER_OUTBOX_RETRY_AFTER_SEC must be a whole number from 1 to 86400 seconds";
    for (name, value, expected) in [
        ("MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC", "9", claim),
        ("MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC", "86401", claim),
        ("MANAGER_OUTBOX_RETRY_AFTER_SEC", "86401", retry),
        ("MANAGER_OUTBOX_RETRY_AFTER_SEC", "5m", retry),
    ] {
        let error = refused(manager_mode(&[(name, value)]));
        assert_eq!(error.problems, [expected], "{name}={value}");
    }
    // At 0 or below, the default with a warning (lib-commons' `normalize` does the same).
    let zero = Settings::from_vars(manager_mode(&[("MANAGER_OUTBOX_RETRY_AFTER_SEC", "0")]));
    let zero = zero.expect("valid");
    assert_eq!(zero.outbox.manager_retry_after, Duration::from_secs(300));
    assert!(zero
        .warnings
        .iter()
        .any(|w| w.starts_with("MANAGER_OUTBOX_RETRY_AFTER_SEC is 0")));
    // Harmless beside PostgreSQL: read and checked, never used.
    assert!(Settings::from_vars(with(&[("MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC", "60")])).is_ok());
}
