//! The configuration reference against the reader, `docs/configuration.md` and
//! `deploy/worker.env.example`: a variable read but not listed, listed but not read, or documented
//! with another default fails here, and so does the document's table or the example once it
//! drifts from the list. With
//! `UPDATE_CONFIG_REFERENCE=1` (`make config-reference`) the drifted files are rewritten instead.

use std::path::PathBuf;

use secrecy::ExposeSecret;

use super::command;
use super::tests::{minimal, with};
use super::variables::{DefaultValue, VARIABLES};
use super::*;

/// The configuration document's generated section lies between these lines.
const BEGIN: &str = "<!-- config-reference:begin (generated: make config-reference) -->\n";
const END: &str = "<!-- config-reference:end -->";

fn repository(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Compares a generated file with the committed one, or rewrites it when asked to.
fn same_or_update(path: &str, committed: &str, generated: &str, whole_file: &str) {
    if committed == generated {
        return;
    }
    if std::env::var_os("UPDATE_CONFIG_REFERENCE").is_some() {
        std::fs::write(repository(path), whole_file).expect("rewrite");
        return;
    }
    panic!(
        "{path} differs from the configuration reference in crates/worker/src/config/\
         variables.rs; run `make config-reference`.\n--- committed\n{committed}\n--- generated\n\
         {generated}"
    );
}

#[test]
fn the_configuration_documents_table_is_the_reference() {
    let path = "docs/configuration.md";
    let document = std::fs::read_to_string(repository(path)).expect(path);
    let start = document
        .find(BEGIN)
        .unwrap_or_else(|| panic!("{path} has no begin marker"))
        + BEGIN.len();
    let end = document[start..]
        .find(END)
        .unwrap_or_else(|| panic!("{path} has no end marker"))
        + start;
    let generated = markdown();
    let whole = format!("{}{generated}{}", &document[..start], &document[end..]);
    same_or_update(path, &document[start..end], &generated, &whole);
}

#[test]
fn env_example_is_the_reference() {
    let path = "deploy/worker.env.example";
    let committed = std::fs::read_to_string(repository(path)).expect("the example");
    let generated = env_example();
    same_or_update(path, &committed, &generated, &generated);
}

/// Every optional feature on, so the reader asks for every variable it knows.
fn everything() -> Vec<(String, String)> {
    with(&[
        ("MQTT_URL", "mqtt://127.0.0.1:1883"),
        ("OBJECT_STORAGE_ACCESS_KEY_ID", "id"),
        ("OBJECT_STORAGE_SECRET_KEY", "secret"),
        ("WORKER_ID", "reference"),
        ("ENABLE_TELEMETRY", "true"),
        // The Manager mode's variables are read (and checked) whatever the backend; set to
        // their defaults with DATABASE_URL, they would make the backend ambiguous.
        ("STATE_BACKEND", "postgres"),
    ])
}

#[test]
fn the_reference_lists_every_variable_the_reader_reads_and_no_other() {
    let vars: BTreeMap<String, String> = everything().into_iter().collect();
    let mut reader = reader::Reader::new(&vars);
    reader::read(&mut reader, &vars).expect("valid");
    let mut read = reader.names_read();
    read.sort_unstable();
    read.dedup();
    let mut listed: Vec<String> = VARIABLES.iter().map(|v| v.name.to_owned()).collect();
    listed.sort_unstable();
    assert_eq!(read, listed);
}

/// Everything a reading decided, the secrets' values included.
fn decided(settings: &Settings) -> String {
    format!(
        "{settings:?} {} {}",
        settings.amqp.uri.expose_secret(),
        settings
            .database()
            .map(|d| d.url.expose_secret())
            .unwrap_or_default()
    )
}

#[test]
fn a_variable_set_to_its_documented_default_decides_what_unset_does() {
    let unset = decided(&Settings::from_vars(everything()).expect("valid"));
    for variable in VARIABLES {
        let default = match variable.default {
            DefaultValue::Value(value) => value.to_owned(),
            DefaultValue::Number(spec) => spec.default.to_string(),
            DefaultValue::Required | DefaultValue::Unset(_) => continue,
        };
        let mut vars = everything();
        vars.retain(|(name, _)| name != variable.name);
        let unset_here = decided(&Settings::from_vars(vars.clone()).expect("valid"));
        vars.push((variable.name.to_owned(), default.clone()));
        let set = Settings::from_vars(vars)
            .unwrap_or_else(|e| panic!("{}={default:?} is refused: {e}", variable.name));
        assert_eq!(
            decided(&set),
            unset_here,
            "{}: its documented default {default:?} is not what unset means",
            variable.name
        );
        let _ = &unset;
    }
}

#[test]
fn a_required_variable_unset_is_a_problem_naming_it() {
    for variable in VARIABLES {
        if !matches!(variable.default, DefaultValue::Required) {
            continue;
        }
        let mut vars = minimal();
        vars.retain(|(name, _)| name != variable.name);
        let refused = Settings::from_vars(vars).expect_err(variable.name);
        assert!(
            refused
                .problems
                .iter()
                .any(|p| p.starts_with(variable.name)),
            "{}: {:?}",
            variable.name,
            refused.problems
        );
    }
}

#[test]
fn the_example_with_its_secrets_filled_in_is_a_valid_configuration() {
    let mut vars: Vec<(String, String)> = env_example()
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for (name, value) in &mut vars {
        if name == "APP_ENC_KEY" {
            *value = minimal()[0].1.clone();
        } else if name == "DATABASE_URL" {
            *value = "postgres://fetcher@postgres/fetcher".to_owned();
        } else if name.ends_with("PASSWORD") || name.ends_with("_PASS") {
            *value = "filled-in".to_owned();
        }
    }
    let settings = Settings::from_vars(vars).expect("the example is valid");
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    assert!(settings.datasources.contains_key("ledger"));
}

#[test]
fn the_example_and_the_table_show_no_secret_value() {
    let example = env_example();
    for variable in VARIABLES.iter().filter(|v| v.secret) {
        let line = example
            .lines()
            .find(|line| {
                line.trim_start_matches("# ")
                    .starts_with(&format!("{}=", variable.name))
            })
            .unwrap_or_else(|| panic!("{} is not in the example", variable.name));
        assert!(line.ends_with('='), "{line}");
    }
    assert!(markdown().contains("`RABBITMQ_DEFAULT_PASS` | `guest` | broker password (secret"));
}

fn run(args: &[&str], vars: Vec<(String, String)>) -> command::Outcome {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    command::run(&args, vars).expect("a config command")
}

#[test]
fn config_check_says_ok_or_lists_every_problem_without_a_value() {
    let ok = run(&["config", "check"], with(&[("HEALTH_PORT", "0")]));
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(
        ok.stdout.starts_with("configuration OK (1 warning(s))"),
        "{ok:?}"
    );
    assert!(ok.stdout.contains("HEALTH_PORT is 0"), "{ok:?}");

    let mut vars = with(&[
        ("JOB_LEASE_SEC", "ten"),
        ("APP_ENC_KEY", "not-base64-secret!!"),
        ("MQTT_URL", "mqtt://user:mqtt-secret-pw@host"),
    ]);
    vars.retain(|(name, _)| name != "OBJECT_STORAGE_BUCKET");
    let refused = run(&["config", "check"], vars);
    assert_eq!(refused.code, 2);
    assert!(refused.stdout.is_empty());
    for name in [
        "JOB_LEASE_SEC",
        "APP_ENC_KEY",
        "MQTT_URL",
        "OBJECT_STORAGE_BUCKET",
    ] {
        assert!(refused.stderr.contains(name), "{name}: {}", refused.stderr);
    }
    for secret in ["not-base64-secret", "mqtt-secret-pw", "db-secret-pw"] {
        assert!(!refused.stderr.contains(secret), "{}", refused.stderr);
    }
}

#[test]
fn config_reference_prints_the_table_or_the_example_and_other_arguments_start_the_worker() {
    assert_eq!(run(&["config", "reference"], vec![]).stdout, markdown());
    let example = run(&["config", "reference", "--env-example"], vec![]);
    assert_eq!((example.code, example.stdout), (0, env_example()));
    assert_eq!(run(&["config", "frobnicate"], vec![]).code, 2);
    assert!(command::run(&[], vec![]).is_none());
    assert!(command::run(&["--anything".to_owned()], vec![]).is_none());
}
