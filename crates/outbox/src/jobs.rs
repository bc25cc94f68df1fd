//! Job claims: who runs a job and for how long; its lease and its release, and the jobs whose
//! Worker was lost.

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::lifecycle::JobStatus;
use contract::message::{Filters, MappedFields};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::executions;
use crate::store::{interval, Store};

/// The error text the Worker stores and publishes for a job whose worker disappeared: its lease
/// expired long ago and no one took the job over (see [`Store::expired_jobs`]).
pub const WORKER_LOST: &str =
    "worker lost during extraction; the job did not finish before its lease expired";

/// A request to run a job: create its row if this is the first time it is seen, and take it.
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    pub job_id: Uuid,
    /// `X-Tenant-ID`; `None` for a single-tenant job.
    pub tenant: Option<&'a str>,
    /// `X-Request-Id`.
    pub request_id: Option<&'a str>,
    /// The job message's metadata.
    pub metadata: &'a Map<String, Value>,
    /// What the job asks for, stored with the job.
    pub spec: Option<JobSpec<'a>>,
    /// The SHA-256 of the job message's body, kept from the job's first acceptance (see
    /// [`Store::accepted_message_digest`]).
    pub message_sha256: Option<&'a [u8; 32]>,
    /// The job message's `timeoutSeconds`, kept with the job (its first acceptance wins).
    pub timeout_seconds: Option<u32>,
    /// Identifies this attempt (a Worker id plus something unique per delivery): the same owner
    /// asking again while its lease is live gets [`Claim::Busy`] like anyone else.
    pub owner: &'a str,
    /// How long the claim holds without [`Store::renew_lease`].
    pub lease: Duration,
    /// The W3C `traceparent` of the delivery's trace (telemetry on): kept with the job (the
    /// latest run's), so the events recorded for it later (a cancel through the API, the
    /// deletion) carry the same trace.
    pub traceparent: Option<&'a str>,
}

/// What a job asks for, stored with it as `{"filters": ..., "mappedFields": ...}`: borrowed from
/// the job message and written straight into the query, never copied into a JSON tree first.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct JobSpec<'a> {
    #[serde(rename = "mappedFields")]
    pub mapped_fields: &'a MappedFields,
    pub filters: &'a Filters,
}

/// What [`Store::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller now runs the job: it was new, pending, or processing under an expired lease
    /// (taken over). `attempt` counts the claims of this job, this one included (1 = first).
    /// `running_for` is how long ago the job first started (zero on its first claim): its
    /// timeout counts from there, takeovers included.
    Acquired { attempt: u32, running_for: Duration },
    /// The job already ended. `event_published` is false while an outbox row of the job is still
    /// unpublished: the caller should republish it ([`Store::claim_for_job`]) and not re-extract.
    /// So is a job deleting or deleted (`status` says which).
    Terminal {
        status: JobStatus,
        event_published: bool,
    },
    /// A cancel came for the job before this delivery (its row is `pending` with the request),
    /// or its owner died while canceling it: the caller ends the cancel
    /// ([`Store::end_cancel`]) and does not run the job.
    CancelRequested,
    /// Another owner holds a live lease on the job.
    Busy { lease_expires_at: DateTime<Utc> },
    /// The job belongs to another tenant than the request's: a job has one tenant, fixed when
    /// its row is created, so this delivery must not run it (nor store under its tenant).
    OtherTenant,
    /// The job has no record, and this store never creates one: in the Manager mode the
    /// Manager creates every job, so a message naming none is refused (dead-lettered, as the Go
    /// Worker does), unrun and without an event. The PostgreSQL store never answers it.
    Unknown,
}

/// What renewing or checking a lease found ([`Store::renew_lease`], [`Store::hold_lease`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Held (renewed, or enough of it left to the fence); run on.
    Held,
    /// Held, and a cancel is in progress: stop now when `force`, else store nothing once the
    /// running statements end.
    Canceling { force: bool },
    /// The caller no longer holds the job.
    Lost,
}

/// A processing job whose lease expired: what the Worker needs to record it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiredJob {
    pub job_id: Uuid,
    pub tenant_id: Option<String>,
    pub request_id: Option<String>,
    pub metadata: Map<String, Value>,
    /// The owner whose lease expired.
    pub owner: Option<String>,
    pub attempts: i32,
    pub lease_expires_at: DateTime<Utc>,
    /// The job was being canceled (`cancellation_in_progress`): its cancel is ended
    /// ([`Store::end_cancel`]), not failed.
    pub canceling: bool,
}

