//! The environment LerianStudio's Helm chart gives the Go Worker (chart 3.1: the common, the
//! worker's and the shared ConfigMap and Secret keys with their defaults, the secrets filled in)
//! starts this Worker: what it does not read is at most a warning, never a problem. `MONGO_*`
//! is left out: which state backend they select is the Manager mode's to decide.

use super::command;
use super::tests::with;

const CHART: &[(&str, &str)] = &[
    // common.configmap
    ("RABBITMQ_URI", "amqp"),
    ("RABBITMQ_HOST", "rabbitmq"),
    ("RABBITMQ_PORT_AMQP", "5672"),
    ("RABBITMQ_PORT_HOST", "15672"),
    ("RABBITMQ_HEALTH_CHECK_URL", "http://rabbitmq:15672"),
    ("SEAWEEDFS_HOST", "seaweedfs-filer"),
    ("SEAWEEDFS_FILER_PORT", "8888"),
    ("SEAWEEDFS_TTL", "6M"),
    ("REDIS_HOST", "valkey"),
    ("REDIS_PORT", "6379"),
    ("REDIS_DB", "0"),
    ("OTEL_RESOURCE_SERVICE_NAME", "fetcher"),
    ("OTEL_LIBRARY_NAME", "github.com/LerianStudio/fetcher"),
    ("OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT", "development"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT_PORT", "4317"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://10.0.0.9:4317"),
    ("ENABLE_TELEMETRY", "false"),
    ("OTEL_INSECURE_EXPORTER", "false"),
    ("MULTI_TENANT_ENABLED", "false"),
    ("MULTI_TENANT_URL", ""),
    ("MULTI_TENANT_ENVIRONMENT", ""),
    ("MULTI_TENANT_MAX_TENANT_POOLS", "100"),
    ("MULTI_TENANT_IDLE_TIMEOUT_SEC", "300"),
    ("MULTI_TENANT_CIRCUIT_BREAKER_THRESHOLD", "5"),
    ("MULTI_TENANT_CIRCUIT_BREAKER_TIMEOUT_SEC", "30"),
    // worker.configmap, and what the worker's ConfigMap template adds
    ("ENV_NAME", "development"),
    ("LOG_LEVEL", "debug"),
    ("RABBITMQ_NUMBERS_OF_WORKERS", "5"),
    (
        "RABBITMQ_FETCHER_WORK_QUEUE",
        "fetcher.extract-external-data.queue",
    ),
    ("RABBITMQ_JOB_EVENTS_EXCHANGE", "fetcher.job.events"),
    ("STREAMING_ENABLED", "true"),
    ("STREAMING_BROKERS", "redpanda:9092"),
    ("STREAMING_TLS_ENABLED", "false"),
    ("STREAMING_CLIENT_ID", "fetcher-worker"),
    ("STREAMING_CLOUDEVENTS_SOURCE", "fetcher-worker"),
    ("STORAGE_PROVIDER", "seaweedfs"),
    ("OBJECT_STORAGE_KEY_PREFIX", ""),
    ("OBJECT_STORAGE_ENDPOINT", "http://seaweedfs-s3:8333"),
    ("OBJECT_STORAGE_REGION", "us-east-1"),
    ("OBJECT_STORAGE_BUCKET", "external-data"),
    ("OBJECT_STORAGE_USE_PATH_STYLE", "false"),
    ("RATE_LIMIT_ENABLED", "true"),
    ("RATE_LIMIT_MAX", "500"),
    ("RATE_LIMIT_WINDOW_SEC", "60"),
    ("AGGRESSIVE_RATE_LIMIT_MAX", "100"),
    ("RELAXED_RATE_LIMIT_MAX", "1000"),
    ("RATE_LIMIT_REDIS_TIMEOUT_MS", "500"),
    ("ALLOW_RATELIMIT_DISABLED", ""),
    ("ALLOW_RATELIMIT_FAIL_OPEN", ""),
    ("VERSION", "3.0.2"),
    ("OTEL_RESOURCE_SERVICE_VERSION", "3.0.2"),
    ("ALLOW_INSECURE_TLS", "true"),
    // worker.secrets and the shared secrets
    ("APP_ENC_KEY_VERSION", "1"),
    ("STREAMING_SASL_PASSWORD", "chart-sasl-pw"),
    ("STREAMING_TLS_CA_CERT", ""),
    ("CRYPTO_ENCRYPT_FILE_STORAGE", "chart-crypto-1"),
    ("CRYPTO_HASH_SECRET_KEY_FILE_STORAGE", "chart-crypto-2"),
    ("CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM", "chart-crypto-3"),
    ("CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM", "chart-crypto-4"),
    ("OBJECT_STORAGE_ACCESS_KEY_ID", "chart-access-key"),
    ("OBJECT_STORAGE_SECRET_KEY", "chart-secret-key"),
    ("RABBITMQ_DEFAULT_USER", "plugin"),
    ("RABBITMQ_DEFAULT_PASS", "fetcher-dev-only"),
    ("REDIS_USER", ""),
    ("REDIS_PASSWORD", "chart-redis-pw"),
    ("LICENSE_KEY", "chart-license"),
    ("ORGANIZATION_IDS", "org-1"),
];

#[test]
fn the_helm_charts_worker_environment_is_accepted_with_warnings_only() {
    let outcome = command::run(&["config".to_owned(), "check".to_owned()], with(CHART))
        .expect("a config command");
    assert_eq!(outcome.code, 0, "{outcome:?}");
    for expected in [
        "STREAMING_BROKERS is ignored (upstream only: ",
        "MULTI_TENANT_ENABLED is ignored (upstream only: ",
        "RABBITMQ_PORT_HOST is ignored (upstream only: ",
    ] {
        assert!(
            outcome.stdout.contains(expected),
            "{expected:?} not in:\n{}",
            outcome.stdout
        );
    }
    for (name, value) in CHART {
        if value.starts_with("chart-") || *value == "fetcher-dev-only" {
            assert!(!outcome.stdout.contains(value), "{name}'s value printed");
        }
    }
}
