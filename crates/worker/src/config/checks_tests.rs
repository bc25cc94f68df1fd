//! Settings checked, not trusted: a log level or format, a URL scheme or a datasource the
//! Worker cannot honour is a problem naming its variable; a misspelt or upstream-only variable
//! is a warning; a secret may come from its `<NAME>_FILE`. Through `config check`, as an
//! operator runs it, and through [`Settings::from_vars`], which the start uses.

use std::path::PathBuf;

use secrecy::ExposeSecret;

use super::command;
use super::tests::with;
use super::unrecognised::UPSTREAM_ONLY;
use super::variables::{DATASOURCE_VARIABLES, VARIABLES};
use super::*;

fn check(vars: Vec<(String, String)>) -> command::Outcome {
    command::run(&["config".to_owned(), "check".to_owned()], vars).expect("a config command")
}

/// `config check` refuses, and every expected text is in what it printed; no secret is.
fn refused(extra: &[(&str, &str)], expected: &[&str], secrets: &[&str]) {
    let outcome = check(with(extra));
    assert_eq!(outcome.code, 2, "{extra:?} is not refused: {outcome:?}");
    for text in expected {
        assert!(
            outcome.stderr.contains(text),
            "{text:?} not in:\n{}",
            outcome.stderr
        );
    }
    for secret in secrets {
        assert!(
            !outcome.stderr.contains(secret),
            "{secret} printed:\n{}",
            outcome.stderr
        );
    }
}

/// `config check` says OK; returns its output.
fn accepted(extra: &[(&str, &str)]) -> String {
    let outcome = check(with(extra));
    assert_eq!(outcome.code, 0, "{extra:?} is refused: {outcome:?}");
    outcome.stdout
}

#[test]
fn an_unknown_log_level_or_format_is_a_problem() {
    refused(
        &[("LOG_LEVEL", "verbose")],
        &["LOG_LEVEL must be a level", "\"verbose\""],
        &[],
    );
    refused(
        &[("LOG_LEVEL", "info,worker=loud")],
        &["LOG_LEVEL must be a level"],
        &[],
    );
    refused(
        &[("LOG_LEVEL", "debug,chatty")],
        &["LOG_LEVEL", "\"chatty\""],
        &[],
    );
    refused(
        &[("LOG_FORMAT", "xml")],
        &["LOG_FORMAT must be json or text", "\"xml\""],
        &[],
    );
    for level in [
        "debug",
        "WARN",
        "off",
        "info,worker=debug",
        "trace,lapin=debug",
        "3",
    ] {
        accepted(&[("LOG_LEVEL", level)]);
    }
    for format in ["json", "JSON", "text"] {
        accepted(&[("LOG_FORMAT", format)]);
    }
}

#[test]
fn a_url_of_a_scheme_the_worker_does_not_speak_is_a_problem_that_repeats_no_secret() {
    refused(
        &[("DATABASE_URL", "mysql://app:db-pw-1@db/state")],
        &["DATABASE_URL must be a postgres:// or postgresql:// URL"],
        &["db-pw-1"],
    );
    refused(
        &[("DATABASE_URL", "app:db-pw-2@db/state")],
        &["DATABASE_URL must be a postgres://"],
        &["db-pw-2"],
    );
    refused(
        &[("DATABASE_URL", "postgres://app:db-pw-3@db:notaport/state")],
        &["DATABASE_URL is not a valid PostgreSQL URL"],
        &["db-pw-3"],
    );
    accepted(&[("DATABASE_URL", "postgresql://app:pw@db:5432/state")]);
    for endpoint in [
        "notaurl",
        "ftp://s3.internal",
        "http://",
        "s3.internal:9000",
    ] {
        refused(
            &[("OBJECT_STORAGE_ENDPOINT", endpoint)],
            &["OBJECT_STORAGE_ENDPOINT must be an http:// or https:// URL with a host"],
            &[],
        );
    }
    accepted(&[("OBJECT_STORAGE_ENDPOINT", "http://127.0.0.1:9000")]);
    accepted(&[(
        "OBJECT_STORAGE_ENDPOINT",
        "https://s3.eu-west-1.amazonaws.com",
    )]);
    refused(
        &[("RABBITMQ_URI", "http")],
        &["RABBITMQ_URI must be amqp or amqps"],
        &[],
    );
    refused(
        &[("RABBITMQ_URI", "mqtt://fetcher:mq-pw-1@broker:1883")],
        &["RABBITMQ_URI is not a valid amqp:// or amqps:// URI"],
        &["mq-pw-1"],
    );
    refused(
        &[("RABBITMQ_URI", "amqp://fetcher:mq-pw-2@[fd00::5]:5672/%2F")],
        &["RABBITMQ_URI's host is an IPv6 address"],
        &["mq-pw-2"],
    );
    accepted(&[(
        "RABBITMQ_URI",
        "amqps://fetcher:pw@mq.internal:5671/fetcher",
    )]);
    accepted(&[("RABBITMQ_URI", "AMQPS")]);
    for (host, problem) in [
        ("amqp://rabbitmq", "RABBITMQ_HOST must be a host, not a URL"),
        ("rabbitmq:5672", "RABBITMQ_HOST must be a host only"),
        ("[fd00::5]", "RABBITMQ_HOST is an IPv6 address"),
        ("rabbit mq", "RABBITMQ_HOST must be a host name or address"),
    ] {
        refused(&[("RABBITMQ_HOST", host)], &[problem], &[]);
    }
    accepted(&[("RABBITMQ_HOST", "10.1.2.3")]);
    refused(
        &[("MQTT_URL", "http://broker:1883")],
        &["MQTT_URL must start with mqtt:// or mqtts://"],
        &[],
    );
}

