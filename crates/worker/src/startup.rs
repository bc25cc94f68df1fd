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
use sqlx::postgres::PgConnectOptions;
use sqlx::ConnectOptions;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::amqp::consumer::{self, ConsumerConfig};
use crate::amqp::topology;
use crate::config::{DatabaseSettings, MongoSettings, Settings, StateSettings};
use crate::health::{self, Readiness};
use crate::http_server::HttpServer;
use crate::job::{JobCore, JobSettings, MessageLimits, Sweeper};
use crate::{adapters, adapters_manager, api};
use crate::{checks, dependencies, manager_state, metrics, probes, state_pool};
use storage::ObjectStore;

/// What runs jobs, and what the repairer and the drain use beside it.
struct Jobs {
    core: Arc<JobCore>,
    backend: Backend,
    publisher: Arc<publisher::Publisher>,
    /// The MQTT mirror's publisher, when the mirror is on.
    mirror: Option<Arc<publisher::mqtt::MqttPublisher>>,
}

/// The state backend: where jobs and their events are kept, and what only it runs.
#[derive(Clone)]
enum Backend {
    /// The Worker's PostgreSQL: the control API's cancel listener, retention and the MQTT
    /// mirror run on it.
    Postgres {
        pool: sqlx::PgPool,
        store: outbox::Store,
        /// The published marks of the jobs' events, batched; flushed and closed at the drain,
        /// before the pool closes.
        marks: repairer::Marks,
    },
    /// The Manager's MongoDB (the Manager mode): jobs in its `job` collection, events in
    /// lib-streaming's outbox and this Worker's own; the control API when asked for.
    Manager {
        client: mongodb::Client,
        store: mongostate::ManagerStore,
    },
}

/// How often the mirror's relay looks for MQTT rows: they are recorded unleased, and nobody
/// publishes them right after their commit.
const MIRROR_POLL: Duration = Duration::from_millis(200);

/// Longest the drain waits for the last published marks; what is still unmarked then is
/// published again by a repairer.
const MARKS_CLOSE: Duration = Duration::from_secs(5);

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
    objects: ObjectStore,
}

