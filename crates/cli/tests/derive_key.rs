//! `fetcherctl derive-key`, run as a real process against the known-answer keys.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn masters() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/keys.json");
    let text = std::fs::read_to_string(path).expect("read keys.json");
    serde_json::from_str(&text).expect("parse keys.json")
}

fn run(env_key: Option<&str>, stdin: &str, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fetcherctl"));
    command
        .arg("derive-key")
        .args(args)
        .env_remove("APP_ENC_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(key) = env_key {
        command.env("APP_ENC_KEY", key);
    }
    let mut child = command.spawn().expect("spawn fetcherctl");
    // fetcherctl need not read its input (a key from the environment wins): it may have exited
    // already, and writing then fails with a broken pipe, which is not the test's concern.
    if let Err(error) = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
    {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "write stdin");
    }
    child.wait_with_output().expect("wait")
}

fn expected_line(master: &serde_json::Value) -> String {
    let hex = master["keys"]["fetcher-external-hmac-v1"]
        .as_str()
        .expect("hex");
    format!("External HMAC Key (hex): {hex}\n")
}

#[test]
fn prints_the_external_key_from_each_source() {
    let v = masters();
    for master in v["masters"].as_array().expect("masters") {
        let key = master["APP_ENC_KEY"].as_str().expect("key");
        let expected = expected_line(master);
        for output in [
            run(Some(key), "", &[]),
            run(None, &format!("{key}\n"), &[]),
            run(None, "", &["--key", key]),
        ] {
            assert!(output.status.success(), "{output:?}");
            assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
        }
    }
}

#[test]
fn the_environment_wins_over_standard_input_and_the_flag() {
    let v = masters();
    let first = v["masters"][0]["APP_ENC_KEY"].as_str().expect("key");
    let second = v["masters"][1]["APP_ENC_KEY"].as_str().expect("key");
    let output = run(Some(first), &format!("{second}\n"), &["--key", second]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        expected_line(&v["masters"][0])
    );
}

#[test]
fn a_bad_key_fails_naming_the_variable_but_not_the_value() {
    let v = masters();
    for rejected in v["rejected_masters"].as_array().expect("rejected") {
        let key = rejected["APP_ENC_KEY"].as_str().expect("key");
        let output = run(None, "", &["--key", key]);
        assert!(!output.status.success());
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !key.is_empty() {
            assert!(stderr.contains("APP_ENC_KEY"), "{stderr}");
            assert!(!stderr.contains(key), "{stderr}");
        }
    }
}

#[test]
fn internal_adds_the_internal_key_line_after_the_external_one() {
    let v = masters();
    for master in v["masters"].as_array().expect("masters") {
        let key = master["APP_ENC_KEY"].as_str().expect("key");
        let internal = master["keys"]["fetcher-internal-hmac-v1"]
            .as_str()
            .expect("hex");
        let output = run(Some(key), "", &["--internal"]);
        assert!(output.status.success(), "{output:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            format!(
                "{}Internal HMAC Key (hex): {internal}\n",
                expected_line(master)
            )
        );
        assert!(output.stderr.is_empty(), "{output:?}");
    }
}

#[test]
fn without_internal_the_internal_key_is_never_printed() {
    let v = masters();
    let master = &v["masters"][0];
    let key = master["APP_ENC_KEY"].as_str().expect("key");
    let internal = master["keys"]["fetcher-internal-hmac-v1"]
        .as_str()
        .expect("hex");
    let output = run(Some(key), "", &[]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!all.contains(internal), "{all}");
}
