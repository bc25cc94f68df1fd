//! The walk: every numeric variable at 0, -1, a huge number and a word is either refused with
//! the others or replaced by its default with a warning. Never a panic, never taken as given.

use super::tests::{minimal, with};
use super::*;

/// Every numeric variable the Worker reads, listed here from the configuration table
/// (`docs/configuration.md`) rather than taken from the reader, so a new one the walk does not
/// know fails
/// [`the_walk_knows_every_numeric_variable`].
const NUMERIC: [&str; 29] = [
    "RABBITMQ_PORT_AMQP",
    "RABBITMQ_NUMBERS_OF_WORKERS",
    "RABBITMQ_MAX_MESSAGE_BYTES",
    "RABBITMQ_SIGNATURE_MAX_AGE_SEC",
    "EVENT_MAX_METADATA_BYTES",
    "DATABASE_MAX_CONNECTIONS",
    "MONGO_PORT",
    "MONGO_MAX_POOL_SIZE",
    "ENGINE_MAX_RESULT_BYTES",
    "ENGINE_EXTRACTION_TIMEOUT_SEC",
    "JOB_RETRY_ATTEMPTS",
    "JOB_RETRY_BACKOFF_MS",
    "JOB_RETRY_BACKOFF_MAX_MS",
    "JOB_LEASE_SEC",
    "OBJECT_STORAGE_RETRY_SEC",
    "OUTBOX_REPAIR_INTERVAL_SEC",
    "OUTBOX_REPAIR_BATCH",
    "OUTBOX_REPAIR_GRACE_SEC",
    "MANAGER_OUTBOX_CLAIM_TIMEOUT_SEC",
    "MANAGER_OUTBOX_RETRY_AFTER_SEC",
    "OUTBOX_RETENTION_HOURS",
    "RESULT_RETENTION_DAYS",
    "JOB_RETENTION_DAYS",
    "RETENTION_INTERVAL_SEC",
    "HEALTH_PORT",
    "API_PORT",
    "READYZ_DRAIN_DELAY_SEC",
    "SHUTDOWN_GRACE_SEC",
    "MQTT_KEEP_ALIVE_SEC",
];

const VALUES: [&str; 4] = ["0", "-1", "99999999999999999999", "ten"];

/// The numeric variables for which 0 is a value of their own (their default), taken as given.
const ZERO_TAKEN: [&str; 1] = ["JOB_RETRY_ATTEMPTS"];

/// The minimal environment with a fixed `WORKER_ID`, so two readings compare equal, and the
/// backend named, so a `MONGO_*` variable walked does not make it ambiguous.
fn base(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut vars = with(&[("WORKER_ID", "walk"), ("STATE_BACKEND", "postgres")]);
    for (k, v) in extra {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_string(), v.to_string()));
    }
    vars
}

/// Everything a reading decided, warnings aside.
fn decided(mut settings: Settings) -> String {
    settings.warnings.clear();
    format!("{settings:?}")
}

#[test]
fn the_walk_knows_every_numeric_variable() {
    let vars: BTreeMap<String, String> = minimal().into_iter().collect();
    let mut reader = reader::Reader::new(&vars);
    reader::read(&mut reader, &vars).expect("the minimal environment is valid");
    let mut read: Vec<&str> = reader.numbers_read().to_vec();
    read.sort_unstable();
    let mut listed = NUMERIC.to_vec();
    listed.sort_unstable();
    assert_eq!(read, listed);
}

#[test]
fn every_numeric_variable_at_zero_negative_huge_or_a_word_is_refused_or_defaulted_with_a_warning() {
    let defaults = decided(Settings::from_vars(base(&[])).expect("valid"));
    for name in NUMERIC {
        for value in VALUES {
            if value == "0" && ZERO_TAKEN.contains(&name) {
                let settings = Settings::from_vars(base(&[(name, value)])).expect("0 is valid");
                assert!(
                    settings.warnings.is_empty(),
                    "{name}=0: {:?}",
                    settings.warnings
                );
                assert_eq!(decided(settings), defaults, "{name}=0 is its default");
                continue;
            }
            let outcome = std::panic::catch_unwind(|| Settings::from_vars(base(&[(name, value)])))
                .unwrap_or_else(|_| panic!("{name}={value} panicked"));
            match outcome {
                Err(refused) => {
                    assert!(
                        refused.problems.iter().any(|p| p.starts_with(name)),
                        "{name}={value}: refused without naming it: {:?}",
                        refused.problems
                    );
                    assert!(
                        refused.problems.iter().all(|p| !p.contains(value)),
                        "{name}={value}: the refusal echoes the value"
                    );
                }
                Ok(settings) => {
                    assert!(
                        settings.warnings.iter().any(|w| w.starts_with(name)),
                        "{name}={value}: taken without a warning: {:?}",
                        settings.warnings
                    );
                    assert_eq!(
                        decided(settings),
                        defaults,
                        "{name}={value}: not replaced by the default"
                    );
                }
            }
        }
    }
}