impl Application {
    /// Sets everything up without asking any dependency (they may not answer yet) and binds the
    /// health server; [`run_until_stopped`](Self::run_until_stopped) waits for them.
    pub async fn build(settings: Settings) -> anyhow::Result<Application> {
        let prometheus = metrics::install().context("Failed to install the metrics recorder")?;

        let (backend, objects, publisher, core) = match &settings.state {
            StateSettings::Postgres(_) => {
                let Wired {
                    pool,
                    store,
                    objects,
                    publisher,
                    marks,
                    core,
                } = wire(&settings).await?;
                (
                    Backend::Postgres { pool, store, marks },
                    objects,
                    publisher,
                    core,
                )
            }
            StateSettings::MongoDb(_) => {
                let WiredManager {
                    client,
                    store,
                    objects,
                    publisher,
                    core,
                } = wire_manager(&settings).await?;
                (Backend::Manager { client, store }, objects, publisher, core)
            }
        };
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
        crate::metrics::capped_datasources(settings.jobs.datasource_caps.keys());
        let consumer = ConsumerConfig {
            uri: settings.amqp.uri.clone(),
            work_queue: settings.amqp.work_queue.clone(),
            events_exchange: settings.amqp.events_exchange.clone(),
            prefetch: settings.amqp.consumers,
            worker_id: settings.jobs.worker_id.clone(),
        };
        // The control API reads and changes jobs where the backend keeps them (in the Manager
        // mode it is off unless `API_ENABLED=true` is set).
        let store: Arc<dyn api::ControlStore> = match &backend {
            Backend::Postgres { store, .. } => Arc::new(store.clone()),
            Backend::Manager { store, .. } => Arc::new(store.clone()),
        };
        let control = Some(Arc::new(api::ControlApi {
            store,
            core: core.clone(),
        }));
        let jobs = Jobs {
            core,
            backend,
            publisher,
            mirror,
        };
        if settings.amqp.allow_legacy_body_signature {
            tracing::warn!(
                "RABBITMQ_ALLOW_LEGACY_BODY_SIGNATURE_FALLBACK is on: messages signed over their body \
                 alone are accepted. That form binds no tenant, job id, exchange or routing key, so \
                 such messages must carry no X-Tenant-ID; fetcher_messages_legacy_signature_total counts them."
            );
        }
        let consumer_connected = Arc::new(AtomicBool::new(false));
        let state_check: Box<dyn health::Check> = match &jobs.backend {
            Backend::Postgres { pool, .. } => Box::new(checks::Postgres(pool.clone())),
            Backend::Manager { client, .. } => Box::new(manager_state::MongoDb(client.clone())),
        };
        let mut checks: Vec<Box<dyn health::Check>> = vec![
            state_check,
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
        let control_api = match (settings.http.api_port, control) {
            (Some(port), Some(control)) => Some(
                HttpServer::bind("api", settings.http.bind, port, api::router(control))
                    .await
                    .with_context(|| {
                        format!(
                            "Failed to listen on HEALTH_BIND {} API_PORT {port}",
                            settings.http.bind
                        )
                    })?,
            ),
            _ => None,
        };
        Ok(Application {
            settings,
            jobs,
            consumer,
            consumer_connected,
            readiness,
            health,
            control_api,
            objects,
        })
    }

    /// Serves the health server, waits for the dependencies, then runs until `shutdown` is
    /// cancelled and drains: `/readyz` says 503 at once, consuming stops
    /// `READYZ_DRAIN_DELAY_SEC` later, in-flight jobs finish, their published marks are
    /// flushed, the outbox is relayed once more, and everything closes.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let Application {
            settings,
            jobs,
            consumer,
            consumer_connected,
            readiness,
            health,
            control_api,
            objects,
        } = self;
        let stop_http = CancellationToken::new();
        let http = tokio::spawn(health.serve(stop_http.clone()));
        let control_http = control_api.map(|server| tokio::spawn(server.serve(stop_http.clone())));
        let prepared = prepare(
            &settings,
            &jobs.backend,
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
        if let Backend::Postgres { store, marks, .. } = &jobs.backend {
            // Already closed at the drain when jobs ran; the marks need the pool. Then the
            // kept connections, then the pool.
            marks.close(MARKS_CLOSE).await;
            store.close().await;
        }
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
    /// The published marks of the core's events, batched across jobs: close it (it flushes what
    /// waits) before the pool.
    pub marks: repairer::Marks,
    pub core: Arc<JobCore>,
}

/// Wires the job core from `settings`: the state database's pool and store (mirrored when the
/// MQTT mirror is on), the connection store, the engine, the bucket and the event publisher
/// with its batched marks (whose task starts here).
pub async fn wire(settings: &Settings) -> anyhow::Result<Wired> {
    let database = postgres_state(settings)?;
    let options = PgConnectOptions::from_str(database.url.expose_secret())
        .map_err(|_| anyhow::anyhow!("DATABASE_URL is not a valid PostgreSQL URL"))?
        .disable_statement_logging();
    // Driver errors may name the state database's and the broker's hosts and users bare:
    // redaction learns them, as the engine's resolver does for datasources.
    contract::redaction::remember_host(options.get_host());
    contract::redaction::remember_user(options.get_username());
    remember_broker(settings);
    let pool = state_pool::connect_lazy(options, database.max_connections);
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
    let Services {
        engine,
        objects,
        publisher,
        jobs,
    } = services(settings, resolver).await?;
    let marks = repairer::Marks::start(store.clone(), repairer::MarksConfig::default());
    let ports = adapters::ports(
        store.clone(),
        objects.clone(),
        publisher.clone(),
        marks.clone(),
        engine,
    );
    Ok(Wired {
        pool,
        store,
        objects,
        publisher,
        marks,
        core: Arc::new(JobCore::new(ports, jobs)),
    })
}

/// The Manager mode's job core on the real services, as [`Wired`] is the PostgreSQL mode's.
pub struct WiredManager {
    pub client: mongodb::Client,
    pub store: mongostate::ManagerStore,
    pub objects: ObjectStore,
    pub publisher: Arc<publisher::Publisher>,
    pub core: Arc<JobCore>,
}

/// The Manager mode's job core: the Manager's MongoDB for the jobs, their events and the
/// registered connections, beside the same engine, bucket and publisher. Nothing is asked of
/// MongoDB yet (the driver connects on its first command).
pub async fn wire_manager(settings: &Settings) -> anyhow::Result<WiredManager> {
    let mongo = manager_state_settings(settings)?;
    remember_broker(settings);
    let client = manager_state::client(mongo).await?;
    let handle = mongostate::Store::new(client.clone(), &mongo.name);
    let credentials = mongostate::connections::Credentials::new(
        settings.keys.credentials().clone(),
        settings.key_version.clone(),
    );
    let stored = mongostate::ManagerConnections::new(handle.clone(), credentials);
    let resolver = Resolver::with_stored(settings.datasources.clone(), Some(Arc::new(stored)));
    let Services {
        engine,
        objects,
        publisher,
        jobs,
    } = services(settings, resolver).await?;
    let mut store = mongostate::ManagerStore::new(
        handle,
        mongostate::ManagerConfig {
            exchange: settings.amqp.events_exchange.clone(),
            source: settings.amqp.cloudevents_source.clone(),
        },
    )
    .with_windows(mongostate::outbox_claim::ClaimWindows {
        claim_timeout: settings.outbox.manager_claim_timeout,
        retry_after: settings.outbox.manager_retry_after,
    });
    // The mirror's rows go in a collection of their own, in each event's transaction.
    if let Some(mqtt) = &settings.mqtt {
        store = store.mirrored(&mqtt.topic_prefix);
    }
    let ports =
        adapters_manager::manager_ports(store.clone(), objects.clone(), publisher.clone(), engine);
    let core = Arc::new(JobCore::new(ports, jobs));
    Ok(WiredManager {
        client,
        store,
        objects,
        publisher,
        core,
    })
}

/// What both backends run jobs with.
struct Services {
    engine: engine::Engine,
    objects: ObjectStore,
    publisher: Arc<publisher::Publisher>,
    jobs: JobSettings,
}

async fn services(settings: &Settings, resolver: Resolver) -> anyhow::Result<Services> {
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
        datasource_caps: Arc::new(settings.jobs.datasource_caps.clone()),
        limits: MessageLimits {
            max_message_bytes: settings.amqp.max_message_bytes,
            max_metadata_bytes: settings.amqp.max_metadata_bytes,
        },
    };
    Ok(Services {
        engine,
        objects,
        publisher,
        jobs: settings_of_jobs,
    })
}

