//! The slots of capped datasources (`DATASOURCE_<NAME>_MAX_CONCURRENT`) in the Manager mode: a
//! collection of this Worker's own, `fetcher_worker_slots`, that no Go code reads. A slot is a
//! document `{_id: "<slot>:<datasource>", datasource, slot, owner, job_id, expires_at}` held
//! under a lease, as the PostgreSQL mode's `datasource_slots` rows are (`outbox::Store::take_slot`).
//!
//! MongoDB has no statement that picks a free slot and takes it at once, so a take reads the
//! datasource's slots, picks a free one at random, and takes it with one conditional write that
//! only succeeds if it is still free: an insert of the slot's `_id` (unique: a concurrent taker's
//! insert fails with a duplicate key) for a slot never taken, an update filtered on the lapsed
//! lease for one whose holder's lease lapsed. Either way no two live holders of one slot exist.
//! Leases are computed with the Worker's clock, as this mode's job leases are.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use mongodb::bson::{doc, Document};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::Collection;
use outbox::{OutboxError, SlotHolder};

use crate::claims::chrono_duration;
use crate::jobs::bson_time;
use crate::manager_store::{unavailable, ManagerStore};

/// This Worker's slots collection, beside the jobs.
pub const SLOTS_COLLECTION: &str = "fetcher_worker_slots";

/// MongoDB's duplicate key error.
const DUPLICATE_KEY: i32 = 11000;

impl ManagerStore {
    fn slots(&self) -> Collection<Document> {
        self.store().slot_rows()
    }

    /// Takes one of `datasource`'s `slots` slots for `holder` until `lease` from now; `None` when
    /// every slot is held (or another taker won the free one chosen: the caller asks again).
    pub async fn take_slot(
        &self,
        datasource: &str,
        slots: u32,
        holder: SlotHolder<'_>,
        lease: Duration,
    ) -> Result<Option<u32>, OutboxError> {
        const STEP: &str = "taking a datasource slot";
        let now = Utc::now();
        let mut seen: BTreeMap<u32, bool> = BTreeMap::new();
        let mut cursor = self
            .slots()
            .find(doc! {"datasource": datasource})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        while cursor.advance().await.map_err(|e| unavailable(STEP, &e))? {
            let slot = cursor
                .deserialize_current()
                .map_err(|e| unavailable(STEP, &e))?;
            let (Ok(number), Ok(expires)) = (slot.get_i64("slot"), slot.get_datetime("expires_at"))
            else {
                continue;
            };
            if let Ok(number) = u32::try_from(number) {
                seen.insert(number, expires.timestamp_millis() > now.timestamp_millis());
            }
        }
        let free: Vec<u32> = (0..slots)
            .filter(|slot| !seen.get(slot).copied().unwrap_or(false))
            .collect();
        if free.is_empty() {
            return Ok(None);
        }
        // At random among the free ones, so takers of several replicas rarely pick the same.
        let pick = free[(uuid::Uuid::new_v4().as_u128() % free.len() as u128) as usize];
        let id = format!("{pick}:{datasource}");
        let taken = doc! {
            "datasource": datasource,
            "slot": i64::from(pick),
            "owner": holder.owner,
            "job_id": holder.job_id.to_string(),
            "expires_at": bson_time(now + chrono_duration(lease)),
        };
        if seen.contains_key(&pick) {
            let filter = doc! {"_id": &id, "expires_at": {"$lte": bson_time(now)}};
            let updated = self
                .slots()
                .update_one(filter, doc! {"$set": taken})
                .await
                .map_err(|e| unavailable(STEP, &e))?;
            return Ok((updated.modified_count > 0).then_some(pick));
        }
        let mut document = taken;
        document.insert("_id", id);
        match self.slots().insert_one(document).await {
            Ok(_) => Ok(Some(pick)),
            Err(e) if duplicate_key(&e) => Ok(None),
            Err(e) => Err(unavailable(STEP, &e)),
        }
    }

    /// Extends `owner`'s slot of `datasource`; `false` when it holds none.
    pub async fn renew_slot(
        &self,
        datasource: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<bool, OutboxError> {
        let until = bson_time(Utc::now() + chrono_duration(lease));
        let renewed = self
            .slots()
            .update_many(
                doc! {"datasource": datasource, "owner": owner},
                doc! {"$set": {"expires_at": until}},
            )
            .await
            .map_err(|e| unavailable("renewing a datasource slot", &e))?;
        Ok(renewed.matched_count > 0)
    }

    /// Frees `owner`'s slot of `datasource`, if it holds one.
    pub async fn release_slot(&self, datasource: &str, owner: &str) -> Result<(), OutboxError> {
        self.slots()
            .delete_many(doc! {"datasource": datasource, "owner": owner})
            .await
            .map_err(|e| unavailable("releasing a datasource slot", &e))?;
        Ok(())
    }
}

fn duplicate_key(error: &mongodb::error::Error) -> bool {
    matches!(
        error.kind.as_ref(),
        ErrorKind::Write(WriteFailure::WriteError(write)) if write.code == DUPLICATE_KEY
    )
}