/// Why an IPv6 broker address is refused: the AMQP client's parser replaces it by `localhost`
/// (it keeps only a domain), while an IPv4 address is kept.
#[test]
fn the_amqp_client_replaces_an_ipv6_host_by_localhost() {
    let parse = |uri: &str| {
        uri.parse::<lapin::uri::AMQPUri>()
            .expect("parses")
            .authority
            .host
    };
    assert_eq!(parse("amqp://u:p@[fd00::5]:5672/%2F"), "localhost");
    assert_eq!(parse("amqp://u:p@10.1.2.3:5672/%2F"), "10.1.2.3");
}

#[test]
fn a_datasource_that_cannot_be_used_is_a_problem_naming_it_and_its_variable() {
    let ledger = [
        ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
        ("DATASOURCE_LEDGER_HOST", "ledger.internal"),
        ("DATASOURCE_LEDGER_DATABASE", "ledger"),
        ("DATASOURCE_LEDGER_USER", "reader"),
        ("DATASOURCE_LEDGER_PASSWORD", "ds-pw-1"),
    ];
    let bad = |name: &'static str, value: &'static str| {
        let mut vars = ledger.to_vec();
        vars.retain(|(n, _)| *n != name);
        if !value.is_empty() {
            vars.push((name, value));
        }
        vars
    };
    for (name, value, problem) in [
        (
            "DATASOURCE_LEDGER_TYPE",
            "CASSANDRA",
            "DATASOURCE_LEDGER_TYPE: ",
        ),
        (
            "DATASOURCE_LEDGER_HOST",
            "",
            "DATASOURCE_LEDGER_HOST is not set",
        ),
        (
            "DATASOURCE_LEDGER_DATABASE",
            "",
            "DATASOURCE_LEDGER_DATABASE is not set",
        ),
        (
            "DATASOURCE_LEDGER_PORT",
            "fivefourthreetwo",
            "DATASOURCE_LEDGER_PORT is not a port",
        ),
        (
            "DATASOURCE_LEDGER_SSLMODE",
            "sometimes",
            "DATASOURCE_LEDGER_SSLMODE: ",
        ),
    ] {
        refused(
            &bad(name, value),
            &["datasource \"ledger\"", problem],
            &["ds-pw-1"],
        );
    }
    accepted(&ledger);
    refused(
        &bad("DATASOURCE_LEDGER_TYPE", "ORACLE"),
        &["DATASOURCE_LEDGER_TYPE is ORACLE, a type this Worker has no connector for"],
        &["ds-pw-1"],
    );
}

