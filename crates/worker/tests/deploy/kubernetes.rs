//! `deploy/kubernetes/`: the core objects valid for `kubernetes-validate --strict`, the custom
//! resources (KEDA, Prometheus Operator) valid against the fields their projects document
//! (`schemas/`, written from their reference pages), and the Deployment's variables, ports,
//! probes, secrets and grace period consistent with the Worker's configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::{documented_variables, is_worker_variable};
use crate::tools::{
    check_jsonschema, fresh_dir, kubernetes_validate, root, run, text, yaml_documents,
};

fn dir() -> PathBuf {
    root().join("deploy/kubernetes")
}

/// The kustomization's resources, each file with its one object.
fn objects() -> Vec<(PathBuf, Value)> {
    let kustomization = &yaml_documents(&dir().join("kustomization.yaml"))[0];
    kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|file| {
            let path = dir().join(file.as_str().expect("a file"));
            let mut docs = yaml_documents(&path);
            assert_eq!(docs.len(), 1, "{} holds one object", path.display());
            (path, docs.remove(0))
        })
        .collect()
}

fn object(kind: &str) -> Value {
    objects()
        .into_iter()
        .map(|(_, object)| object)
        .find(|object| object["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the kustomization"))
}

/// The schema (under `schemas/`) of a custom resource's kind, if it is one.
fn custom_schema(object: &Value) -> Option<PathBuf> {
    let api = object["apiVersion"].as_str().expect("apiVersion");
    (api.starts_with("keda.sh/") || api.starts_with("monitoring.coreos.com/")).then(|| {
        let kind = object["kind"].as_str().expect("kind").to_lowercase();
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/deploy/schemas/{kind}.schema.json"))
    })
}

fn validate_custom(schema: &Path, instance: &Path) -> std::process::Output {
    run(check_jsonschema()
        .arg("--schemafile")
        .arg(schema)
        .arg(instance))
}

#[test]
fn every_file_of_the_directory_is_in_the_kustomization() {
    let listed: Vec<String> = objects()
        .iter()
        .map(|(path, _)| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for entry in std::fs::read_dir(dir()).expect("deploy/kubernetes") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(
                listed.contains(&name),
                "{name} is not in kustomization.yaml"
            );
        }
    }
}

#[test]
fn the_core_objects_are_valid_kubernetes() {
    let core: Vec<PathBuf> = objects()
        .into_iter()
        .filter(|(_, object)| custom_schema(object).is_none())
        .map(|(path, _)| path)
        .collect();
    assert!(core.len() >= 5, "{core:?}");
    let output = run(kubernetes_validate().arg("--strict").args(&core));
    let said = text(&output);
    println!("{said}");
    assert!(output.status.success(), "kubernetes-validate:\n{said}");
    assert_eq!(
        said.matches("passed for resource").count(),
        core.len(),
        "{said}"
    );
}

#[test]
fn a_misspelt_core_field_is_refused() {
    let deployment = std::fs::read_to_string(dir().join("deployment.yaml")).expect("deployment");
    let misspelt = deployment.replacen("readOnlyRootFilesystem", "readOnlyRootFileSystem", 1);
    let tmp = fresh_dir();
    let path = tmp.join("deployment.yaml");
    std::fs::write(&path, misspelt).expect("write");
    let output = run(kubernetes_validate().arg("--strict").arg(&path));
    std::fs::remove_dir_all(&tmp).ok();
    assert!(!output.status.success(), "passed: {}", text(&output));
    assert!(
        text(&output).contains("readOnlyRootFileSystem"),
        "{}",
        text(&output)
    );
}

#[test]
fn the_custom_resources_have_only_documented_fields() {
    let mut kinds = Vec::new();
    for (path, object) in objects() {
        let Some(schema) = custom_schema(&object) else {
            continue;
        };
        let output = validate_custom(&schema, &path);
        assert!(
            output.status.success(),
            "{}: {}",
            path.display(),
            text(&output)
        );
        kinds.push(object["kind"].as_str().unwrap().to_owned());
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "PrometheusRule",
            "ScaledObject",
            "ServiceMonitor",
            "TriggerAuthentication"
        ]
    );
}

#[test]
fn a_misspelt_custom_resource_field_is_refused() {
    // Each kind, with one of its spec's fields (and the trigger's mode) misspelt.
    let tmp = fresh_dir();
    for (path, object) in objects() {
        let Some(schema) = custom_schema(&object) else {
            continue;
        };
        let mut misspelt = object.clone();
        let spec = misspelt["spec"].as_object_mut().expect("spec");
        let first = spec.keys().next().expect("a spec field").clone();
        let value = spec.remove(&first).unwrap();
        spec.insert(format!("{first}s"), value);
        let file = tmp.join(path.file_name().unwrap()).with_extension("json");
        std::fs::write(&file, misspelt.to_string()).expect("write");
        let output = validate_custom(&schema, &file);
        assert!(
            !output.status.success(),
            "{first}s passed in {}",
            path.display()
        );
    }
    let mut scaled = object("ScaledObject");
    scaled["spec"]["triggers"][0]["metadata"]["queueLenght"] = "5".into();
    let file = tmp.join("scaledobject-trigger.json");
    std::fs::write(&file, scaled.to_string()).expect("write");
    let output = validate_custom(&custom_schema(&scaled).unwrap(), &file);
    std::fs::remove_dir_all(&tmp).ok();
    assert!(!output.status.success(), "queueLenght passed");
    assert!(text(&output).contains("queueLenght"), "{}", text(&output));
}