impl Store {
    /// Takes `request.job_id` for `request.owner`, creating the job row the first time the job is
    /// seen. Atomic: of any number of concurrent claims of one job, at most one is
    /// [`Claim::Acquired`].
    ///
    /// One transaction: an upsert that takes the row when it is new, pending, or processing
    /// under an expired lease; when it did not, the conflicting row stays locked by the upsert,
    /// so reading it next reports a state no one can change under us.
    pub async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim> {
        let db = |e| OutboxError::sqlx(CLAIM_STEP, e);
        // The executions are queued by the same statement, when it takes the job.
        let (names, tables) = match &request.spec {
            Some(spec) => executions::datasources(spec.mapped_fields),
            None => (Vec::new(), Vec::new()),
        };
        // The normal path, the job taken, is that one statement in a transaction of its own,
        // on a kept connection.
        let mut conn = self.lend(CLAIM_STEP).await?;
        let taken = claim_statement(request, &names, &tables)
            .fetch_optional(&mut *conn)
            .await;
        conn.finish(taken.is_ok());
        if let Some(row) = taken.map_err(db)? {
            return acquired(&row);
        }
        // Not taken: why is read in one transaction with the statement tried again, so the row
        // it locks stays as read (another owner may have let it go meanwhile: then it is taken).
        let mut tx = self.pool().begin().await.map_err(db)?;
        let taken = claim_statement(request, &names, &tables)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        let claim = match taken {
            Some(row) => acquired(&row)?,
            None => {
                let row = sqlx::query(
                    "SELECT status, lease_expires_at, cancel_requested,
                            lease_expires_at <= now() AS lapsed,
                            tenant_id IS DISTINCT FROM $2 AS other_tenant,
                            NOT EXISTS (SELECT 1 FROM outbox o
                                        WHERE o.job_id = j.job_id AND o.sink = 'amqp'
                                          AND o.published_at IS NULL)
                                AS event_published
                     FROM jobs j WHERE job_id = $1",
                )
                .bind(request.job_id)
                .bind(request.tenant)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
                let status: String = row.try_get("status").map_err(db)?;
                let other_tenant: bool = row.try_get("other_tenant").map_err(db)?;
                let status = status
                    .parse::<JobStatus>()
                    .map_err(|e| OutboxError::Corrupt {
                        step: CLAIM_STEP,
                        detail: e.to_string(),
                    })?;
                let cancel_requested: bool = row.try_get("cancel_requested").map_err(db)?;
                let lapsed: Option<bool> = row.try_get("lapsed").map_err(db)?;
                match status {
                    _ if other_tenant => Claim::OtherTenant,
                    JobStatus::Completed
                    | JobStatus::Failed
                    | JobStatus::Canceled
                    | JobStatus::DeletionInProgress
                    | JobStatus::Deleted => Claim::Terminal {
                        status,
                        event_published: row.try_get("event_published").map_err(db)?,
                    },
                    JobStatus::Pending if cancel_requested => {
                        // The job never runs; its executions end `CANCELED` with the cancel.
                        if let Some(spec) = &request.spec {
                            executions::queue(&mut tx, request.job_id, spec.mapped_fields).await?;
                        }
                        Claim::CancelRequested
                    }
                    JobStatus::CancellationInProgress if lapsed == Some(true) => {
                        Claim::CancelRequested
                    }
                    JobStatus::Pending
                    | JobStatus::Processing
                    | JobStatus::CancellationInProgress => {
                        match row.try_get("lease_expires_at").map_err(db)? {
                            Some(lease_expires_at) => Claim::Busy { lease_expires_at },
                            // The upsert takes pending rows and the schema requires a lease on
                            // processing ones: nothing else is left.
                            None => {
                                return Err(OutboxError::Corrupt {
                                    step: CLAIM_STEP,
                                    detail: format!("job in state {status} without a lease"),
                                })
                            }
                        }
                    }
                }
            }
        };
        tx.commit().await.map_err(db)?;
        Ok(claim)
    }

