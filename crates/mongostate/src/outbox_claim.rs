//! A relay's side of lib-streaming's outbox: the conditional claims (UPSTREAM-MANAGER §4.6) and
//! the state updates after a publish (§4.5), with lib-commons' defaults, so this Worker's relay
//! and Go relays share one collection without publishing one row version twice.
//!
//! Upstream's gaps and what is chosen here:
//! - lib-commons claims a batch with one unordered `BulkWrite`; here each candidate is one
//!   conditional `UpdateOne`, which is the same per-document atomicity (the batch was never
//!   atomic) and needs no `bulkWrite` support from the server.
//! - lib-commons rescans up to 8 times when rivals took candidates; here one scan per call, the
//!   relay's next pass taking what is left.
//! - Published and invalid rows are never pruned upstream (§4.8); nothing here prunes them.
//! - A relay that fails after its claim (the server restarted, the network cut) gives the rows
//!   it still holds back at once with [`release`], guarded by its claim's token; lib-commons
//!   leaves them `PROCESSING` until its 10-minute takeover.
//! - The takeover and the retry delay are [`ClaimWindows`] (lib-commons' defaults unless the
//!   deployment sets them): they govern this Worker's relay only; Go relays keep theirs.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use mongodb::bson::{doc, Document};
use uuid::Uuid;

use crate::jobs::bson_time;
use crate::outbox::{OutboxRow, RowStatus};
use crate::{Error, Result, Store};

/// `attempts` at which a row becomes `INVALID` (`lc:commons/outbox/config.go:13-24`).
pub const MAX_DISPATCH_ATTEMPTS: i32 = 10;
/// lib-commons' `RetryWindow`: a `FAILED` row is retried once it has been left this long.
pub const RETRY_WINDOW: Duration = Duration::from_secs(5 * 60);
/// lib-commons' `ProcessingTimeout`: a `PROCESSING` row is taken over once it has been left
/// this long.
pub const PROCESSING_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// `last_error` is cut at this many bytes, then marked.
const MAX_ERROR: usize = 512;

/// How long a relay leaves a row before taking it (lib-commons' `DispatcherConfig`, whose
/// defaults Fetcher's Go Worker keeps: UPSTREAM-MANAGER §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimWindows {
    /// `ProcessingTimeout` (10 min): a `PROCESSING` row not updated for this long is taken
    /// over, its publisher presumed gone. Shorter than a live relay's publish, it duplicates
    /// that relay's events (delivery is at least once either way).
    pub claim_timeout: Duration,
    /// `RetryWindow` (5 min): a `FAILED` row is retried once it has been left this long.
    pub retry_after: Duration,
}

impl Default for ClaimWindows {
    fn default() -> ClaimWindows {
        ClaimWindows {
            claim_timeout: PROCESSING_TIMEOUT,
            retry_after: RETRY_WINDOW,
        }
    }
}

impl ClaimWindows {
    /// When a `PROCESSING` row last updated at or before this, seen at `now`, is taken over.
    pub fn stuck_before(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        before(now, self.claim_timeout)
    }

    /// When a `FAILED` row last updated at or before this, seen at `now`, is retried.
    pub fn retry_before(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        before(now, self.retry_after)
    }
}

/// `now - window`, the earliest time there is for a window longer than the calendar.
fn before(now: DateTime<Utc>, window: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(window)
        .ok()
        .and_then(|window| now.checked_sub_signed(window))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Which rows a claim takes, in lib-commons' order of a pass (`dispatcher.go:652-720`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidates {
    /// `PROCESSING` rows not updated for [`ClaimWindows::claim_timeout`]: reclaimed with
    /// `attempts + 1`, or made `INVALID` when that reaches [`MAX_DISPATCH_ATTEMPTS`].
    Stuck,
    /// `FAILED` rows under [`MAX_DISPATCH_ATTEMPTS`] not updated for
    /// [`ClaimWindows::retry_after`].
    Failed,
    /// `PENDING` rows, oldest first.
    Pending,
}

/// What one claim took.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The rows now `PROCESSING` under this claim's token, for this relay alone to publish.
    pub rows: Vec<OutboxRow>,
    /// Stuck rows made `INVALID` instead (attempts exhausted).
    pub invalidated: usize,
    /// The claim's `claim_token`: what [`release`] gives back.
    pub token: String,
}

