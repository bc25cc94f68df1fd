//! Wiring: pools, broker, storage, engine, publisher, health server; then the wait for the
//! dependencies, the run and the drain.

use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use contract::envelope::VerifyPolicy;
use engine::connection::{ConnectionStore, Resolver};
use secrecy::ExposeSecret;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::ConnectOptions;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::amqp::consumer::{self, ConsumerConfig};
use crate::amqp::topology;
use crate::config::{DatabaseSettings, Settings, StateSettings};
use crate::health::{self, Readiness};
use crate::http_server::HttpServer;
use crate::job::{JobCore, JobSettings, MessageLimits, Sweeper};
use crate::{adapters, api};
use crate::{checks, dependencies, metrics, probes};
use storage::ObjectStore;

/// What runs jobs, and what the repairer and the drain use beside it.
struct Jobs {
    core: Arc<JobCore>,
    store: outbox::Store,
    publisher: Arc<publisher::Publisher>,
    /// The MQTT mirror's publisher, when the mirror is on.
    mirror: Option<Arc<publisher::mqtt::MqttPublisher>>,
}

/// How often the mirror's relay looks for MQTT rows: they are recorded unleased, and nobody
/// publishes them right after their commit.
const MIRROR_POLL: Duration = Duration::from_millis(200);

/// A Worker ready to run: every dependency checked, the health server bound.
pub struct Application {
    settings: Settings,
    jobs: Jobs,
    consumer: ConsumerConfig,
    consumer_connected: Arc<AtomicBool>,
    readiness: Arc<Readiness>,
    health: HttpServer,
    /// The control API's listener (`API_ENABLED`).
    control_api: Option<HttpServer>,
    pool: sqlx::PgPool,
    objects: ObjectStore,
}

impl Application {
    /// Sets everything up without asking any dependency (they may not answer yet) and binds the
    /// health server; [`run_until_stopped`](Self::run_until_stopped) waits for them.
    pub async fn build(settings: Settings) -> anyhow::Result<Application> {
        // The Manager mode stops here, before anything is set up.
        postgres_state(&settings)?;
        let prometheus = metrics::install().context("Failed to install the metrics recorder")?;

        let Wired {
            pool,
            store,
            objects,
            publisher,
            core,
        } = wire(&settings).await?;
        let mirror = match &settings.mqtt {
            None => None,
            Some(mqtt) => {
                contract::redaction::remember_host(&mqtt.url.host);
                if let Some(username) = &mqtt.username {
                    contract::redaction::remember_user(username);
                }
                let mut config =
                    publisher::mqtt::MqttConfig::new(mqtt.url.clone(), mqtt.client_id.clone());
                config.username = mqtt.username.clone();
                config.password = mqtt.password.clone();
                config.keep_alive = mqtt.keep_alive;
                config.ca_file = mqtt.ca_file.clone();
                Some(Arc::new(
                    publisher::mqtt::MqttPublisher::start(&config)
                        .context("Failed to set up the MQTT mirror")?,
                ))
            }
        };
        crate::metrics::prefetch(settings.amqp.consumers);
        let consumer = ConsumerConfig {
            uri: settings.amqp.uri.clone(),
            work_queue: settings.amqp.work_queue.clone(),
            events_exchange: settings.amqp.events_exchange.clone(),
            prefetch: settings.amqp.consumers,
            worker_id: settings.jobs.worker_id.clone(),
        };
        let control = api::ControlApi {
            store: store.clone(),
            core,
        };
        let jobs = Jobs {
            core: control.core.clone(),
            store,
            publisher,
            mirror,
        };
        let control = Arc::new(control);
        if settings.amqp.allow_legacy_body_signature {
            tracing::warn!(
                "RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK is on: messages signed over their body \
                 alone are accepted. That form binds no tenant, job id, exchange or routing key, so \
                 such messages must carry no X-Tenant-ID; fetcher_messages_legacy_signature_total counts them."
            );
        }
        let consumer_connected = Arc::new(AtomicBool::new(false));
        let mut checks: Vec<Box<dyn health::Check>> = vec![
            Box::new(checks::Postgres(pool.clone())),
            Box::new(checks::RabbitMq(consumer_connected.clone())),
            Box::new(checks::ObjectStorage(objects.clone())),
        ];
        if let Some(mirror) = &jobs.mirror {
            checks.push(Box::new(checks::Mqtt(mirror.clone())));
        }
        let readiness = Readiness::new(checks);
        let health = HttpServer::bind(
            "health",
            settings.http.bind,
            settings.http.port,
            health::router(readiness.clone(), prometheus),
        )
        .await
        .with_context(|| {
            format!(
                "Failed to listen on HEALTH_BIND {} HEALTH_PORT {}",
                settings.http.bind, settings.http.port
            )
        })?;
        let control_api = match settings.http.api_port {
            None => None,
            Some(port) => Some(
                HttpServer::bind("api", settings.http.bind, port, api::router(control))
                    .await
                    .with_context(|| {
                        format!(
                            "Failed to listen on HEALTH_BIND {} API_PORT {port}",
                            settings.http.bind
                        )
                    })?,
            ),
        };
        Ok(Application {
            settings,
            jobs,
            consumer,
            consumer_connected,
            readiness,
            health,
            control_api,
            pool,
            objects,
        })
    }

