//! Job claims on the Manager's documents: who runs a job and for how long, its lease and its
//! release, the message it was accepted from, and the jobs whose Worker was lost.
//!
//! Upstream's gaps and what is chosen here:
//! - The Manager creates every job; Go fails a message whose job has no document and
//!   dead-letters it, with no event (UPSTREAM-MANAGER §1.4 step 2). [`ManagerStore::claim`]
//!   answers such a message [`Claim::Unknown`] (never an insert), and the job core
//!   dead-letters it (`job_not_found`) without an event, as Go does.
//! - A job `processing` without this Worker's lease was taken by a Go Worker, which keeps no
//!   lease: it is answered [`Claim::Busy`] for one lease from now, as Go skips it (§1.4 step
//!   1b); the core waits for it a while and then acknowledges the duplicate.
//! - Go keeps no lease, so a Go job orphaned in `processing` stays there; only jobs this Worker
//!   leased are listed by [`ManagerStore::expired_jobs`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::lifecycle::{self, Event, JobStatus, Step};
use mongodb::bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use outbox::{Claim, ClaimRequest, ExpiredJob, Lease, OutboxError};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::binary_id;
use crate::jobs::{bson_time, decode, ManagerStatus, MARKER_PENDING};
use crate::manager_store::{field, unavailable, worker_key, Fail, ManagerStore, Seen, VERSION};
use crate::outbox::RowStatus;

const CLAIM_STEP: &str = "claiming a job";

impl ManagerStore {
    /// Takes `request.job_id` for `request.owner`: of any number of concurrent claims of one
    /// job, at most one is [`Claim::Acquired`]. The job moves to `processing` with
    /// `dedup_active: true` and `completed_at` unset (§9 item 4), its lease and attempt under
    /// `fetcher_worker`, in one write conditioned on the document as read. A claim writes no
    /// event, so that write is all it changes: no transaction is needed for it to be all or
    /// nothing ([`ManagerStore::conditional`]).
    pub async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Claim, OutboxError> {
        self.conditional(CLAIM_STEP, || self.claim_once(request))
            .await
    }

    /// One read of the job and, when the lifecycle lets `request` take it, its conditional write
    /// ([`Fail::Conflict`] when the job changed since the read).
    async fn claim_once(&self, request: &ClaimRequest<'_>) -> Result<Claim, Fail> {
        let now = Utc::now();
        let Some(job) = self.read_job_alone(request.job_id).await? else {
            return Ok(Claim::Unknown);
        };
        let seen = Seen::of(job)?;
        // A job has one tenant, fixed by the claim that first wrote this Worker's fields.
        if seen.owner.is_some() && seen.tenant.as_deref() != request.tenant {
            return Ok(Claim::OtherTenant);
        }
        let status = seen.state.status;
        let running = matches!(
            status,
            JobStatus::Processing | JobStatus::CancellationInProgress
        );
        if !running && status != JobStatus::Pending {
            let event_published = self.event_published(&seen).await?;
            return Ok(Claim::Terminal {
                status,
                event_published,
            });
        }
        if running {
            match seen.lease_expires_at {
                Some(until) if until > now => {
                    return Ok(Claim::Busy {
                        lease_expires_at: until,
                    })
                }
                Some(_) => {}
                None => {
                    return Ok(Claim::Busy {
                        lease_expires_at: now + chrono_duration(request.lease),
                    })
                }
            }
        }
        let transition = match lifecycle::step(Some(seen.state), Step::Claim) {
            Ok(transition) => transition,
            Err(refusal) => {
                return Err(Fail::Outbox(OutboxError::Corrupt {
                    step: CLAIM_STEP,
                    detail: format!("the lifecycle refuses the claim: {refusal}"),
                }))
            }
        };
        if transition.events.contains(&Event::Canceled) {
            return Ok(Claim::CancelRequested);
        }
        let worker = seen.worker();
        let attempts = worker
            .get_i32(field::ATTEMPTS)
            .unwrap_or(0)
            .saturating_add(1);
        let first_started_at = match worker.get(field::FIRST_STARTED_AT) {
            Some(Bson::DateTime(at)) => {
                DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(now)
            }
            _ => now,
        };
        let mut set = doc! {
            "status": ManagerStatus::Processing.as_str(),
            "dedup_active": true,
            worker_key(field::STATE): transition.to.status.as_str(),
            worker_key(field::OWNER): request.owner,
            worker_key(field::LEASE_EXPIRES_AT): bson_time(now + chrono_duration(request.lease)),
            worker_key(field::ATTEMPTS): attempts,
            worker_key(field::STARTED_AT): bson_time(now),
            worker_key(field::FIRST_STARTED_AT): bson_time(first_started_at),
            // Each run starts its executions afresh, one per datasource.
            worker_key(field::EXECUTIONS): crate::executions::queued(&seen.job.mapped_fields),
        };
        // The first acceptance wins; a gap is filled from this delivery.
        let mut keep = |key: &str, value: Option<Bson>| {
            if let (None, Some(value)) = (worker.get(key), value) {
                set.insert(worker_key(key), value);
            }
        };
        keep(field::TENANT, request.tenant.map(Bson::from));
        keep(field::REQUEST_ID, request.request_id.map(Bson::from));
        keep(
            field::MESSAGE_SHA256,
            request.message_sha256.map(|digest| {
                Bson::Binary(Binary {
                    subtype: BinarySubtype::Generic,
                    bytes: digest.to_vec(),
                })
            }),
        );
        keep(
            field::TIMEOUT_SECONDS,
            request.timeout_seconds.map(|s| Bson::Int64(i64::from(s))),
        );
        let update = doc! {
            "$set": set,
            "$unset": {"completed_at": ""},
            "$inc": {VERSION: 1_i64},
        };
        self.write_alone_as_seen(&seen, update).await?;
        Ok(Claim::Acquired {
            attempt: attempts.unsigned_abs(),
            running_for: (now - first_started_at).to_std().unwrap_or_default(),
        })
    }