/// Claims up to `limit` rows of `tenant` (`""` for the default scope): a scan, then one
/// conditional update per candidate on the version it saw (`{id, tenant_id, status, attempts,
/// updated_at}`), so of two relays claiming one row only one matches; then the claimed rows
/// re-read by token. A row that cannot be decoded fails the claim, as it fails lib-streaming's.
/// A claim that fails once it took rows gives them back before answering (best effort).
pub async fn claim(
    store: &Store,
    tenant: &str,
    which: Candidates,
    limit: i64,
    now: DateTime<Utc>,
    windows: &ClaimWindows,
) -> Result<Claimed> {
    let rows = store.outbox_rows();
    let (filter, sort) = match which {
        Candidates::Pending => (doc! {"status": "PENDING"}, doc! {"created_at": 1, "id": 1}),
        Candidates::Failed => (
            doc! {
                "status": "FAILED",
                "attempts": {"$lt": MAX_DISPATCH_ATTEMPTS},
                "updated_at": {"$lte": bson_time(windows.retry_before(now))},
            },
            doc! {"updated_at": 1, "id": 1},
        ),
        Candidates::Stuck => (
            doc! {
                "status": "PROCESSING",
                "updated_at": {"$lte": bson_time(windows.stuck_before(now))},
            },
            doc! {"updated_at": 1, "id": 1},
        ),
    };
    let mut filter = filter;
    filter.insert("tenant_id", tenant);
    let mut cursor = rows
        .find(filter)
        .sort(sort)
        .limit(limit)
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let mut seen = Vec::new();
    while cursor.advance().await.map_err(|e| Error::unavailable(&e))? {
        let document: Document = cursor
            .deserialize_current()
            .map_err(|e| Error::unavailable(&e))?;
        seen.push(OutboxRow::from_document(&document)?);
    }
    let token = Uuid::new_v4().to_string();
    let at = bson_time(now);
    let mut claimed = Vec::new();
    let mut invalidated = 0;
    for row in &seen {
        let version = doc! {
            "id": &row.id,
            "tenant_id": tenant,
            "status": row.status.as_str(),
            "attempts": row.attempts,
            "updated_at": bson_time(row.updated_at),
        };
        let mut set = doc! {"status": "PROCESSING", "updated_at": at, "claim_token": &token};
        if which == Candidates::Stuck {
            let attempts = row.attempts.saturating_add(1);
            if attempts >= MAX_DISPATCH_ATTEMPTS {
                let invalid = doc! {
                    "$set": {
                        "status": "INVALID",
                        "attempts": attempts,
                        "last_error": "max dispatch attempts exceeded",
                        "updated_at": at,
                    },
                    "$unset": {"claim_token": ""},
                };
                let done = rows.update_one(version, invalid).await;
                let done = done.map_err(|e| Error::unavailable(&e))?;
                invalidated += usize::from(done.modified_count == 1);
                continue;
            }
            set.insert("attempts", attempts);
        }
        match rows.update_one(version, doc! {"$set": set}).await {
            Ok(done) if done.modified_count == 1 => claimed.push(row.id.clone()),
            Ok(_) => {}
            Err(error) => {
                roll_back(store, tenant, &token, which).await;
                return Err(Error::unavailable(&error));
            }
        }
    }
    if claimed.is_empty() {
        return Ok(Claimed {
            rows: Vec::new(),
            invalidated,
            token,
        });
    }
    match read_claimed(store, tenant, &token, &claimed).await {
        Ok(taken) => Ok(Claimed {
            rows: taken,
            invalidated,
            token,
        }),
        Err(error) => {
            roll_back(store, tenant, &token, which).await;
            Err(error)
        }
    }
}

/// The rows claimed under `token`, read back in the order they are published.
async fn read_claimed(
    store: &Store,
    tenant: &str,
    token: &str,
    claimed: &[String],
) -> Result<Vec<OutboxRow>> {
    let mut cursor = store
        .outbox_rows()
        .find(doc! {
            "claim_token": token,
            "id": {"$in": claimed},
            "tenant_id": tenant,
            "status": "PROCESSING",
        })
        .sort(doc! {"created_at": 1, "id": 1})
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let mut taken = Vec::new();
    while cursor.advance().await.map_err(|e| Error::unavailable(&e))? {
        let document: Document = cursor
            .deserialize_current()
            .map_err(|e| Error::unavailable(&e))?;
        taken.push(OutboxRow::from_document(&document)?);
    }
    Ok(taken)
}