#[test]
fn a_word_in_every_numeric_variable_is_refused_all_at_once() {
    let words: Vec<(&str, &str)> = NUMERIC.iter().map(|name| (*name, "ten")).collect();
    let problems = Settings::from_vars(base(&words))
        .expect_err("refused")
        .problems;
    for name in NUMERIC {
        assert!(
            problems.iter().any(|p| p.starts_with(name)),
            "{name} missing from {problems:?}"
        );
    }
}

#[test]
fn zero_intervals_and_timeouts_become_their_defaults() {
    let s = Settings::from_vars(base(&[
        ("OUTBOX_REPAIR_INTERVAL_SEC", "0"),
        ("ENGINE_EXTRACTION_TIMEOUT_SEC", "-5"),
        ("RABBITMQ_NUMBERS_OF_WORKERS", "0"),
    ]))
    .expect("valid");
    assert_eq!(s.outbox.repair_interval, Duration::from_secs(30));
    assert_eq!(s.engine.timeout, Duration::from_secs(300));
    assert_eq!(s.amqp.consumers, 5);
    assert_eq!(
        s.warnings,
        [
            "RABBITMQ_NUMBERS_OF_WORKERS is 0, not above 0: using the default, 5",
            "ENGINE_EXTRACTION_TIMEOUT_SEC is -5, not above 0: using the default, 300 seconds",
            "OUTBOX_REPAIR_INTERVAL_SEC is 0, not above 0: using the default, 30 seconds",
        ]
    );
}

#[test]
fn bad_datasource_groups_are_refused_with_every_problem_naming_the_datasource() {
    let refused = Settings::from_vars(base(&[
        ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
        ("DATASOURCE_LEDGER_HOST", "ledger.internal"),
        ("DATASOURCE_LEDGER_DATABASE", "ledger"),
        ("DATASOURCE_LEDGER_USER", "reader"),
        ("DATASOURCE_LEDGER_PASSWORD", "ds-very-secret"),
        ("DATASOURCE_BAD_TYPE", "POSTGRESQL"),
        ("DATASOURCE_BAD_PORT", "-1"),
        ("DATASOURCE_BAD_PASSWORD", "ds-very-secret"),
        ("DATASOURCE_WORSE_TYPE", "cassandra"),
        ("DATASOURCE_WORSE_HOST", "h"),
        ("DATASOURCE_WORSE_DATABASE", "d"),
        ("DATASOURCE_WORSE_USER", "u"),
        ("DATASOURCE_WORSE_PORT", "99999999999999999999"),
    ]))
    .expect_err("a bad group stops the Worker");
    let [bad, worse] = &refused.problems[..] else {
        panic!("one problem per bad group: {:?}", refused.problems);
    };
    assert!(
        bad.starts_with("DATASOURCE_BAD_* does not define a usable datasource \"bad\""),
        "{bad}"
    );
    for problem in [
        "DATASOURCE_BAD_HOST is not set",
        "DATASOURCE_BAD_PORT is not a port number (1-65535)",
        "DATASOURCE_BAD_DATABASE is not set",
        "DATASOURCE_BAD_USER is not set",
    ] {
        assert!(bad.contains(problem), "{problem:?} not in {bad}");
    }
    assert!(
        worse.starts_with("DATASOURCE_WORSE_* does not define a usable datasource \"worse\""),
        "{worse}"
    );
    assert!(
        worse.contains("DATASOURCE_WORSE_TYPE: \"cassandra\""),
        "{worse}"
    );
    assert!(
        worse.contains("DATASOURCE_WORSE_PORT is not a port number"),
        "{worse}"
    );
    assert!(!format!("{refused}").contains("ds-very-secret"));
}

#[test]
fn retries_are_off_by_default_and_read_with_their_backoff() {
    let off = Settings::from_vars(base(&[])).expect("valid");
    assert_eq!(off.engine.retry, engine::RetryPolicy::NONE);
    let on = Settings::from_vars(base(&[
        ("JOB_RETRY_ATTEMPTS", "3"),
        ("JOB_RETRY_BACKOFF_MS", "250"),
        ("JOB_RETRY_BACKOFF_MAX_MS", "4000"),
    ]))
    .expect("valid");
    assert_eq!(
        on.engine.retry,
        engine::RetryPolicy {
            attempts: 3,
            backoff: Duration::from_millis(250),
            backoff_max: Duration::from_secs(4),
        }
    );
}

#[test]
fn more_than_ten_retries_or_a_cap_below_the_first_wait_is_refused_naming_the_variable() {
    let problems = Settings::from_vars(base(&[
        ("JOB_RETRY_ATTEMPTS", "11"),
        ("JOB_RETRY_BACKOFF_MS", "5000"),
        ("JOB_RETRY_BACKOFF_MAX_MS", "1000"),
    ]))
    .expect_err("refused")
    .problems;
    assert!(
        problems
            .iter()
            .any(|p| p == "JOB_RETRY_ATTEMPTS must be a whole number from 0 to 10"),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| {
            p
            == "JOB_RETRY_BACKOFF_MAX_MS (1000 ms) must not be below JOB_RETRY_BACKOFF_MS (5000 ms)"
        }),
        "{problems:?}"
    );
}