#[test]
fn a_misspelt_or_upstream_only_variable_is_a_warning_and_nothing_else_is() {
    let out = accepted(&[
        ("RABBITMQ_NUMBER_OF_WORKERS", "8"),
        ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
        ("DATASOURCE_LEDGER_HOST", "ledger.internal"),
        ("DATASOURCE_LEDGER_DATABASE", "ledger"),
        ("DATASOURCE_LEDGER_USER", "reader"),
        ("DATASOURCE_LEDGER_SCHEMSA", "public"),
        ("DATASOURCE_LEDGER_SSL_CA", "/ca.pem"),
        ("log_level", "debug"),
        ("ENABLE_TELEMETRY", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"),
        ("DEPLOYMENT_MODE", "local"),
        ("MULTI_TENANT_ENABLED", "false"),
        ("STREAMING_BROKERS", "kafka:9092"),
        ("OBJECT_STORAGE_BUCKET_FILE", "/bucket"),
        // A machine's own environment, Kubernetes' service links, other programs' variables
        // with a shared prefix but no near name: silent.
        ("PATH", "/usr/bin"),
        ("HOME", "/root"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("RABBITMQ_SERVICE_HOST", "10.0.0.2"),
        ("RABBITMQ_PORT", "tcp://10.0.0.2:5672"),
        ("API_PORT_4008_TCP_ADDR", "10.0.0.3"),
        ("RABBITMQ_ERLANG_COOKIE", "cookie-1"),
    ]);
    for expected in [
        "RABBITMQ_NUMBER_OF_WORKERS is not a variable the Worker reads, it is ignored: did you \
         mean RABBITMQ_NUMBERS_OF_WORKERS?",
        "DATASOURCE_LEDGER_SCHEMSA is not a variable the Worker reads, it is ignored: did you \
         mean DATASOURCE_LEDGER_SCHEMAS?",
        "log_level is not a variable the Worker reads, it is ignored: did you mean LOG_LEVEL? \
         (names are case-sensitive)",
        "DATASOURCE_LEDGER_SSL_CA is ignored (upstream only: ",
        "OTEL_EXPORTER_OTLP_ENDPOINT names port 4317, OTLP's gRPC port",
        "DEPLOYMENT_MODE is ignored (upstream only: ",
        "MULTI_TENANT_ENABLED is ignored (upstream only: ",
        "STREAMING_BROKERS is ignored (upstream only: ",
        "OBJECT_STORAGE_BUCKET_FILE is ignored: only secrets are read from a file (<NAME>_FILE), \
         set OBJECT_STORAGE_BUCKET itself.",
    ] {
        assert!(out.contains(expected), "{expected:?} not in:\n{out}");
    }
    assert!(out.starts_with("configuration OK (9 warning(s))"), "{out}");
    for silent in [
        "PATH",
        "HOME",
        "KUBERNETES",
        "SERVICE",
        "RABBITMQ_PORT",
        "API_PORT",
        "COOKIE",
    ] {
        assert!(!out.contains(silent), "{silent} warned about:\n{out}");
    }
    for value in ["mongo-pw-1", "kafka:9092", "/ca.pem", "cookie-1"] {
        assert!(!out.contains(value), "{value} printed:\n{out}");
    }
}

#[test]
fn a_refusal_lists_the_warnings_that_may_explain_it() {
    let mut vars = with(&[("DATABASE_URI", "postgres://app:db-pw-4@db/state")]);
    vars.retain(|(name, _)| name != "DATABASE_URL");
    let outcome = check(vars);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("DATABASE_URL is required"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome
            .stderr
            .contains("warning: DATABASE_URI is not a variable the Worker reads, it is ignored: did you mean DATABASE_URL?"),
        "{}",
        outcome.stderr
    );
    assert!(!outcome.stderr.contains("db-pw-4"));
}

#[test]
fn no_upstream_only_name_is_one_the_worker_reads() {
    let mut read: Vec<String> = VARIABLES.iter().map(|v| v.name.to_owned()).collect();
    read.extend(
        DATASOURCE_VARIABLES
            .iter()
            .map(|v| v.name.replace("<NAME>", "LEDGER")),
    );
    for (pattern, _) in UPSTREAM_ONLY {
        let sample = pattern.replace("<NAME>", "LEDGER").replace('*', "X");
        let warned = Settings::from_vars(with(&[(sample.as_str(), "1")]))
            .expect("a warning, not a refusal")
            .warnings;
        assert!(
            warned
                .iter()
                .any(|w| w.starts_with(&format!("{sample} is ignored (upstream only"))),
            "{pattern}: {warned:?}"
        );
        let prefix = pattern.trim_end_matches('*').replace("<NAME>", "LEDGER");
        for name in &read {
            let clash = if pattern.ends_with('*') {
                name.starts_with(&prefix)
            } else {
                *name == prefix
            };
            assert!(
                !clash,
                "{name} is read by the Worker and listed upstream-only as {pattern}"
            );
        }
    }
}

/// A private directory of secret files, removed when dropped.
struct SecretDir(PathBuf);

impl SecretDir {
    fn new() -> SecretDir {
        let dir = std::env::temp_dir().join(format!("worker-secrets-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).expect("secret dir");
        SecretDir(dir)
    }

    fn file(&self, name: &str, content: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, content).expect("secret file");
        path.to_str().expect("UTF-8 path").to_owned()
    }
}

impl Drop for SecretDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_secret_is_read_from_its_file_without_the_trailing_newline() {
    let dir = SecretDir::new();
    let key = with(&[])
        .into_iter()
        .find(|(name, _)| name == "APP_ENC_KEY")
        .expect("key")
        .1;
    let key_file = dir.file("app-enc-key", &format!("{key}\n"));
    let url_file = dir.file("database-url", "postgres://app:file-pw@db/state\r\n");
    let pass_file = dir.file("rabbitmq-password", "mq file pw\n");
    let ds_file = dir.file("ledger-password", "ds-file-pw\n");
    let crm_file = dir.file("crm-hash", " crm key ");
    let mut vars = with(&[
        ("APP_ENC_KEY_FILE", key_file.as_str()),
        ("DATABASE_URL", ""),
        ("DATABASE_URL_FILE", url_file.as_str()),
        ("RABBITMQ_DEFAULT_PASS_FILE", pass_file.as_str()),
        ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
        ("DATASOURCE_LEDGER_HOST", "ledger.internal"),
        ("DATASOURCE_LEDGER_DATABASE", "ledger"),
        ("DATASOURCE_LEDGER_USER", "reader"),
        ("DATASOURCE_LEDGER_PASSWORD_FILE", ds_file.as_str()),
    ]);
    vars.retain(|(name, _)| name != "APP_ENC_KEY");
    vars.push((format!("{}_FILE", crypto::CRM_HASH_KEY_VAR), crm_file));
    let settings = Settings::from_vars(vars.clone()).expect("valid");
    assert_eq!(
        settings.database().expect("postgres").url.expose_secret(),
        "postgres://app:file-pw@db/state"
    );
    assert_eq!(
        settings.amqp.uri.expose_secret(),
        "amqp://guest:mq%20file%20pw@127.0.0.1:5672/%2F"
    );
    assert_eq!(
        settings.datasources["ledger"].password.expose(),
        "ds-file-pw"
    );
    assert_eq!(settings.engine.crm.hash_key.as_str(), " crm key ");
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    assert_eq!(check(vars).code, 0);
}

#[test]
fn a_secret_set_twice_or_whose_file_cannot_be_read_is_a_problem_naming_the_path_not_the_content() {
    let dir = SecretDir::new();
    let both = dir.file("mqtt-password", "file-pw-1\n");
    let empty = dir.file("s3-secret", "\n");
    let missing = dir.0.join("no-such-file");
    let missing = missing.to_str().expect("UTF-8 path");
    let directory = dir.0.to_str().expect("UTF-8 path");
    let outcome = check(with(&[
        ("MQTT_URL", "mqtt://broker:1883"),
        ("MQTT_PASSWORD", "env-pw-1"),
        ("MQTT_PASSWORD_FILE", both.as_str()),
        ("DATABASE_URL_FILE", missing),
        ("DATABASE_URL", " "),
        ("APP_ENC_KEY_FILE", directory),
        ("APP_ENC_KEY", ""),
        ("OBJECT_STORAGE_ACCESS_KEY_ID", "AKIA"),
        ("OBJECT_STORAGE_SECRET_KEY_FILE", empty.as_str()),
    ]));
    assert_eq!(outcome.code, 2, "{outcome:?}");
    let text = outcome.stderr;
    for expected in [
        "MQTT_PASSWORD and MQTT_PASSWORD_FILE are both set".to_owned(),
        format!("DATABASE_URL_FILE names {missing:?}, which cannot be read: "),
        format!("APP_ENC_KEY_FILE names {directory:?}, which cannot be read: "),
        format!(
            "OBJECT_STORAGE_SECRET_KEY_FILE names {:?}, which is empty",
            empty
        ),
    ] {
        assert!(text.contains(&expected), "{expected:?} not in:\n{text}");
    }
    assert!(!text.contains("DATABASE_URL is required"), "{text}");
    assert!(!text.contains("APP_ENC_KEY is required"), "{text}");
    for secret in ["file-pw-1", "env-pw-1"] {
        assert!(!text.contains(secret), "{secret} printed:\n{text}");
    }
}

#[test]
fn the_runtimes_threads_are_a_whole_number_from_1_to_1024_never_echoed() {
    use super::checks::runtime_threads;
    assert_eq!(runtime_threads(None), Ok(None));
    assert_eq!(runtime_threads(Some("  ")), Ok(None));
    assert_eq!(runtime_threads(Some("1")), Ok(Some(1)));
    assert_eq!(runtime_threads(Some(" 4 ")), Ok(Some(4)));
    assert_eq!(runtime_threads(Some("1024")), Ok(Some(1024)));
    for bad in ["0", "-1", "1025", "two", "1.5", "99999999999999999999999"] {
        // The same words whatever the value: it is never echoed.
        assert_eq!(
            runtime_threads(Some(bad)),
            Err(
                "TOKIO_WORKER_THREADS must be a whole number of threads from 1 to 1024 \
                 (unset: one per core available)"
                    .to_owned()
            ),
            "{bad}"
        );
    }
}
