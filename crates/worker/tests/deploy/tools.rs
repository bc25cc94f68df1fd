//! The tools the checks run, installed by `scripts/tools.sh` when absent, and the repository's
//! files they read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test virtual environment (`FETCHER_TEST_VENV`, as the scripts read it).
fn venv() -> PathBuf {
    std::env::var_os("FETCHER_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/fetcher-test-venv"))
}

/// The groups installed (or found) so far; one installation at a time, as apt and pip want.
static INSTALLED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Runs `scripts/tools.sh <group>` once per test process (idempotent) and panics when it fails.
fn ensure(group: &str) {
    let mut installed = INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if installed.contains(group) {
        return;
    }
    let output = Command::new("bash")
        .arg(root().join("scripts/tools.sh"))
        .arg(group)
        .output()
        .expect("running scripts/tools.sh");
    assert!(
        output.status.success(),
        "scripts/tools.sh {group} could not install the tool:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    installed.insert(group.to_owned());
}

/// `promtool`, from Debian's `prometheus` package.
pub fn promtool() -> Command {
    ensure("prometheus");
    Command::new("promtool")
}

/// `check-jsonschema`, from PyPI into the test environment.
pub fn check_jsonschema() -> Command {
    ensure("jsonschema");
    Command::new(venv().join("bin/check-jsonschema"))
}

/// `kubernetes-validate`, from PyPI into the test environment.
pub fn kubernetes_validate() -> Command {
    ensure("kubernetes");
    Command::new(venv().join("bin/kubernetes-validate"))
}

/// The files read so far: a Python start per file and test would make the tests slow.
static READ: Mutex<BTreeMap<PathBuf, Vec<serde_json::Value>>> = Mutex::new(BTreeMap::new());

/// Every document of a YAML file as JSON, read by the environment's `ruamel.yaml` (which
/// check-jsonschema brings): the workspace has no YAML parser of its own.
pub fn yaml_documents(path: &Path) -> Vec<serde_json::Value> {
    if let Some(docs) = READ.lock().unwrap_or_else(|p| p.into_inner()).get(path) {
        return docs.clone();
    }
    let docs = read_yaml(path);
    READ.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(path.to_owned(), docs.clone());
    docs
}

fn read_yaml(path: &Path) -> Vec<serde_json::Value> {
    ensure("jsonschema");
    const SCRIPT: &str = "import json, sys\n\
        from ruamel.yaml import YAML\n\
        docs = [d for d in YAML(typ='safe', pure=True).load_all(open(sys.argv[1])) if d is not None]\n\
        print(json.dumps(docs))";
    let output = Command::new(venv().join("bin/python"))
        .args(["-c", SCRIPT])
        .arg(path)
        .output()
        .expect("running the environment's python");
    assert!(
        output.status.success(),
        "{} is not YAML:\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON from the YAML reader")
}

/// Runs `command`, returning its output whatever its exit status.
pub fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"))
}

/// Both output streams, for a failure message.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A fresh directory under the system's temporary directory (the caller removes it).
pub fn fresh_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("fetcher-deploy-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