/// Teaches redaction the broker's host and user, which driver errors may name bare.
fn remember_broker(settings: &Settings) {
    if let Ok(uri) = settings
        .amqp
        .uri
        .expose_secret()
        .parse::<lapin::uri::AMQPUri>()
    {
        contract::redaction::remember_host(&uri.authority.host);
        contract::redaction::remember_user(&uri.authority.userinfo.username);
    }
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
        state_backend = settings.state.name(),
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
    let background = Background::start(settings, jobs, &stop_background);

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
    // The last jobs' marks, before the last relay: what they mark it need not publish again.
    if let Backend::Postgres { marks, .. } = &jobs.backend {
        marks.close(MARKS_CLOSE).await;
    }
    stop_background.cancel();
    background.stop().await;
}

/// The loops that run beside the consumer: the repairers, the sweeper, and on the PostgreSQL
/// backend the cancel listener and retention.
struct Background {
    running: Vec<tokio::task::JoinHandle<()>>,
    /// Each relays once more at the end of the drain: whatever the last jobs recorded but
    /// could not publish goes out then, if it can.
    last_relays: Vec<Arc<dyn LastRelay>>,
}

/// A repairer's one pass, run at the end of the drain.
trait LastRelay: Send + Sync {
    fn relay_once(&self) -> futures_util::future::BoxFuture<'_, ()>;
}

