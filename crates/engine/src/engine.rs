//! The extraction itself: resolve, plan, then query every datasource in parallel, fail-fast.

use std::sync::Arc;
use std::time::Duration;

use contract::message::{FilterCondition, Filters, MappedFields};
use std::collections::BTreeMap;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cancel::Session;
use crate::catalog::TableName;
use crate::config::EngineConfig;
use crate::connection::{AllowedSchemas, ConnectionConfig, Resolver};
use crate::datasource::Datasource;
use crate::error::{EngineError, Result};
use crate::plan::{self, Naming};
use crate::pools::{Pool, Pools};
use crate::result::{Assembly, Budget, ConnectionResult, Extracted, Extraction, Part};
use crate::watch::{DatasourceEnd, Observer, Progress, Retry, Ticks, Watch};
use crate::{mongo, mysql, plugin_crm, postgres, sqlserver};

/// Extracts jobs' data. Cheap to share: clone it, or keep one in an `Arc`.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    config: EngineConfig,
    resolver: Resolver,
    pools: Pools,
    /// The progress clock of all its extractions.
    ticks: Ticks,
}

/// How long an extraction may still take: the job's timeout, less what its earlier runs used
/// (lifecycle §2: a job cannot outlive its timeout by being retried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeLimit {
    /// The job's whole timeout (`timeoutSeconds`, else `ENGINE_EXTRACTION_TIMEOUT_SEC`).
    pub timeout: Duration,
    /// How long ago the job first started.
    pub elapsed: Duration,
}

impl TimeLimit {
    /// A job starting now.
    pub fn fresh(timeout: Duration) -> TimeLimit {
        TimeLimit {
            timeout,
            elapsed: Duration::ZERO,
        }
    }

    /// What is left; `None` once nothing is.
    pub fn remaining(&self) -> Option<Duration> {
        self.timeout
            .checked_sub(self.elapsed)
            .filter(|left| !left.is_zero())
    }
}

/// What one datasource task needs, owned, so it can run on its own task.
#[derive(Clone)]
struct DatasourceJob {
    connection: String,
    tables: BTreeMap<String, Vec<String>>,
    filters: Option<BTreeMap<String, BTreeMap<String, FilterCondition>>>,
    first: bool,
    budget: Arc<Budget>,
    observer: Arc<dyn Observer>,
    /// The extraction's graceful stop: a datasource waiting to be retried ends at once.
    graceful: CancellationToken,
    /// Where its part of the document goes ([`Assembly`]).
    chunks: mpsc::Sender<Vec<u8>>,
    /// Waited on before the read ([`crate::Admission`]).
    admission: Arc<dyn crate::Admission>,
}

/// A failed attempt at one datasource.
struct Failure {
    error: EngineError,
    /// Whether some of its output already left it (into the document or a spool): then it
    /// cannot be retried without the document holding that output twice.
    emitted: bool,
    /// Whether it failed at its first statement on a connection lent by a pool (which tests
    /// only connections idle more than [`sqlpool::TEST_AFTER_IDLE`]): a transient failure
    /// there is a dead pooled connection more often than a server in trouble.
    first_pooled_statement: bool,
}

impl From<EngineError> for Failure {
    /// A failure before the datasource wrote anything.
    fn from(error: EngineError) -> Failure {
        Failure {
            error,
            emitted: false,
            first_pooled_statement: false,
        }
    }
}

/// Chunks of the document the engine may have put out and its consumer not yet taken.
pub const OUTPUT_CHUNKS: usize = 4;