    /// Serves the health server, waits for the dependencies, then runs until `shutdown` is
    /// cancelled and drains: `/readyz` says 503 at once, consuming stops
    /// `READYZ_DRAIN_DELAY_SEC` later, in-flight jobs finish, the outbox is relayed once more,
    /// and everything closes.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let Application {
            settings,
            jobs,
            consumer,
            consumer_connected,
            readiness,
            health,
            control_api,
            pool,
            objects,
        } = self;
        let stop_http = CancellationToken::new();
        let http = tokio::spawn(health.serve(stop_http.clone()));
        let control_http = control_api.map(|server| tokio::spawn(server.serve(stop_http.clone())));
        let prepared = prepare(
            &settings,
            &pool,
            &consumer,
            &jobs.publisher,
            &objects,
            &shutdown,
        )
        .await;
        let outcome = match prepared {
            Ok(true) => {
                consume_until_stopped(
                    &settings,
                    &jobs,
                    consumer,
                    consumer_connected,
                    &readiness,
                    &shutdown,
                )
                .await;
                Ok(())
            }
            Ok(false) => {
                tracing::info!("Stopped before the dependencies answered.");
                Ok(())
            }
            Err(error) => Err(error),
        };
        jobs.publisher.close().await;
        if let Some(mirror) = &jobs.mirror {
            mirror.close().await;
        }
        pool.close().await;
        stop_http.cancel();
        let _ = http.await;
        if let Some(control_http) = control_http {
            let _ = control_http.await;
        }
        if outcome.is_ok() {
            tracing::info!("Fetcher Worker stopped.");
        }
        outcome
    }
}

/// The job core on the real services, and the services the run uses beside it. Nothing is
/// asked of them yet (the pool is lazy): [`Application::build`] wires the Worker with it, and a
/// test can run the core exactly as the Worker does.
pub struct Wired {
    /// The state database's pool.
    pub pool: sqlx::PgPool,
    pub store: outbox::Store,
    pub objects: ObjectStore,
    pub publisher: Arc<publisher::Publisher>,
    pub core: Arc<JobCore>,
}

