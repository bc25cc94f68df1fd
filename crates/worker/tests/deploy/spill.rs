//! The spill volume follows the settings: a job spills at most its result
//! (`ENGINE_MAX_RESULT_BYTES`), and `RABBITMQ_NUMBERS_OF_WORKERS` jobs run at once, so the volume
//! that holds `ENGINE_SPILL_DIR` takes their product plus a margin (docs/operations.md "Sizing").
//! A smaller one lets a submitter fill it: an emptyDir past its `sizeLimit` gets the pod evicted.

use serde_json::Value;

use crate::config::documented_default;
use crate::tools::{root, yaml_documents};

/// What the volume holds beyond the jobs' spill.
const MARGIN: u64 = 64 << 20;

/// Bytes the spill directory must hold under these variables (unset: the documented defaults).
fn needed(setting: impl Fn(&str) -> Option<String>) -> u64 {
    let number = |name: &str| -> u64 {
        let value = setting(name).unwrap_or_else(|| documented_default(name));
        value
            .parse()
            .unwrap_or_else(|e| panic!("{name} = {value:?}: {e}"))
    };
    number("ENGINE_MAX_RESULT_BYTES") * number("RABBITMQ_NUMBERS_OF_WORKERS") + MARGIN
}

/// The spill directory these variables name: `ENGINE_SPILL_DIR`, else the image's temp dir.
fn spill_dir(setting: impl Fn(&str) -> Option<String>) -> String {
    setting("ENGINE_SPILL_DIR").unwrap_or_else(|| "/tmp".to_owned())
}

/// Bytes of a Kubernetes quantity (`1344Mi`, `2G`, `1048576`).
fn quantity(text: &str) -> u64 {
    let units: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    let (digits, unit) = units
        .iter()
        .find_map(|(suffix, unit)| Some((text.strip_suffix(suffix)?, *unit)))
        .unwrap_or((text, 1));
    let number: u64 = digits
        .parse()
        .unwrap_or_else(|e| panic!("quantity {text:?}: {e}"));
    number * unit
}

/// Bytes of a Docker size (`1344m`, `2g`, `65536k`, `1048576`; binary units).
fn docker_size(text: &str) -> u64 {
    let lower = text.to_lowercase();
    let (digits, unit) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    let number: u64 = digits
        .parse()
        .unwrap_or_else(|e| panic!("size {text:?}: {e}"));
    number * unit
}

fn kubernetes(file: &str) -> Value {
    yaml_documents(&root().join("deploy/kubernetes").join(file)).remove(0)
}

#[test]
fn the_kubernetes_spill_volume_holds_what_the_jobs_may_spill() {
    let data = kubernetes("configmap.yaml")["data"].clone();
    let setting = |name: &str| data[name].as_str().map(str::to_owned);
    let needed = needed(setting);
    let dir = spill_dir(setting);

    let pod = &kubernetes("deployment.yaml")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
    let mount = mounts
        .iter()
        .find(|mount| mount["mountPath"] == dir.as_str())
        .unwrap_or_else(|| panic!("no volume is mounted at ENGINE_SPILL_DIR {dir}"));
    assert_ne!(mount["readOnly"], true, "the spill volume must be writable");
    let volumes = pod["volumes"].as_array().expect("volumes");
    let volume = volumes
        .iter()
        .find(|volume| volume["name"] == mount["name"])
        .expect("the spill volume");
    let size = quantity(
        volume["emptyDir"]["sizeLimit"]
            .as_str()
            .expect("the spill volume is an emptyDir with a sizeLimit"),
    );
    assert!(
        size >= needed,
        "the spill volume's sizeLimit ({size} bytes) is below ENGINE_MAX_RESULT_BYTES x \
         RABBITMQ_NUMBERS_OF_WORKERS + 64 MiB ({needed} bytes)"
    );

    // The pod's ephemeral storage, where set, covers the volume: the scheduler places the pod
    // where the disk is, and the limit does not evict it before the volume is full.
    let resources = &container["resources"];
    let request = resources["requests"]["ephemeral-storage"].as_str();
    let limit = resources["limits"]["ephemeral-storage"].as_str();
    if let Some(request) = request {
        assert!(quantity(request) >= size, "request {request} < the volume");
    }
    if let Some(limit) = limit {
        assert!(quantity(limit) >= size, "limit {limit} < the volume");
        if let Some(request) = request {
            assert!(
                quantity(limit) >= quantity(request),
                "limit {limit} < request"
            );
        }
    }
}

#[test]
fn the_compose_spill_tmpfs_holds_what_the_jobs_may_spill() {
    let compose = &yaml_documents(&root().join("deploy/compose/compose.yaml"))[0];
    let worker = &compose["services"]["worker"];
    let env = &worker["environment"];
    let setting = |name: &str| env[name].as_str().map(str::to_owned);
    let needed = needed(setting);
    let dir = spill_dir(setting);
    assert_eq!(worker["read_only"], true, "the root is read-only");

    let mounts = worker["tmpfs"]
        .as_array()
        .expect("the Worker's tmpfs mounts");
    let options = mounts
        .iter()
        .filter_map(Value::as_str)
        .find_map(|mount| match mount.split_once(':') {
            Some((path, options)) if path == dir => Some(options),
            None if mount == dir => Some(""),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tmpfs at ENGINE_SPILL_DIR {dir}: {mounts:?}"));
    let size = options
        .split(',')
        .find_map(|option| option.strip_prefix("size="))
        .unwrap_or_else(|| panic!("the spill tmpfs has no size (it would take half the RAM)"));
    let size = docker_size(size);
    assert!(
        size >= needed,
        "the spill tmpfs ({size} bytes) is below ENGINE_MAX_RESULT_BYTES x \
         RABBITMQ_NUMBERS_OF_WORKERS + 64 MiB ({needed} bytes)"
    );
}

#[test]
fn sizes_read_as_kubernetes_and_docker_read_them() {
    assert_eq!(quantity("1344Mi"), 1344 << 20);
    assert_eq!(quantity("2G"), 2_000_000_000);
    assert_eq!(quantity("1048576"), 1 << 20);
    assert_eq!(docker_size("1344m"), 1344 << 20);
    assert_eq!(docker_size("65536k"), 64 << 20);
    assert_eq!(docker_size("2G"), 2 << 30);
    assert_eq!(documented_default("ENGINE_MAX_RESULT_BYTES"), "268435456");
    assert_eq!(documented_default("RABBITMQ_NUMBERS_OF_WORKERS"), "5");
}
