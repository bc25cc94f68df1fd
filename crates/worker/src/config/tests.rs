//! Settings from variables: defaults, the upstream names, and refusals that list every problem.

use super::*;

const KEY: &str = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8=";

pub(super) fn minimal() -> Vec<(String, String)> {
    [
        ("APP_ENC_KEY", KEY),
        ("STREAMING_ENABLED", "true"),
        ("RABBITMQ_JOB_EVENTS_EXCHANGE", "fetcher.job.events"),
        ("STREAMING_CLOUDEVENTS_SOURCE", "//lerian/fetcher"),
        (
            "DATABASE_URL",
            "postgres://app:db-secret-pw@db.internal/state",
        ),
        ("OBJECT_STORAGE_BUCKET", "results"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

pub(super) fn with(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut vars = minimal();
    for (k, v) in extra {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_string(), v.to_string()));
    }
    vars
}

fn problems(vars: Vec<(String, String)>) -> Vec<String> {
    Settings::from_vars(vars)
        .expect_err("must be refused")
        .problems
}

#[test]
fn defaults_follow_the_contract() {
    let s = Settings::from_vars(minimal()).expect("valid");
    assert_eq!(s.amqp.work_queue, "fetcher.extract-external-data.queue");
    assert_eq!(s.amqp.consumers, 5);
    assert_eq!(s.http.port, 4007);
    assert_eq!(s.shutdown.readyz_drain_delay, Duration::from_secs(12));
    assert_eq!(s.engine.max_result_bytes, 268_435_456);
    assert_eq!(s.outbox.repair_interval, Duration::from_secs(30));
    assert_eq!(s.storage.region, "us-east-1");
    assert_eq!(s.key_version, "1");
    assert!(s.database().expect("postgres").run_migrations);
    assert!(!s.amqp.allow_legacy_body_signature);
    use secrecy::ExposeSecret;
    assert_eq!(
        s.amqp.uri.expose_secret(),
        "amqp://guest:guest@127.0.0.1:5672/%2F"
    );
}

#[test]
fn rabbitmq_uri_is_built_from_its_parts() {
    let s = Settings::from_vars(with(&[
        ("RABBITMQ_URI", "amqps"),
        ("RABBITMQ_HOST", "mq.internal"),
        ("RABBITMQ_PORT_AMQP", "5671"),
        ("RABBITMQ_DEFAULT_USER", "fetcher"),
        ("RABBITMQ_DEFAULT_PASS", "p@ss word"),
        ("RABBITMQ_NUMBERS_OF_WORKERS", "0"),
    ]))
    .expect("valid");
    use secrecy::ExposeSecret;
    assert_eq!(
        s.amqp.uri.expose_secret(),
        "amqps://fetcher:p%40ss%20word@mq.internal:5671/%2F"
    );
    assert_eq!(s.amqp.consumers, 5, "≤0 means 5");
}

#[test]
fn every_problem_is_reported_at_once() {
    let vars = vec![
        ("APP_ENC_KEY".to_owned(), "not base64!!".to_owned()),
        ("RABBITMQ_PORT_AMQP".to_owned(), "99999".to_owned()),
        (
            "OBJECT_STORAGE_ACCESS_KEY_ID".to_owned(),
            "AKIA-ONLY".to_owned(),
        ),
    ];
    let found = problems(vars);
    let text = found.join("\n");
    for expected in [
        "APP_ENC_KEY",
        "STREAMING_ENABLED must be true",
        "RABBITMQ_JOB_EVENTS_EXCHANGE is required",
        "STREAMING_CLOUDEVENTS_SOURCE is required",
        "DATABASE_URL is required",
        "OBJECT_STORAGE_BUCKET is required",
        "RABBITMQ_PORT_AMQP must be a port number from 1 to 65535",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(
        !text.contains("not base64!!"),
        "the key value leaked:\n{text}"
    );
}

#[test]
fn partial_s3_credentials_are_refused() {
    let text = problems(with(&[("OBJECT_STORAGE_SECRET_KEY", "s3-secret")])).join("\n");
    assert!(text.contains("must be set together"), "{text}");
    assert!(!text.contains("s3-secret"));
}

#[test]
fn result_payloads_are_unsigned_unless_asked_and_the_setting_is_checked() {
    let unsigned = Settings::from_vars(minimal()).expect("valid");
    assert!(!unsigned.storage.sign_payload);
    let signed =
        Settings::from_vars(with(&[("OBJECT_STORAGE_SIGN_PAYLOAD", "true")])).expect("valid");
    assert!(signed.storage.sign_payload);
    let text = problems(with(&[("OBJECT_STORAGE_SIGN_PAYLOAD", "sometimes")])).join("\n");
    assert!(text.contains("OBJECT_STORAGE_SIGN_PAYLOAD"), "{text}");
}

#[test]
fn streaming_must_be_enabled_and_the_exchange_set() {
    let text = problems(with(&[
        ("STREAMING_ENABLED", "false"),
        ("RABBITMQ_JOB_EVENTS_EXCHANGE", " "),
    ]))
    .join("\n");
    assert!(text.contains("STREAMING_ENABLED must be true"), "{text}");
    assert!(
        text.contains("RABBITMQ_JOB_EVENTS_EXCHANGE is required"),
        "{text}"
    );
}

#[test]
fn the_control_api_and_the_health_server_never_share_a_port() {
    let text = problems(with(&[("API_PORT", "4007")])).join("\n");
    assert!(
        text.contains("API_PORT must differ from HEALTH_PORT"),
        "{text}"
    );
    // The default (4008) differs, and a disabled API has no port to clash.
    assert!(Settings::from_vars(minimal()).is_ok());
    assert!(Settings::from_vars(with(&[("API_PORT", "4007"), ("API_ENABLED", "false")])).is_ok());
}

#[test]
fn no_secret_appears_in_debug_or_errors() {
    let s = Settings::from_vars(with(&[
        ("OBJECT_STORAGE_ACCESS_KEY_ID", "AKIAEXAMPLE"),
        ("OBJECT_STORAGE_SECRET_KEY", "s3-very-secret"),
        ("RABBITMQ_DEFAULT_PASS", "mq-very-secret"),
        ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
        ("DATASOURCE_LEDGER_HOST", "ledger.internal"),
        ("DATASOURCE_LEDGER_DATABASE", "ledger"),
        ("DATASOURCE_LEDGER_USER", "reader"),
        ("DATASOURCE_LEDGER_PASSWORD", "ds-very-secret"),
    ]))
    .expect("valid");
    let debug = format!("{s:?}");
    for secret in [
        KEY,
        "s3-very-secret",
        "mq-very-secret",
        "ds-very-secret",
        "db-secret-pw",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked in Debug");
    }
    assert!(s.datasources.contains_key("ledger"));
}

#[test]
fn a_spill_directory_that_takes_no_file_is_refused_naming_the_variable() {
    let writable = std::env::temp_dir();
    let path = writable.display().to_string();
    let s = Settings::from_vars(with(&[("ENGINE_SPILL_DIR", &path)])).expect("valid");
    assert_eq!(s.engine.spill_dir, writable);

    // sysfs is a directory that refuses new files even to root, as the tests run.
    let refused = problems(with(&[("ENGINE_SPILL_DIR", "/sys")]));
    assert!(
        refused.iter().any(|p| p
            .contains("ENGINE_SPILL_DIR \"/sys\" must be a writable directory")
            && p.contains("Permission denied")),
        "{refused:?}"
    );
    let missing = problems(with(&[("ENGINE_SPILL_DIR", "/nonexistent/fetcher-spill")]));
    assert!(
        missing.iter().any(|p| p
            == "ENGINE_SPILL_DIR \"/nonexistent/fetcher-spill\" must be an existing directory"),
        "{missing:?}"
    );
}