    /// Whether the terminal job's event is out: no marker left, and this Worker's row of it
    /// (when it wrote one) published. A Go Worker's rows are its relays'.
    async fn event_published(&self, seen: &Seen) -> Result<bool, Fail> {
        if seen.job.metadata.get(MARKER_PENDING) == Some(&Bson::Boolean(true)) {
            return Ok(false);
        }
        let worker = seen.worker();
        let Ok(event) = worker.get_document(field::TERMINAL_EVENT) else {
            return Ok(true);
        };
        let (Ok(id), Ok(tenant)) = (event.get_str("outbox_id"), event.get_str("tenant_id")) else {
            return Ok(true);
        };
        let row = self
            .store()
            .outbox_rows()
            .find_one(doc! {"id": id, "tenant_id": tenant})
            .projection(doc! {"status": 1})
            .await?;
        Ok(row.is_none_or(|row| row.get_str("status").ok() == Some(RowStatus::Published.as_str())))
    }

    /// Extends `owner`'s lease while it holds the job; [`Lease::Canceling`] while a cancel of
    /// it is in progress (the Manager mode has no `NOTIFY`: besides the API's own replica,
    /// which wakes its run at once, this is how a run learns of its cancel, within a third of
    /// a lease); [`Lease::Lost`] once it does not hold the job.
    pub async fn renew_lease(
        &self,
        job_id: Uuid,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, OutboxError> {
        const STEP: &str = "renewing a job lease";
        let until = Utc::now() + chrono_duration(lease);
        let renewed = self
            .store()
            .jobs()
            .find_one_and_update(
                held(
                    job_id,
                    owner,
                    &[JobStatus::Processing, JobStatus::CancellationInProgress],
                ),
                doc! {
                    "$set": {worker_key(field::LEASE_EXPIRES_AT): bson_time(until)},
                    "$inc": {VERSION: 1_i64},
                },
            )
            .projection(doc! {crate::jobs::WORKER_FIELD: 1})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let Some(worker) = renewed
            .as_ref()
            .and_then(|d| d.get_document(crate::jobs::WORKER_FIELD).ok())
        else {
            return Ok(Lease::Lost);
        };
        let canceling =
            worker.get_str(field::STATE).ok() == Some(JobStatus::CancellationInProgress.as_str());
        Ok(if canceling {
            Lease::Canceling {
                force: worker.get_bool(field::FORCE).unwrap_or(false),
            }
        } else {
            Lease::Held
        })
    }

    /// Ends `owner`'s lease now, so the job's next delivery takes it at once.
    pub async fn release(&self, job_id: Uuid, owner: &str) -> Result<bool, OutboxError> {
        self.held_update(
            job_id,
            owner,
            doc! {worker_key(field::LEASE_EXPIRES_AT): bson_time(Utc::now())},
            "releasing a job's claim",
        )
        .await
    }

    /// `set` on the job while `owner` holds it (processing under its claim), the version bumped.
    async fn held_update(
        &self,
        job_id: Uuid,
        owner: &str,
        set: Document,
        step: &'static str,
    ) -> Result<bool, OutboxError> {
        let done = self
            .store()
            .jobs()
            .update_one(
                held(job_id, owner, &[JobStatus::Processing]),
                doc! {"$set": set, "$inc": {VERSION: 1_i64}},
            )
            .await
            .map_err(|e| unavailable(step, &e))?;
        Ok(done.matched_count == 1)
    }

    /// The SHA-256 of the body `job_id` was first accepted from, when `tenant`'s.
    pub async fn accepted_message_digest(
        &self,
        job_id: Uuid,
        tenant: Option<&str>,
    ) -> Result<Option<[u8; 32]>, OutboxError> {
        const STEP: &str = "reading a job's accepted message digest";
        let found = self
            .store()
            .jobs()
            .find_one(doc! {"_id": binary_id(job_id)})
            .projection(doc! {crate::jobs::WORKER_FIELD: 1})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let Some(worker) = found
            .as_ref()
            .and_then(|d| d.get_document(crate::jobs::WORKER_FIELD).ok())
        else {
            return Ok(None);
        };
        if worker.get_str(field::TENANT).ok() != tenant {
            return Ok(None);
        }
        Ok(match worker.get(field::MESSAGE_SHA256) {
            Some(Bson::Binary(b)) => b.bytes.clone().try_into().ok(),
            _ => None,
        })
    }

    /// Jobs this Worker leased that are still `processing` more than `grace` after their lease
    /// lapsed, oldest lease first, at most `limit`.
    pub async fn expired_jobs(
        &self,
        grace: Duration,
        limit: i64,
    ) -> Result<Vec<ExpiredJob>, OutboxError> {
        const STEP: &str = "listing expired jobs";
        let before = Utc::now() - chrono_duration(grace);
        let mut cursor = self
            .store()
            .jobs()
            .find(doc! {
                "status": ManagerStatus::Processing.as_str(),
                worker_key(field::STATE): {"$in": [
                    JobStatus::Processing.as_str(),
                    JobStatus::CancellationInProgress.as_str(),
                ]},
                worker_key(field::LEASE_EXPIRES_AT): {"$lte": bson_time(before)},
            })
            .sort(doc! {worker_key(field::LEASE_EXPIRES_AT): 1})
            .limit(limit)
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let mut expired = Vec::new();
        while cursor.advance().await.map_err(|e| unavailable(STEP, &e))? {
            let document: Document = cursor
                .deserialize_current()
                .map_err(|e| unavailable(STEP, &e))?;
            let job =
                decode(document).map_err(|detail| OutboxError::Corrupt { step: STEP, detail })?;
            let seen = Seen::of(job).map_err(|e| crate::manager_store::to_outbox(STEP, e))?;
            let worker = seen.worker();
            let Some(lease_expires_at) = seen.lease_expires_at else {
                continue;
            };
            expired.push(ExpiredJob {
                job_id: seen.job.id,
                request_id: worker.get_str(field::REQUEST_ID).ok().map(str::to_owned),
                metadata: json_map(&seen.job.request_metadata()),
                owner: seen.owner.clone(),
                attempts: worker.get_i32(field::ATTEMPTS).unwrap_or(0),
                lease_expires_at,
                canceling: seen.state.status == JobStatus::CancellationInProgress,
                tenant_id: seen.tenant,
            });
        }
        Ok(expired)
    }
}

/// The job while `owner` holds it in one of `states` (the Manager sees it `processing`).
fn held(job_id: Uuid, owner: &str, states: &[JobStatus]) -> Document {
    let states: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    doc! {
        "_id": binary_id(job_id),
        "status": ManagerStatus::Processing.as_str(),
        worker_key(field::STATE): {"$in": states},
        worker_key(field::OWNER): owner,
    }
}

/// A std duration as chrono's, saturated (a lease of centuries is no lease at all).
pub(crate) fn chrono_duration(duration: Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

/// A BSON document as the JSON object a job message's metadata is (relaxed extended JSON).
pub(crate) fn json_map(document: &Document) -> Map<String, Value> {
    match Bson::Document(document.clone()).into_relaxed_extjson() {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
