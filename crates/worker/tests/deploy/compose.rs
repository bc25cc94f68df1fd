//! `deploy/compose/compose.yaml`: valid under the compose specification's schema (vendored by
//! check-jsonschema), and every variable it gives the Worker is one the Worker reads.

use std::path::Path;

use crate::config::{documented_variables, is_worker_variable};
use crate::tools::{check_jsonschema, fresh_dir, root, run, text, yaml_documents};

fn compose_file() -> std::path::PathBuf {
    root().join("deploy/compose/compose.yaml")
}

fn validate(path: &Path) -> std::process::Output {
    run(check_jsonschema()
        .args(["--builtin-schema", "vendor.compose-spec"])
        .arg(path))
}

#[test]
fn the_compose_file_follows_the_compose_specification() {
    let output = validate(&compose_file());
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn a_misspelt_compose_field_is_refused() {
    let compose = std::fs::read_to_string(compose_file()).expect("compose.yaml");
    let misspelt = compose.replacen("    read_only: true", "    readonly: true", 1);
    assert_ne!(misspelt, compose, "the Worker service has read_only");
    let dir = fresh_dir();
    let path = dir.join("compose.yaml");
    std::fs::write(&path, misspelt).expect("write");
    let output = validate(&path);
    let said = text(&output);
    std::fs::remove_dir_all(&dir).ok();
    assert!(!output.status.success(), "a misspelt field passed: {said}");
    assert!(said.contains("readonly"), "{said}");
}

#[test]
fn every_worker_variable_of_the_compose_file_is_in_the_configuration() {
    let compose = &yaml_documents(&compose_file())[0];
    let known = documented_variables();
    let worker = &compose["services"]["worker"];
    let env = worker["environment"]
        .as_object()
        .expect("the Worker's environment as a map");
    assert!(env.contains_key("APP_ENC_KEY"));
    for name in env.keys() {
        assert!(
            is_worker_variable(name, &known),
            "compose.yaml sets {name}, which the Worker does not read (docs/configuration.md's table)"
        );
    }
    // Two replicas, built from the repository's Dockerfile.
    assert_eq!(worker["deploy"]["replicas"], 2);
    assert_eq!(worker["build"]["dockerfile"], "deploy/Dockerfile");
    // The key is the operator's, never a literal of the file.
    let key = env["APP_ENC_KEY"].as_str().expect("APP_ENC_KEY");
    assert!(key.starts_with("${APP_ENC_KEY:?"), "APP_ENC_KEY = {key}");
}
