//! The extraction itself: resolve, plan, then query every datasource in parallel, fail-fast.

use std::sync::Arc;
use std::time::Duration;

use contract::message::{FilterCondition, Filters, MappedFields};
use std::collections::BTreeMap;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::cancel::Session;
use crate::catalog::TableName;
use crate::config::EngineConfig;
use crate::connection::{AllowedSchemas, ConnectionConfig, Resolver};
use crate::datasource::Datasource;
use crate::error::{EngineError, Result};
use crate::plan::{self, Naming};
use crate::pools::{Pool, Pools};
use crate::result::{Assembly, Budget, ConnectionResult, Extracted, Extraction, Part};
use crate::watch::{DatasourceEnd, Observer, Progress, Watch};
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
    /// Where its part of the document goes ([`Assembly`]).
    chunks: mpsc::Sender<Vec<u8>>,
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
                        chunks,
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
    /// One datasource, its start and end told to the job's observer.
    async fn watched_datasource(&self, job: DatasourceJob) -> Result<Part> {
        job.observer.started(&job.connection);
        let part = self.extract_datasource(&job).await;
        let end = match &part {
            Ok(part) => DatasourceEnd::Succeeded { rows: part.rows() },
            Err(error) => DatasourceEnd::Failed(error),
        };
        job.observer.ended(&job.connection, &end);
        part
    }

    async fn extract_datasource(&self, job: &DatasourceJob) -> Result<Part> {
        let name = job.connection.as_str();
        let config = self.resolver.resolve(name).await?;
        match self.pools.get(&config).await? {
            Pool::Postgres(pool) => {
                let conn = pool
                    .acquire()
                    .await
                    .map_err(|e| EngineError::connect(name, &e))?;
                let session = Session::postgres(conn, pool);
                self.extract_from::<postgres::Source>(session, job, &config)
                    .await
            }
            Pool::MongoDb(client) if plugin_crm::is_plugin_crm(name, config.kind) => {
                let job = crm_job(job, &self.config.crm.hash_key)?;
                let session = mongo::CrmSession::new(
                    mongo::Session::new(client, self.config.timeout),
                    self.config.crm.clone(),
                );
                self.extract_from::<mongo::CrmSource>(session, &job, &config)
                    .await
            }
            Pool::MongoDb(client) => {
                let session = mongo::Session::new(client, self.config.timeout);
                self.extract_from::<mongo::Source>(session, job, &config)
                    .await
            }
            Pool::SqlServer(target) => {
                let client = target.connect(name).await?;
                self.extract_from::<sqlserver::Source>(client, job, &config)
                    .await
            }
            Pool::MySql(pool) => {
                let conn = pool
                    .acquire()
                    .await
                    .map_err(|e| EngineError::connect(name, &e))?;
                let session = Session::mysql(conn, pool);
                self.extract_from::<mysql::Source>(session, job, &config)
                    .await
            }
        }
    }

    /// Discovers, plans and streams one datasource's tables through its session. Discovery is
    /// the engine's own fixed catalog queries, before the rows are read (MariaDB's
    /// `information_schema` silently skips a view whose function writes when read in a read-only
    /// transaction, which would report a real view as missing instead of failing on its write).
    /// However it ends, the session ends too: only an abort (a drop mid-way) cancels on the
    /// server.
    async fn extract_from<S: Datasource>(
        &self,
        mut session: S::Session,
        job: &DatasourceJob,
        config: &ConnectionConfig,
    ) -> Result<Part> {
        let name = job.connection.as_str();
        let database = config.database.as_str();
        let naming = S::naming(database);
        let streamed = async {
            let tables = table_names(name, job, &naming, config.schemas.as_ref())?;
            let catalog = S::load_catalog(&mut session, name, database, &tables).await?;
            let plans = plan::plan_datasource(
                name,
                &job.tables,
                job.filters.as_ref(),
                &catalog,
                &naming,
                &self.config.limits,
            )?;
            let mut out =
                ConnectionResult::new(name, job.first, job.budget.clone(), job.chunks.clone())?
                    .watched(Progress::new(job.observer.clone(), name));
            S::stream(&mut session, name, &plans, &mut out).await?;
            out.finish().await
        }
        .await;
        S::finish(session);
        streamed
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
