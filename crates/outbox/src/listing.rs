//! Finding jobs (`GET /v1/fetcher`): one page of a tenant's jobs, newest first, by keyset over
//! `(created_at, job_id)` on the indexes of migrations 0008 and 0009, never by offset.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder, Row};
use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::read_model::{execution_row, job_row, ExecutionRow, JobRow};
use crate::store::Store;

/// Which jobs a page holds.
#[derive(Debug, Clone, PartialEq)]
pub struct JobQuery<'a> {
    /// The tenant whose jobs these are; `None`: the single-tenant jobs (no `X-Tenant-ID`).
    pub tenant: Option<&'a str>,
    /// Only jobs of this status (a [`contract::lifecycle::JobStatus`] wire name).
    pub status: Option<&'a str>,
    /// Only jobs whose message's `metadata.source` is this (the system that asked for them).
    pub source: Option<&'a str>,
    /// Only jobs created strictly after / strictly before.
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// The last job of the previous page: this page starts strictly after it.
    pub after: Option<(DateTime<Utc>, Uuid)>,
    /// At most this many jobs.
    pub limit: u32,
}

impl Store {
    /// One page of jobs, newest first (`created_at`, then `job_id`, descending).
    pub async fn list_jobs(&self, query: &JobQuery<'_>) -> Result<Vec<JobRow>> {
        let db = |e| OutboxError::sqlx("listing jobs", e);
        let mut sql = page_sql("SELECT * FROM jobs", query);
        let rows = sql.build().fetch_all(self.pool()).await.map_err(db)?;
        rows.iter()
            .map(job_row)
            .collect::<Result<_, sqlx::Error>>()
            .map_err(db)
    }

    /// The plan PostgreSQL chooses for [`list_jobs`](Self::list_jobs)'s statement (`EXPLAIN`
    /// text, one line per node), so tests and benchmarks can check it reads an index in order.
    pub async fn list_jobs_plan(&self, query: &JobQuery<'_>) -> Result<Vec<String>> {
        let db = |e| OutboxError::sqlx("explaining the job listing", e);
        let mut sql = page_sql("EXPLAIN (COSTS OFF) SELECT * FROM jobs", query);
        let rows = sql.build().fetch_all(self.pool()).await.map_err(db)?;
        rows.iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(db)
    }

    /// The executions of each of `job_ids`, by datasource name (a job without any is absent).
    pub async fn executions_of(
        &self,
        job_ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<ExecutionRow>>> {
        let db = |e| OutboxError::sqlx("reading jobs' executions", e);
        let rows = sqlx::query(
            "SELECT job_id, datasource, status, row_count, tables, started_at, ended_at, error,
                    attempts, last_error,
                    (SELECT j.attempts FROM jobs j WHERE j.job_id = e.job_id) AS deliveries
             FROM job_executions e WHERE job_id = ANY($1) ORDER BY job_id, datasource",
        )
        .bind(job_ids)
        .fetch_all(self.pool())
        .await
        .map_err(db)?;
        let mut executions: HashMap<Uuid, Vec<ExecutionRow>> = HashMap::new();
        for row in &rows {
            let job_id: Uuid = row.try_get("job_id").map_err(db)?;
            let execution = execution_row(row).map_err(db)?;
            executions.entry(job_id).or_default().push(execution);
        }
        Ok(executions)
    }
}

/// `select` with the page's conditions, order and limit. Each combination of filters is its own
/// statement text, so its plan is its own (an `$n IS NULL OR …` statement would share one
/// generic plan that fits none).
fn page_sql<'q>(select: &str, query: &JobQuery<'q>) -> QueryBuilder<'q, Postgres> {
    let mut sql = QueryBuilder::<Postgres>::new(select);
    sql.push(" WHERE ");
    match query.tenant {
        Some(tenant) => sql.push("tenant_id = ").push_bind(tenant),
        None => sql.push("tenant_id IS NULL"),
    };
    if let Some(status) = query.status {
        sql.push(" AND status = ").push_bind(status);
    }
    if let Some(source) = query.source {
        sql.push(" AND metadata->>'source' = ").push_bind(source);
    }
    if let Some(after) = query.created_after {
        sql.push(" AND created_at > ").push_bind(after);
    }
    if let Some(before) = query.created_before {
        sql.push(" AND created_at < ").push_bind(before);
    }
    if let Some((created_at, job_id)) = query.after {
        sql.push(" AND (created_at, job_id) < (")
            .push_bind(created_at)
            .push(", ")
            .push_bind(job_id)
            .push(")");
    }
    // The ORDER BY names the index's leading columns too: they are fixed by the WHERE, so the
    // order is the same, but PostgreSQL does not count `tenant_id IS NULL` as fixing the column
    // and would sort the single-tenant jobs instead of reading the index in order.
    // With a source, its index (migration 0009) serves the page, a status filtered on it.
    sql.push(" ORDER BY tenant_id, ");
    if query.source.is_some() {
        sql.push("(metadata->>'source'), ");
    } else if query.status.is_some() {
        sql.push("status, ");
    }
    sql.push("created_at DESC, job_id DESC LIMIT ")
        .push_bind(i64::from(query.limit));
    sql
}