/// The tenants a dispatcher pass visits (`ListTenants`, single-tenant: `distinct("tenant_id")`
/// over `PENDING`, `FAILED` and `PROCESSING` rows with a non-empty tenant, sorted), or the
/// default scope `""` alone when there is none (`dispatcher.go:544-576`).
pub async fn due_tenants(store: &Store) -> Result<Vec<String>> {
    let found = store
        .outbox_rows()
        .distinct(
            "tenant_id",
            doc! {
                "status": {"$in": ["PENDING", "FAILED", "PROCESSING"]},
                "tenant_id": {"$ne": ""},
            },
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let mut tenants: Vec<String> = found
        .into_iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    tenants.sort();
    if tenants.is_empty() {
        tenants.push(String::new());
    }
    Ok(tenants)
}

/// Gives back what a failed claim took (`claim.go:100-135`): its rows return to the status they
/// were claimed from. Best effort: what it misses is taken over after the claim timeout.
async fn roll_back(store: &Store, tenant: &str, token: &str, which: Candidates) {
    let from = match which {
        Candidates::Pending => "PENDING",
        Candidates::Failed => "FAILED",
        Candidates::Stuck => "PROCESSING",
    };
    let released = store
        .outbox_rows()
        .update_many(
            doc! {"claim_token": token, "tenant_id": tenant, "status": "PROCESSING"},
            doc! {"$set": {"status": from}, "$unset": {"claim_token": ""}},
        )
        .await;
    if let Err(error) = released {
        tracing::warn!(
            error.message = %contract::redact(&error.to_string()),
            "Could not release an outbox claim; its rows are taken over later."
        );
    }
}

/// Gives back the rows of `tenant` a relay claimed under `token` and has not settled (`only`:
/// that row alone), as `PENDING`: the state any relay, Go or this Worker's, claims at once
/// (lib-commons' own roll-back of a claim writes it). Only a row still `PROCESSING` under
/// `token` changes: one another relay took over carries that relay's token, one settled carries
/// none, so neither is touched. `attempts` stays as the claim left it. The rows given back.
pub async fn release(
    store: &Store,
    tenant: &str,
    token: &str,
    only: Option<&str>,
    now: DateTime<Utc>,
) -> Result<u64> {
    let mut filter = doc! {"tenant_id": tenant, "status": "PROCESSING", "claim_token": token};
    if let Some(id) = only {
        filter.insert("id", id);
    }
    let done = store
        .outbox_rows()
        .update_many(
            filter,
            doc! {
                "$set": {"status": "PENDING", "updated_at": bson_time(now)},
                "$unset": {"claim_token": ""},
            },
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.modified_count)
}

/// `MarkPublished`: `PROCESSING` → `PUBLISHED` with `published_at`, the token unset. `false`
/// when the row was no longer `PROCESSING` (a conflict lib-commons only logs).
pub async fn mark_published(store: &Store, row: &OutboxRow, now: DateTime<Utc>) -> Result<bool> {
    let at = bson_time(now);
    let done = store
        .outbox_rows()
        .update_one(
            doc! {"id": &row.id, "tenant_id": &row.tenant_id, "status": "PROCESSING"},
            doc! {
                "$set": {"status": "PUBLISHED", "published_at": at, "updated_at": at},
                "$unset": {"claim_token": ""},
            },
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.modified_count == 1)
}

/// `MarkFailed`: reads the row's `attempts`, then on that version `PROCESSING` → `FAILED`
/// (retried after [`ClaimWindows::retry_after`]) or `INVALID` once `attempts + 1` reaches
/// [`MAX_DISPATCH_ATTEMPTS`], with `last_error` redacted and cut. The status written, or `None`
/// when the row was no longer this version.
pub async fn mark_failed(
    store: &Store,
    row: &OutboxRow,
    error: &str,
    now: DateTime<Utc>,
) -> Result<Option<RowStatus>> {
    let current = store
        .outbox_rows()
        .find_one(doc! {"id": &row.id, "tenant_id": &row.tenant_id})
        .projection(doc! {"attempts": 1})
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let Some(current) = current else {
        return Ok(None);
    };
    let seen = current
        .get_i32("attempts")
        .ok()
        .or_else(|| {
            let wide = current.get_i64("attempts").ok()?;
            i32::try_from(wide).ok()
        })
        .unwrap_or(0);
    let attempts = seen.saturating_add(1);
    let status = if attempts >= MAX_DISPATCH_ATTEMPTS {
        RowStatus::Invalid
    } else {
        RowStatus::Failed
    };
    let written = settle(store, row, Some(seen), status, attempts, error, now).await?;
    Ok(written.then_some(status))
}

/// `PROCESSING` → `INVALID` for a row no relay can publish (an envelope that does not parse, an
/// unknown target): it is never retried. `false` when the row was no longer `PROCESSING`.
pub async fn mark_invalid(
    store: &Store,
    row: &OutboxRow,
    error: &str,
    now: DateTime<Utc>,
) -> Result<bool> {
    let attempts = row.attempts.saturating_add(1);
    settle(store, row, None, RowStatus::Invalid, attempts, error, now).await
}

async fn settle(
    store: &Store,
    row: &OutboxRow,
    seen_attempts: Option<i32>,
    status: RowStatus,
    attempts: i32,
    error: &str,
    now: DateTime<Utc>,
) -> Result<bool> {
    let mut filter = doc! {"id": &row.id, "tenant_id": &row.tenant_id, "status": "PROCESSING"};
    if let Some(seen) = seen_attempts {
        filter.insert("attempts", seen);
    }
    let done = store
        .outbox_rows()
        .update_one(
            filter,
            doc! {
                "$set": {
                    "status": status.as_str(),
                    "attempts": attempts,
                    "last_error": last_error(error),
                    "updated_at": bson_time(now),
                },
                "$unset": {"claim_token": ""},
            },
        )
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.modified_count == 1)
}

/// `last_error` as lib-commons stores it: sanitized, then cut at 512 bytes (on a character
/// boundary) and marked `... (truncated)`.
fn last_error(error: &str) -> String {
    let mut text = contract::redact(error);
    if text.len() > MAX_ERROR {
        let mut cut = MAX_ERROR;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("... (truncated)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_error_is_cut_on_a_character_boundary_and_marked() {
        let error = "é".repeat(400);
        let stored = last_error(&error);
        assert!(stored.ends_with("... (truncated)"));
        assert!(stored.len() <= MAX_ERROR + "... (truncated)".len());
        assert_eq!(last_error("short"), "short");
    }
}