/// Wires the job core from `settings`: the state database's pool and store (mirrored when the
/// MQTT mirror is on), the connection store, the engine, the bucket and the event publisher.
pub async fn wire(settings: &Settings) -> anyhow::Result<Wired> {
    let database = postgres_state(settings)?;
    let options = PgConnectOptions::from_str(database.url.expose_secret())
        .map_err(|_| anyhow::anyhow!("DATABASE_URL is not a valid PostgreSQL URL"))?
        .disable_statement_logging();
    // Driver errors may name the state database's and the broker's hosts and users bare:
    // redaction learns them, as the engine's resolver does for datasources.
    contract::redaction::remember_host(options.get_host());
    contract::redaction::remember_user(options.get_username());
    if let Ok(uri) = settings
        .amqp
        .uri
        .expose_secret()
        .parse::<lapin::uri::AMQPUri>()
    {
        contract::redaction::remember_host(&uri.authority.host);
        contract::redaction::remember_user(&uri.authority.userinfo.username);
    }
    let pool = PgPoolOptions::new()
        .max_connections(database.max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(options);
    let mut store = outbox::Store::new(pool.clone());
    if let Some(mqtt) = &settings.mqtt {
        store = store.mirrored(&mqtt.topic_prefix);
    }

    let connections = ConnectionStore::new(
        pool.clone(),
        settings.keys.credentials().clone(),
        settings.key_version.clone(),
    );
    let resolver = Resolver::new(settings.datasources.clone(), Some(connections));
    let engine = engine::Engine::new(settings.engine.clone(), resolver);

    let objects = ObjectStore::new(settings.storage.clone())
        .await
        .context("Failed to set up object storage")?;

    let publisher_config = publisher::PublisherConfig::new(
        publisher::AmqpUri::new(settings.amqp.uri.expose_secret()),
        settings.amqp.events_exchange.clone(),
    );
    let publisher = Arc::new(
        publisher::Publisher::new(publisher_config, settings.keys.external_hmac().clone())
            .context("Failed to set up the event publisher")?,
    );
    let settings_of_jobs = JobSettings {
        keys: settings.keys.clone(),
        source: settings.amqp.cloudevents_source.clone(),
        worker_id: settings.jobs.worker_id.clone(),
        lease: settings.jobs.lease,
        verify: VerifyPolicy {
            max_age_secs: settings.amqp.signature_max_age_secs,
            allow_legacy_body_signature: settings.amqp.allow_legacy_body_signature,
            ..VerifyPolicy::default()
        },
        storage_retry: settings.jobs.storage_retry,
        limits: MessageLimits {
            max_message_bytes: settings.amqp.max_message_bytes,
            max_metadata_bytes: settings.amqp.max_metadata_bytes,
        },
    };
    let ports = adapters::ports(store.clone(), objects.clone(), publisher.clone(), engine);
    Ok(Wired {
        pool,
        store,
        objects,
        publisher,
        core: Arc::new(JobCore::new(ports, settings_of_jobs)),
    })
}

/// Consumes until `shutdown` is cancelled, then drains: `/readyz` says 503 at once, consuming
/// stops `READYZ_DRAIN_DELAY_SEC` later, in-flight jobs finish, and the outbox is relayed once
/// more.
async fn consume_until_stopped(
    settings: &Settings,
    jobs: &Jobs,
    consumer: ConsumerConfig,
    consumer_connected: Arc<AtomicBool>,
    readiness: &Readiness,
    shutdown: &CancellationToken,
) {
    tracing::info!(
        worker_id = %settings.jobs.worker_id,
        version = crate::build_info::VERSION,
        revision = crate::build_info::REVISION,
        build_date = crate::build_info::BUILD_DATE,
        "Fetcher Worker started."
    );

    let stop_consuming = CancellationToken::new();
    let stop_background = CancellationToken::new();
    let tracker = TaskTracker::new();
    let consuming = tokio::spawn(consumer::run(
        consumer,
        jobs.core.clone(),
        consumer_connected,
        stop_consuming.clone(),
        tracker.clone(),
    ));

    // The `OUTBOX_*` settings, for the repairer named `role`.
    let repair_config = |role: &str| {
        let mut config =
            repairer::RepairerConfig::new(format!("{}/{role}", settings.jobs.worker_id));
        config.interval = settings.outbox.repair_interval;
        config.batch = settings.outbox.repair_batch;
        config.grace = settings.outbox.repair_grace;
        config.retention = settings.outbox.retention;
        config
    };
    let repairer = Arc::new(repairer::Repairer::new(
        jobs.store.clone(),
        jobs.publisher.clone(),
        repair_config("repairer"),
    ));
    let repairing = tokio::spawn({
        let repairer = repairer.clone();
        let stop = stop_background.clone();
        async move { repairer.run(stop).await }
    });
    // The mirror's rows: relayed at once (no grace: nobody else publishes them), repaired and
    // purged on the same interval, apart from the AMQP rows.
    let mut mirroring = jobs.mirror.clone().map(|mirror| {
        let mut config = repair_config("mirror");
        config.batch = config.batch.max(100);
        config.grace = Duration::ZERO;
        config.poll = Some(MIRROR_POLL);
        let relay = Arc::new(repairer::Repairer::new(jobs.store.clone(), mirror, config));
        let stop = stop_background.clone();
        let running = tokio::spawn({
            let relay = relay.clone();
            async move { relay.run(stop).await }
        });
        (relay, running)
    });
    let sweeper = Sweeper {
        core: jobs.core.clone(),
        interval: settings.jobs.lease,
        grace: settings.jobs.lease * 2,
    };
    let listening = tokio::spawn(crate::cancels::listen(
        jobs.store.clone(),
        jobs.core.clone(),
        stop_background.clone(),
    ));
    let sweeping = tokio::spawn({
        let stop = stop_background.clone();
        async move { sweeper.run(stop).await }
    });
    let retention = crate::retention::Retention {
        core: jobs.core.clone(),
        store: jobs.store.clone(),
        settings: settings.retention,
    };
    let retaining = tokio::spawn({
        let stop = stop_background.clone();
        async move { retention.run(stop).await }
    });

    shutdown.cancelled().await;
    readiness.start_draining();
    tracing::info!(
        delay_secs = settings.shutdown.readyz_drain_delay.as_secs(),
        "Draining: /readyz reports 503."
    );
    tokio::time::sleep(settings.shutdown.readyz_drain_delay).await;
    stop_consuming.cancel();
    let stopped = consuming.await.ok().flatten();
    tracker.close();
    if tokio::time::timeout(settings.shutdown.grace, tracker.wait())
        .await
        .is_err()
    {
        let unsettled = tracker.len() as u64;
        crate::metrics::requeued(crate::job::Requeue::Shutdown, unsettled);
        tracing::warn!(jobs = unsettled, "In-flight jobs did not finish within SHUTDOWN_GRACE_SEC; their messages will be redelivered.");
    }
    if let Some(stopped) = stopped {
        let _ = stopped.channel.close(200, "OK".into()).await;
        let _ = stopped.connection.close(200, "OK".into()).await;
    }
    stop_background.cancel();
    let _ = repairing.await;
    if let Some((_, running)) = &mut mirroring {
        let _ = running.await;
    }
    let _ = sweeping.await;
    let _ = retaining.await;
    let _ = listening.await;
    // Whatever the last jobs recorded but could not publish goes out now, if it can.
    let _ = repairer.repair_once(&CancellationToken::new()).await;
    if let Some((relay, _)) = &mirroring {
        let _ = relay.repair_once(&CancellationToken::new()).await;
    }
}

/// Waits until PostgreSQL, RabbitMQ and S3 answer (see [`crate::dependencies`]), then
/// migrates the state database and declares the topology, which stop the start when they
/// fail. `Ok(false)`: stopped while waiting.
async fn prepare(
    settings: &Settings,
    pool: &sqlx::PgPool,
    queue: &ConsumerConfig,
    publisher: &publisher::Publisher,
    objects: &ObjectStore,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool> {
    let options = pool.connect_options();
    if dependencies::wait_for("postgres", shutdown, || probes::postgres(&options))
        .await?
        .is_none()
    {
        return Ok(false);
    }
    if settings.database().is_some_and(|d| d.run_migrations) {
        schema::migrate(pool).await.map_err(|e| {
            anyhow::anyhow!(
                "Failed to migrate the state database: {}",
                contract::redact(&e.to_string())
            )
        })?;
    }
    let broker = dependencies::wait_for("rabbitmq", shutdown, || consumer::probe(queue));
    let Some(connection) = broker.await? else {
        return Ok(false);
    };
    // Declares the topology: a conflicting queue stops the start here.
    let declared = topology::declare(&connection, &queue.events_exchange, &queue.work_queue).await;
    let _ = connection.close(200, "OK".into()).await;
    let dead_letters = declared?;
    tracing::info!(
        queue = %queue.work_queue,
        dead_letter_exchange = dead_letters.exchange,
        dead_letter_queue = dead_letters.queue,
        provisioned_as = dead_letters.origin,
        "Refused job messages are dead-lettered as the work queue was provisioned."
    );
    publisher
        .declare_exchange()
        .await
        .context("Failed to declare the events exchange")?;
    Ok(
        dependencies::wait_for("s3", shutdown, || probes::bucket(objects))
            .await?
            .is_some(),
    )
}

/// The PostgreSQL state database, or the one problem that stops a start in the Manager mode:
/// its job store (the `mongostate` crate behind the job core's ports) is not wired into the
/// start yet, and a Worker that consumed without it would run the Manager's jobs against a
/// database nobody reads.
fn postgres_state(settings: &Settings) -> anyhow::Result<&DatabaseSettings> {
    match &settings.state {
        StateSettings::Postgres(database) => Ok(database),
        StateSettings::MongoDb(_) => Err(anyhow::anyhow!(
            "the Manager mode's job store is not wired yet in this version: the state backend \
             is mongodb ({}); run with the PostgreSQL backend (DATABASE_URL, or \
             STATE_BACKEND=postgres)",
            settings.state_chosen_by
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &[(&str, &str)], without: &str) -> Settings {
        let minimal = [
            (
                "APP_ENC_KEY",
                "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8=",
            ),
            ("STREAMING_ENABLED", "true"),
            ("RABBITMQ_JOB_EVENTS_EXCHANGE", "fetcher.job.events"),
            ("STREAMING_CLOUDEVENTS_SOURCE", "//lerian/fetcher"),
            ("DATABASE_URL", "postgres://app@db.internal/state"),
            ("OBJECT_STORAGE_BUCKET", "results"),
        ];
        let vars = minimal
            .iter()
            .filter(|(name, _)| *name != without)
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_vars(vars).expect("valid")
    }

    #[test]
    fn the_manager_mode_stops_the_start_with_one_problem() {
        let mongo = settings(
            &[
                ("MONGO_HOST", "mongo.internal"),
                ("MONGO_NAME", "fetcher-db"),
                ("MONGO_USER", "fetcher"),
                ("MONGO_PASSWORD", "mongo-secret-pw"),
                ("ALLOW_INSECURE_TLS", "true"),
            ],
            "DATABASE_URL",
        );
        let error = postgres_state(&mongo).unwrap_err().to_string();
        assert!(
            error.starts_with("the Manager mode's job store is not wired yet in this version"),
            "{error}"
        );
        assert!(!error.contains("mongo-secret-pw"), "{error}");
        let postgres = settings(&[], "");
        assert!(postgres_state(&postgres).is_ok());
    }
}