impl LastRelay for repairer::Repairer {
    fn relay_once(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.repair_once(&CancellationToken::new()).await;
        })
    }
}

impl LastRelay for repairer::ManagerRepairer {
    fn relay_once(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.repair_once(&CancellationToken::new()).await;
        })
    }
}

impl LastRelay for repairer::ManagerMirror {
    fn relay_once(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.relay_once(&CancellationToken::new()).await;
        })
    }
}

impl Background {
    fn start(settings: &Settings, jobs: &Jobs, stop: &CancellationToken) -> Background {
        let mut background = Background {
            running: Vec::new(),
            last_relays: Vec::new(),
        };
        let sweeper = Sweeper {
            core: jobs.core.clone(),
            interval: settings.jobs.lease,
            grace: settings.jobs.lease * 2,
        };
        background.spawn(stop, move |stop| async move { sweeper.run(stop).await });
        match &jobs.backend {
            Backend::Postgres { store, .. } => {
                background.start_postgres(settings, jobs, store, stop);
            }
            Backend::Manager { store, .. } => {
                background.start_manager(settings, jobs, store, stop);
            }
        }
        background
    }

    fn spawn<F, Fut>(&mut self, stop: &CancellationToken, run: F)
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.running.push(tokio::spawn(run(stop.clone())));
    }

    fn start_postgres(
        &mut self,
        settings: &Settings,
        jobs: &Jobs,
        store: &outbox::Store,
        stop: &CancellationToken,
    ) {
        let repairer = Arc::new(repairer::Repairer::new(
            store.clone(),
            jobs.publisher.clone(),
            repair_config(settings, "repairer"),
        ));
        self.spawn(stop, {
            let repairer = repairer.clone();
            move |stop| async move { repairer.run(stop).await }
        });
        self.last_relays.push(repairer);
        // The mirror's rows: relayed at once (no grace: nobody else publishes them), repaired
        // and purged on the same interval, apart from the AMQP rows.
        if let Some(mirror) = jobs.mirror.clone() {
            let mut config = repair_config(settings, "mirror");
            config.batch = config.batch.max(100);
            config.grace = Duration::ZERO;
            config.poll = Some(MIRROR_POLL);
            let relay = Arc::new(repairer::Repairer::new(store.clone(), mirror, config));
            self.spawn(stop, {
                let relay = relay.clone();
                move |stop| async move { relay.run(stop).await }
            });
            self.last_relays.push(relay);
        }
        self.spawn(stop, {
            let (store, core) = (store.clone(), jobs.core.clone());
            move |stop| crate::cancels::listen(store, core, stop)
        });
        let retention = crate::retention::Retention {
            core: jobs.core.clone(),
            store: store.clone(),
            settings: settings.retention,
        };
        self.spawn(stop, move |stop| async move { retention.run(stop).await });
    }

    fn start_manager(
        &mut self,
        settings: &Settings,
        jobs: &Jobs,
        store: &mongostate::ManagerStore,
        stop: &CancellationToken,
    ) {
        let mut config =
            repairer::ManagerRepairerConfig::new(format!("{}/repairer", settings.jobs.worker_id));
        config.interval = settings.outbox.repair_interval;
        config.grace = settings.outbox.repair_grace;
        config.retention = settings.outbox.retention;
        let repairer = Arc::new(repairer::ManagerRepairer::new(
            store.clone(),
            jobs.publisher.clone(),
            config,
        ));
        self.spawn(stop, {
            let repairer = repairer.clone();
            move |stop| async move { repairer.run(stop).await }
        });
        self.last_relays.push(repairer);
        // The mirror's rows (`fetcher_worker_mirror`): relayed at once (no grace: nobody else
        // publishes them), polled as the PostgreSQL mode polls its MQTT rows.
        if let Some(mirror) = jobs.mirror.clone() {
            let mut config =
                repairer::ManagerMirrorConfig::new(format!("{}/mirror", settings.jobs.worker_id));
            config.poll = MIRROR_POLL;
            config.batch = settings.outbox.repair_batch.max(100);
            let relay = Arc::new(repairer::ManagerMirror::new(store.clone(), mirror, config));
            self.spawn(stop, {
                let relay = relay.clone();
                move |stop| async move { relay.run(stop).await }
            });
            self.last_relays.push(relay);
        }
    }

    /// Waits for every loop to stop (`stop` was cancelled), then relays once more.
    async fn stop(self) {
        for running in self.running {
            let _ = running.await;
        }
        for relay in &self.last_relays {
            relay.relay_once().await;
        }
    }
}