/// The ConfigMap's settings.
fn settings() -> BTreeMap<String, String> {
    object("ConfigMap")["data"]
        .as_object()
        .expect("data")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a string").to_owned()))
        .collect()
}

fn container() -> Value {
    object("Deployment")["spec"]["template"]["spec"]["containers"][0].clone()
}

fn is_secret(name: &str) -> bool {
    name == "APP_ENC_KEY"
        || name == "DATABASE_URL"
        || name.ends_with("_PASS")
        || name.ends_with("PASSWORD")
        || name.ends_with("SECRET_KEY")
        || name.ends_with("ACCESS_KEY_ID")
        || name.starts_with("CRYPTO_")
}

#[test]
fn every_variable_is_the_workers_and_every_secret_comes_from_a_secret() {
    let known = documented_variables();
    for name in settings().keys() {
        assert!(
            is_worker_variable(name, &known),
            "the ConfigMap sets {name}, unknown to the Worker"
        );
        assert!(!is_secret(name), "the ConfigMap holds the secret {name}");
    }
    let env = container()["env"].as_array().expect("env").clone();
    let mut secrets = Vec::new();
    for var in &env {
        let name = var["name"].as_str().expect("name");
        assert!(
            is_worker_variable(name, &known),
            "the Deployment sets {name}, unknown to the Worker"
        );
        if is_secret(name) {
            assert!(var.get("value").is_none(), "{name} is a literal");
            assert!(
                var["valueFrom"]["secretKeyRef"]["name"].is_string(),
                "{name} does not come from a Secret"
            );
            secrets.push(name.to_owned());
        }
    }
    for needed in ["APP_ENC_KEY", "DATABASE_URL", "RABBITMQ_DEFAULT_PASS"] {
        assert!(
            secrets.iter().any(|s| s == needed),
            "{needed} is not a secret reference"
        );
    }
}

#[test]
fn ports_probes_and_grace_period_follow_the_configuration() {
    let settings = settings();
    let container = container();
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no {name} port"))["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(port("health").to_string(), settings["HEALTH_PORT"]);
    assert_eq!(port("api").to_string(), settings["API_PORT"]);
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/health");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "health");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "health");
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    let pod = &object("Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);

    // The drain's bound is READYZ_DRAIN_DELAY_SEC + SHUTDOWN_GRACE_SEC + 15 s
    // (docs/configuration.md); the pod must outlast it, by a small margin.
    let seconds = |name: &str| settings[name].parse::<u64>().expect(name);
    let bound = seconds("READYZ_DRAIN_DELAY_SEC") + seconds("SHUTDOWN_GRACE_SEC") + 15;
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace period");
    assert!(
        grace > bound && grace <= bound + 30,
        "terminationGracePeriodSeconds {grace} vs the drain's bound {bound}"
    );

    // The Service and the ServiceMonitor name the container's ports.
    let service = object("Service");
    for service_port in service["spec"]["ports"].as_array().expect("ports") {
        let target = service_port["targetPort"].as_str().expect("a named target");
        port(target);
    }
    let monitor = object("ServiceMonitor");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "health");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    // The rules select job="fetcher-worker": the Service's name, the ServiceMonitor's job label.
    assert_eq!(service["metadata"]["name"], "fetcher-worker");
}

#[test]
fn the_autoscaler_reads_the_work_queue_at_the_workers_concurrency() {
    let settings = settings();
    let scaled = object("ScaledObject");
    let trigger = &scaled["spec"]["triggers"][0];
    assert_eq!(trigger["type"], "rabbitmq");
    assert_eq!(trigger["metadata"]["mode"], "QueueLength");
    assert_eq!(
        trigger["metadata"]["queueName"],
        settings["RABBITMQ_FETCHER_WORK_QUEUE"].as_str()
    );
    assert_eq!(
        trigger["metadata"]["value"],
        settings["RABBITMQ_NUMBERS_OF_WORKERS"].as_str()
    );
    assert_eq!(
        scaled["spec"]["scaleTargetRef"]["name"],
        object("Deployment")["metadata"]["name"]
    );
    let auth = object("TriggerAuthentication");
    assert_eq!(
        trigger["authenticationRef"]["name"],
        auth["metadata"]["name"]
    );
    assert!(auth["spec"]["secretTargetRef"][0]["name"].is_string());
}

#[test]
fn the_prometheus_rule_is_the_rule_file() {
    let rules = &yaml_documents(&root().join("deploy/prometheus/rules.yml"))[0];
    assert_eq!(object("PrometheusRule")["spec"]["groups"], rules["groups"]);
}