impl Engine {
    pub fn new(config: EngineConfig, resolver: Resolver) -> Engine {
        let pools = Pools::new(&config);
        Engine {
            inner: Arc::new(Inner {
                config,
                resolver,
                pools,
                ticks: Ticks::default(),
            }),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Whether a job's shape (datasources, tables, fields) is within the limits: cheap, for the
    /// caller to refuse a job before storing anything for it.
    pub fn check_limits(&self, mapped: &MappedFields) -> Result<()> {
        self.inner.config.limits.check(mapped)
    }

    /// Extracts a job's tables into the result JSON within `ENGINE_EXTRACTION_TIMEOUT_SEC`,
    /// unwatched, collected whole; see [`Engine::extract_within`].
    pub async fn extract(&self, mapped: &MappedFields, filters: &Filters) -> Result<Extraction> {
        let limit = TimeLimit::fresh(self.inner.config.timeout);
        self.extract_within(mapped, filters, limit, Watch::none())
            .await
    }

    /// [`Engine::extract_streamed`], with the document collected whole: for tests, benchmarks
    /// and tools; the Worker streams.
    pub async fn extract_within(
        &self,
        mapped: &MappedFields,
        filters: &Filters,
        limit: TimeLimit,
        watch: Watch,
    ) -> Result<Extraction> {
        let (out, mut chunks) = mpsc::channel::<Vec<u8>>(OUTPUT_CHUNKS);
        let collect = async {
            let mut plaintext = Vec::new();
            while let Some(chunk) = chunks.recv().await {
                plaintext.extend_from_slice(&chunk);
            }
            plaintext
        };
        let (extracted, plaintext) = tokio::join!(
            self.extract_streamed(mapped, filters, limit, watch, out),
            collect
        );
        extracted.map(|extracted| Extraction {
            plaintext,
            row_count: extracted.row_count,
        })
    }

    /// Extracts a job's tables into the result JSON, sent in order on `out` in chunks
    /// ([`crate::Chunks`] is the receiving end), at most `ENGINE_MAX_PARALLEL_DATASOURCES` at a time,
    /// telling `watch.observer` how each datasource goes. The first datasource in name order
    /// streams straight to `out` at its pace; the others are spooled meanwhile (memory, then
    /// an unnamed file in `ENGINE_SPILL_DIR`) and follow in order.
    ///
    /// The document is complete only when this returns `Ok`: the first failing datasource ends
    /// the extraction, the others are cancelled (their statements on the source servers too),
    /// and whatever was sent must be discarded. When `limit` runs out, the extraction ends the
    /// same way, with [`EngineError::Timeout`] naming the job's whole timeout. A graceful stop
    /// ([`Watch::graceful`]) lets the running datasources finish and starts no other, then ends
    /// with [`EngineError::Canceled`]. A dropped `out` receiver ends it with
    /// [`EngineError::Abandoned`].
    pub async fn extract_streamed(
        &self,
        mapped: &MappedFields,
        filters: &Filters,
        limit: TimeLimit,
        watch: Watch,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Extracted> {
        self.check_limits(mapped)?;
        for connection in filters.keys() {
            if !mapped.contains_key(connection) {
                return Err(EngineError::Filter {
                    detail: format!("on {connection}: the connection is not in mappedFields"),
                });
            }
        }
        let Some(remaining) = limit.remaining() else {
            return Err(EngineError::Timeout(limit.timeout));
        };
        match tokio::time::timeout(remaining, self.run(mapped, filters, watch, out)).await {
            Ok(result) => result,
            Err(_) => Err(EngineError::Timeout(limit.timeout)),
        }
    }

    async fn run(
        &self,
        mapped: &MappedFields,
        filters: &Filters,
        watch: Watch,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Extracted> {
        let budget = Arc::new(Budget::new(self.inner.config.max_result_bytes));
        let (mut assembly, senders) = Assembly::new(mapped.len(), out, self.inner.config.spill());
        let mut pending = mapped
            .iter()
            .zip(senders)
            .enumerate()
            .map(|(index, ((connection, tables), chunks))| {
                (
                    index,
                    DatasourceJob {
                        connection: connection.clone(),
                        tables: tables.clone(),
                        filters: filters.get(connection).cloned(),
                        first: index == 0,
                        budget: budget.clone(),
                        observer: watch.observer.clone(),
                        graceful: watch.graceful.clone(),
                        chunks,
                        admission: watch.admission.clone(),
                    },
                )
            })
            .collect::<Vec<_>>()
            .into_iter();
        let mut row_count = 0;
        // Dropping the set (on error, timeout or cancellation) aborts every running datasource;
        // dropping the assembly closes its spill files.
        let mut running = JoinSet::new();
        let parallel = self.inner.config.max_parallel_datasources.max(1);
        let mut stopping = false;
        loop {
            while !stopping && running.len() < parallel {
                let Some((index, job)) = pending.next() else {
                    break;
                };
                let inner = self.inner.clone();
                running.spawn(async move { (index, inner.watched_datasource(job).await) });
            }
            if stopping && running.is_empty() {
                return Err(EngineError::Canceled);
            }
            assembly.prepare().await?;
            if assembly.complete() {
                break;
            }
            let joined = tokio::select! {
                biased;
                _ = watch.graceful.cancelled(), if !stopping => {
                    // The waiting datasources end now; the running ones are left to finish.
                    stopping = true;
                    for (_, job) in pending.by_ref() {
                        watch.observer.ended(&job.connection, &DatasourceEnd::Canceled);
                    }
                    continue;
                }
                joined = running.join_next(), if !running.is_empty() => joined,
                moved = assembly.next_move() => {
                    assembly.apply(moved?).await?;
                    continue;
                }
            };
            match joined {
                None => {}
                Some(Ok((index, Ok(part)))) => {
                    row_count += part.rows();
                    assembly.part_done(index);
                }
                Some(Ok((_, Err(error)))) => return Err(error),
                Some(Err(join_error)) => {
                    return Err(EngineError::Result(format!(
                        "a datasource task ended abnormally: {join_error}"
                    )))
                }
            }
        }
        let spilled = assembly.spilled();
        let size_bytes = assembly.finish(&budget).await?;
        Ok(Extracted {
            row_count,
            size_bytes,
            spilled,
        })
    }
}

impl Inner {
    /// One datasource, once admitted (its concurrency cap), its start and end told to the
    /// job's observer. The permit is held until the read ends, its retries included. The wait
    /// is inside the extraction's time limit, a forced stop drops it, and a graceful stop ends
    /// it at once, the datasource never started ([`DatasourceEnd::Canceled`]).
    async fn watched_datasource(&self, job: DatasourceJob) -> Result<Part> {
        let _permit = tokio::select! {
            biased;
            _ = job.graceful.cancelled() => {
                job.observer.ended(&job.connection, &DatasourceEnd::Canceled);
                return Err(EngineError::Canceled);
            }
            permit = job.admission.admit(&job.connection) => permit,
        };
        job.observer.started(&job.connection);
        let part = self.retried_datasource(&job).await;
        let end = match &part {
            Ok(part) => DatasourceEnd::Succeeded { rows: part.rows() },
            Err(error) => DatasourceEnd::Failed(error),
        };
        job.observer.ended(&job.connection, &end);
        part
    }

    /// One datasource, read again while its attempts fail transiently, up to
    /// `JOB_RETRY_ATTEMPTS` more times, each after a capped, jittered wait.
    ///
    /// Results stay atomic because an attempt is retried only when nothing of it left the
    /// datasource: its bytes stay in its own buffer until [`crate::result::CHUNK_BYTES`] of them
    /// are written or it finishes, so a failure at connecting, at the catalog, at the first
    /// statement or within its first 128 KiB of rows is dropped whole and read again from
    /// nothing (its budget charge refunded). Once a chunk went out, the first datasource's
    /// bytes are in the output (sealed, uploading) and a later one's are in its spool: a retry
    /// would need to take them back, so the datasource fails as without retries. Buffering a
    /// whole datasource in memory or on disk before letting it out would make every job pay
    /// for the rare retry (memory, or the spill file's I/O, and the first datasource would no
    /// longer stream at its consumer's pace).
    ///
    /// The waits are inside the extraction's time limit (they count toward the job's timeout,
    /// which drops them at once), a forced stop drops them with the task, and a graceful stop
    /// ends a waiting datasource at once ([`EngineError::Canceled`]).
    ///
    /// Apart from those attempts, a read whose first statement failed transiently on a pooled
    /// connection is taken again at once on another, up to once per connection the pool may
    /// hold: the pool lends a connection used within the last second without testing it
    /// ([`sqlpool::TEST_AFTER_IDLE`]), so after a server restart such a connection is
    /// found dead there, as the pool's own test would have found it, and dropped.
    async fn retried_datasource(&self, job: &DatasourceJob) -> Result<Part> {
        let policy = self.config.retry;
        let mut attempt = 1;
        let mut dead_connections = 0;
        loop {
            let Failure {
                error,
                emitted,
                first_pooled_statement,
            } = match self.extract_datasource(job).await {
                Ok(part) => return Ok(part),
                Err(failure) => failure,
            };
            if first_pooled_statement
                && error.is_transient()
                && dead_connections < self.config.pool_max_connections
            {
                dead_connections += 1;
                tracing::info!(
                    datasource = %job.connection,
                    error.message = %error,
                    "A pooled connection to the datasource failed its first statement; reading it again on another."
                );
                continue;
            }
            if !error.is_transient() || attempt > policy.attempts {
                return Err(error);
            }
            if emitted {
                tracing::warn!(
                    datasource = %job.connection,
                    attempt,
                    error.message = %error,
                    "Transient failure not retried: some of the datasource's rows were already in the result."
                );
                return Err(error);
            }
            let wait = policy.delay(attempt);
            let retry = Retry {
                attempt,
                error: &error,
                wait,
            };
            job.observer.retrying(&job.connection, &retry);
            tokio::select! {
                biased;
                _ = job.graceful.cancelled() => return Err(EngineError::Canceled),
                _ = tokio::time::sleep(wait) => {}
            }
            attempt += 1;
        }
    }

    async fn extract_datasource(&self, job: &DatasourceJob) -> Result<Part, Failure> {
        let name = job.connection.as_str();
        let config = self.resolver.resolve(name).await?;
        match self.pools.get(&config).await? {
            Pool::Postgres(kept) => {
                let conn = kept
                    .lend()
                    .await
                    .map_err(|e| EngineError::connect(name, &e))?;
                let session = Session::postgres(conn, kept);
                self.extract_from::<postgres::Source>(session, job, &config, true)
                    .await
            }
            Pool::MongoDb(client) if plugin_crm::is_plugin_crm(name, config.kind) => {
                let job = crm_job(job, &self.config.crm.hash_key)?;
                let session = mongo::CrmSession::new(
                    mongo::Session::new(client, self.config.timeout),
                    self.config.crm.clone(),
                );
                self.extract_from::<mongo::CrmSource>(session, &job, &config, false)
                    .await
            }
            Pool::MongoDb(client) => {
                let session = mongo::Session::new(client, self.config.timeout);
                self.extract_from::<mongo::Source>(session, job, &config, false)
                    .await
            }
            Pool::SqlServer(target) => {
                let client = target.connect(name).await?;
                self.extract_from::<sqlserver::Source>(client, job, &config, false)
                    .await
            }
            Pool::MySql(kept) => {
                let conn = kept
                    .lend()
                    .await
                    .map_err(|e| EngineError::connect(name, &e))?;
                let session = Session::mysql(conn, kept);
                self.extract_from::<mysql::Source>(session, job, &config, true)
                    .await
            }
        }
    }

    /// Discovers, plans and streams one datasource's tables through its session. Discovery is
    /// the engine's own fixed catalog queries, before the rows are read (MariaDB's
    /// `information_schema` silently skips a view whose function writes when read in a read-only
    /// transaction, which would report a real view as missing instead of failing on its write).
    /// However it ends, the session ends too: only an abort (a drop mid-way) cancels on the
    /// server. `pooled`: the session's connection was lent by a pool.
    async fn extract_from<S: Datasource>(
        &self,
        mut session: S::Session,
        job: &DatasourceJob,
        config: &ConnectionConfig,
        pooled: bool,
    ) -> Result<Part, Failure> {
        let name = job.connection.as_str();
        let database = config.database.as_str();
        let naming = S::naming(database);
        let mut out =
            ConnectionResult::new(name, job.first, job.budget.clone(), job.chunks.clone())?
                .watched(Progress::new(job.observer.clone(), name, &self.ticks));
        let mut at_first_statement = false;
        let streamed = async {
            let tables = table_names(name, job, &naming, config.schemas.as_ref())?;
            at_first_statement = true;
            let catalog = S::load_catalog(&mut session, name, database, &tables).await?;
            at_first_statement = false;
            let plans = plan::plan_datasource(
                name,
                &job.tables,
                job.filters.as_ref(),
                &catalog,
                &naming,
                &self.config.limits,
            )?;
            S::stream(&mut session, name, &plans, &mut out).await
        }
        .await;
        S::finish(session, streamed.is_ok());
        match streamed {
            // Finishing only hands the last chunk on: its failures are never transient.
            Ok(()) => out.finish().await.map_err(|error| Failure {
                error,
                emitted: true,
                first_pooled_statement: false,
            }),
            Err(error) => Err(Failure {
                error,
                emitted: !out.discard(),
                first_pooled_statement: pooled && at_first_statement,
            }),
        }
    }
}

/// A `plugin_crm` job's datasource with its filters rewritten to the CRM's `search.*` fields.
fn crm_job(job: &DatasourceJob, hash_key: &str) -> Result<DatasourceJob> {
    let mut rewritten = job.clone();
    for (table, fields) in rewritten.filters.iter_mut().flatten() {
        *fields =
            plugin_crm::rewrite_filters(fields, hash_key).map_err(|e| EngineError::Filter {
                detail: format!("on {}.{table}: {e}", job.connection),
            })?;
    }
    Ok(rewritten)
}

/// The tables the catalog is asked about: every requested one inside `schemas` (all of them
/// without an allow-list). A table outside is never looked up, so the plan reports it exactly
/// as a missing table, revealing nothing about whether it exists.
fn table_names(
    connection: &str,
    job: &DatasourceJob,
    naming: &Naming,
    schemas: Option<&AllowedSchemas>,
) -> Result<Vec<TableName>> {
    let mut names = Vec::with_capacity(job.tables.len());
    for key in job.tables.keys() {
        let name = plan::parse_table_key(key, naming).map_err(|e| match e {
            EngineError::Schema { detail, .. } => EngineError::Schema {
                connection: connection.to_owned(),
                detail,
            },
            other => other,
        })?;
        let schema = name.schema.as_deref().unwrap_or(&naming.default_schema);
        if schemas.is_none_or(|allowed| allowed.contains(schema)) {
            names.push(name);
        }
    }
    // Keys that name one table differently (`t`, `public.t`) ask the catalog once.
    names.sort_unstable();
    names.dedup();
    Ok(names)
}