/// The `OUTBOX_*` settings, for the repairer named `role`.
fn repair_config(settings: &Settings, role: &str) -> repairer::RepairerConfig {
    let mut config = repairer::RepairerConfig::new(format!("{}/{role}", settings.jobs.worker_id));
    config.interval = settings.outbox.repair_interval;
    config.batch = settings.outbox.repair_batch;
    config.grace = settings.outbox.repair_grace;
    config.retention = settings.outbox.retention;
    config
}

/// Waits until the state backend, RabbitMQ and S3 answer (see [`crate::dependencies`]), then
/// migrates the state database (PostgreSQL) and declares the topology, which stop the start
/// when they fail. `Ok(false)`: stopped while waiting.
async fn prepare(
    settings: &Settings,
    backend: &Backend,
    queue: &ConsumerConfig,
    publisher: &publisher::Publisher,
    objects: &ObjectStore,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool> {
    match backend {
        Backend::Postgres { pool, .. } => {
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
        }
        Backend::Manager { client, store } => {
            if dependencies::wait_for("mongodb", shutdown, || manager_state::probe(client))
                .await?
                .is_none()
            {
                return Ok(false);
            }
            // A job's end is a multi-document transaction (its state with its event's row): a
            // standalone server stops the start here rather than failing every job.
            store.check_transactions().await.map_err(|e| {
                anyhow::anyhow!(
                    "The Manager's MongoDB cannot run transactions (run it as a replica set, as \
                     the chart does): {e}"
                )
            })?;
            store.ensure_indexes().await.map_err(|e| {
                anyhow::anyhow!(
                    "Failed to create the outbox and Worker indexes on the Manager's MongoDB: {e}"
                )
            })?;
        }
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

/// The Manager's MongoDB settings, which [`wire_manager`] needs.
fn manager_state_settings(settings: &Settings) -> anyhow::Result<&MongoSettings> {
    match &settings.state {
        StateSettings::MongoDb(mongo) => Ok(mongo),
        StateSettings::Postgres(_) => Err(anyhow::anyhow!(
            "the state backend is postgresql ({}): the Manager mode's job store cannot be wired",
            settings.state_chosen_by
        )),
    }
}

/// The PostgreSQL state database's settings, which [`wire`] needs.
fn postgres_state(settings: &Settings) -> anyhow::Result<&DatabaseSettings> {
    match &settings.state {
        StateSettings::Postgres(database) => Ok(database),
        StateSettings::MongoDb(_) => Err(anyhow::anyhow!(
            "the state backend is mongodb ({}): the PostgreSQL job store cannot be wired",
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
    fn the_postgresql_store_is_wired_from_postgresql_settings_only() {
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
        assert!(error.starts_with("the state backend is mongodb"), "{error}");
        assert!(!error.contains("mongo-secret-pw"), "{error}");
        let postgres = settings(&[], "");
        assert!(postgres_state(&postgres).is_ok());
    }
}