    /// The SHA-256 of the message `job_id` was first accepted from, when the job exists, is
    /// `tenant`'s and was accepted from a message (not recorded failed unrun).
    pub async fn accepted_message_digest(
        &self,
        job_id: Uuid,
        tenant: Option<&str>,
    ) -> Result<Option<[u8; 32]>> {
        let digest: Option<Option<Vec<u8>>> = sqlx::query_scalar(
            "SELECT message_sha256 FROM jobs
             WHERE job_id = $1 AND tenant_id IS NOT DISTINCT FROM $2",
        )
        .bind(job_id)
        .bind(tenant)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("reading a job's accepted message digest", e))?;
        Ok(digest.flatten().and_then(|d| d.try_into().ok()))
    }

    /// Extends `owner`'s lease on `job_id` to `lease` from now (the heartbeat while extracting),
    /// and says whether a cancel came meanwhile: then the lease is still renewed, as the owner
    /// ends the cancel ([`Store::end_cancel`]). [`Lease::Lost`] when `owner` no longer holds the
    /// job (taken over, or ended): the caller should stop and not record an outcome.
    pub async fn renew_lease(&self, job_id: Uuid, owner: &str, lease: Duration) -> Result<Lease> {
        const STEP: &str = "renewing a job lease";
        let mut conn = self.lend(STEP).await?;
        let renewed = sqlx::query_as::<_, (String, bool)>(
            "UPDATE jobs SET lease_expires_at = now() + $3, updated_at = now()
             WHERE job_id = $1 AND owner = $2
               AND status IN ('processing', 'cancellation_in_progress')
             RETURNING status, force_canceled",
        )
        .bind(job_id)
        .bind(owner)
        .bind(interval(lease))
        .fetch_optional(&mut *conn)
        .await;
        conn.finish(renewed.is_ok());
        Ok(lease_found(
            renewed.map_err(|e| OutboxError::sqlx(STEP, e))?,
        ))
    }

    /// The claim checked right before the object is stored (the fence): what
    /// [`Store::renew_lease`] answers, but the lease is renewed only when less than half of
    /// `lease` is left. A held lease with more left is only read: the row is not written, so the
    /// statement commits nothing (no WAL, no flush, no index entries; `lease_expires_at` is
    /// indexed, so no renewal is a HOT update: each is a row version with its index entries). It is as
    /// good a fence: no one takes the job over before its lease lapses, at least half a lease
    /// away, and the heartbeat renews it every third of a lease meanwhile.
    pub async fn hold_lease(&self, job_id: Uuid, owner: &str, lease: Duration) -> Result<Lease> {
        const STEP: &str = "checking a job's claim before storing its result";
        let mut conn = self.lend(STEP).await?;
        // Both parts read the statement's snapshot of the row and ask opposite things of its
        // lease, so at most one answers; the update follows a row changed meanwhile (a cancel
        // asked) as `renew_lease` does.
        let held = sqlx::query_as::<_, (String, bool)>(
            "WITH renewed AS (
                 UPDATE jobs SET lease_expires_at = now() + $3, updated_at = now()
                 WHERE job_id = $1 AND owner = $2
                   AND status IN ('processing', 'cancellation_in_progress')
                   AND lease_expires_at < now() + $4
                 RETURNING status, force_canceled)
             SELECT status, force_canceled FROM renewed
             UNION ALL
             SELECT status, force_canceled FROM jobs
             WHERE job_id = $1 AND owner = $2
               AND status IN ('processing', 'cancellation_in_progress')
               AND lease_expires_at >= now() + $4",
        )
        .bind(job_id)
        .bind(owner)
        .bind(interval(lease))
        .bind(interval(lease / 2))
        .fetch_optional(&mut *conn)
        .await;
        conn.finish(held.is_ok());
        Ok(lease_found(held.map_err(|e| OutboxError::sqlx(STEP, e))?))
    }

    /// Gives up `owner`'s claim on `job_id` at once (its lease ends now), for a run that stopped
    /// without an outcome (a dependency was unreachable) and sends its message back: the next
    /// delivery claims the job without waiting for the lease to lapse. False when `owner` no
    /// longer held it.
    pub async fn release(&self, job_id: Uuid, owner: &str) -> Result<bool> {
        let released = sqlx::query(
            "UPDATE jobs SET lease_expires_at = now(), updated_at = now()
             WHERE job_id = $1 AND owner = $2 AND status = 'processing'",
        )
        .bind(job_id)
        .bind(owner)
        .execute(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("releasing a job's claim", e))?;
        Ok(released.rows_affected() == 1)
    }

    /// Running jobs whose lease expired more than `grace` ago, oldest first: their worker is
    /// gone and no redelivery took them over. The Worker records each processing one failed
    /// with [`WORKER_LOST`] through [`Store::record_terminal`] with `owner: None`, which writes
    /// only while the lease is still expired, so a job taken over in the meantime is left alone;
    /// it ends the cancel of each `cancellation_in_progress` one ([`Store::end_cancel`]).
    pub async fn expired_jobs(&self, grace: Duration, limit: i64) -> Result<Vec<ExpiredJob>> {
        const STEP: &str = "listing expired jobs";
        let db = |e| OutboxError::sqlx(STEP, e);
        let rows = sqlx::query(
            "SELECT job_id, tenant_id, request_id, metadata, owner, attempts, lease_expires_at,
                    status = 'cancellation_in_progress' AS canceling
             FROM jobs
             WHERE status IN ('processing', 'cancellation_in_progress')
               AND lease_expires_at <= now() - $1
             ORDER BY lease_expires_at
             LIMIT $2",
        )
        .bind(interval(grace))
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let Json(metadata) = row.try_get("metadata")?;
                Ok(ExpiredJob {
                    job_id: row.try_get("job_id")?,
                    tenant_id: row.try_get("tenant_id")?,
                    request_id: row.try_get("request_id")?,
                    metadata,
                    owner: row.try_get("owner")?,
                    attempts: row.try_get("attempts")?,
                    lease_expires_at: row.try_get("lease_expires_at")?,
                    canceling: row.try_get("canceling")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(db)
    }
}

const CLAIM_STEP: &str = "claiming a job";

/// The claim: creates the job's row or takes it when it is free (pending and not canceled, or
/// processing under a lapsed lease) and of the same tenant, queues its executions (a first run)
/// or restarts them (a later one), all in one statement. A row when it took the job.
fn claim_statement<'q>(
    request: &'q ClaimRequest<'q>,
    names: &'q [&'q str],
    tables: &'q [i32],
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(
        "WITH claimed AS (
         INSERT INTO jobs AS j (job_id, tenant_id, status, request_id, metadata, spec, \
                                attempts, owner, lease_expires_at, started_at, message_sha256, \
                                first_started_at, timeout_seconds, traceparent)
         VALUES ($1, $2, 'processing', $3, $4, $5, 1, $6, now() + $7, now(), $8, now(), $9,
                 $12)
         ON CONFLICT (job_id) DO UPDATE SET
             status = 'processing',
             -- The stored message wins; a gap is filled from this delivery.
             request_id = COALESCE(j.request_id, EXCLUDED.request_id),
             metadata = CASE WHEN j.metadata = '{}'::jsonb THEN EXCLUDED.metadata
                             ELSE j.metadata END,
             spec = COALESCE(j.spec, EXCLUDED.spec),
             message_sha256 = COALESCE(j.message_sha256, EXCLUDED.message_sha256),
             attempts = j.attempts + 1,
             owner = EXCLUDED.owner,
             lease_expires_at = EXCLUDED.lease_expires_at,
             started_at = now(),
             first_started_at = COALESCE(j.first_started_at, now()),
             timeout_seconds = COALESCE(j.timeout_seconds, EXCLUDED.timeout_seconds),
             traceparent = COALESCE(EXCLUDED.traceparent, j.traceparent),
             updated_at = now()
         WHERE ((j.status = 'pending' AND NOT j.cancel_requested)
                OR (j.status = 'processing' AND j.lease_expires_at <= now()))
           -- One tenant per job: a delivery of another tenant never takes it.
           AND j.tenant_id IS NOT DISTINCT FROM EXCLUDED.tenant_id
         RETURNING attempts,
                   EXTRACT(EPOCH FROM now() - first_started_at)::float8 AS running_for),
         queued AS (
             INSERT INTO job_executions (job_id, datasource, tables)
             SELECT $1, t.name, t.tables
             FROM claimed, unnest($10::text[], $11::int4[]) AS t(name, tables)
             ON CONFLICT (job_id, datasource) DO NOTHING),
         -- A later run starts its executions afresh (the rows queued above are not seen here:
         -- one snapshot for the whole statement).
         restarted AS (
             UPDATE job_executions e
             SET status = 'QUEUED', row_count = 0, started_at = NULL, ended_at = NULL,
                 error = NULL, attempts = 0, last_error = NULL, updated_at = now()
             FROM claimed
             WHERE e.job_id = $1 AND claimed.attempts > 1)
         SELECT attempts, running_for FROM claimed",
    )
    .bind(request.job_id)
    .bind(request.tenant)
    .bind(request.request_id)
    .bind(Json(request.metadata))
    .bind(request.spec.map(Json))
    .bind(request.owner)
    .bind(interval(request.lease))
    .bind(request.message_sha256.map(|digest| digest.as_slice()))
    .bind(
        request
            .timeout_seconds
            .map(|s| i32::try_from(s).unwrap_or(i32::MAX)),
    )
    .bind(names)
    .bind(tables)
    .bind(request.traceparent)
}

/// The lease a renewal's or a fence's row answers: none when the caller no longer holds the job.
fn lease_found(row: Option<(String, bool)>) -> Lease {
    match row {
        None => Lease::Lost,
        Some((status, force)) if status == "cancellation_in_progress" => Lease::Canceling { force },
        Some(_) => Lease::Held,
    }
}

/// The claim a taken job's row answers.
fn acquired(row: &sqlx::postgres::PgRow) -> Result<Claim> {
    let db = |e| OutboxError::sqlx(CLAIM_STEP, e);
    let attempts: i32 = row.try_get("attempts").map_err(db)?;
    let running_for: f64 = row.try_get("running_for").map_err(db)?;
    // Never negative: the schema checks `attempts >= 0`; a clock that went back counts as no
    // time.
    Ok(Claim::Acquired {
        attempt: attempts.unsigned_abs(),
        running_for: Duration::try_from_secs_f64(running_for).unwrap_or_default(),
    })
}
