//! The indexes the Manager mode's queries need, created at start, and the check that the
//! server runs the transactions every transition needs.
//!
//! Upstream's gaps and what is chosen here:
//! - lib-commons creates `streaming_outbox_events`' six indexes at every Go Worker's start
//!   (UPSTREAM-MANAGER §4.7); a deployment whose Go Workers are all replaced would have none.
//!   They are created here with exactly upstream's names, keys and options, which a Go Worker's
//!   `CreateOne` then finds already present (an index of one of these names with other options
//!   would make Go Workers fail at start, §6.2).
//! - The `job` indexes are the Manager's, never created here (§1.3). This Worker's own queries
//!   on `job` (lapsed leases, objects left) get indexes of its own, named `fetcher_worker_*`
//!   and partial on its own sub-document, which no Go code reads or names; its own outbox
//!   (`fetcher_worker_outbox`) gets a unique `ce_id` and the relay's indexes, and so does the
//!   MQTT mirror's (`fetcher_worker_mirror`).

use mongodb::bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use outbox::OutboxError;

use crate::manager_store::{unavailable, ManagerStore};

/// lib-commons' outbox indexes (`lc:commons/outbox/mongo/indexes.go:9-58`): name, keys, unique,
/// sparse.
const OUTBOX_INDEXES: [(&str, &[&str], bool, bool); 6] = [
    ("outbox_id_scope_unique", &["tenant_id", "id"], true, false),
    (
        "outbox_pending_claim",
        &["tenant_id", "status", "created_at", "id"],
        false,
        false,
    ),
    (
        "outbox_pending_by_type_claim",
        &["tenant_id", "event_type", "status", "created_at", "id"],
        false,
        false,
    ),
    (
        "outbox_state_updated_scan",
        &["tenant_id", "status", "updated_at", "id"],
        false,
        false,
    ),
    (
        "outbox_claim_token_lookup",
        &["tenant_id", "claim_token", "status", "id"],
        false,
        true,
    ),
    (
        "outbox_status_tenant",
        &["status", "tenant_id"],
        false,
        false,
    ),
];

/// The indexes of a collection of rows relayed as a queue (this Worker's outbox, the MQTT
/// mirror's), named `{prefix}_ce_id` and `{prefix}_due`: one row per event (a unique `ce_id`),
/// and the relay's scan of the due rows (`next_attempt_at`, `id`; unpublished rows only).
fn queue_indexes(prefix: &str) -> [IndexModel; 2] {
    let unique_ce_id = IndexModel::builder()
        .keys(doc! {"ce_id": 1})
        .options(
            IndexOptions::builder()
                .name(format!("{prefix}_ce_id"))
                .unique(true)
                .build(),
        )
        .build();
    let due = IndexModel::builder()
        .keys(doc! {"next_attempt_at": 1, "id": 1})
        .options(
            IndexOptions::builder()
                .name(format!("{prefix}_due"))
                .partial_filter_expression(doc! {"published_at": null})
                .build(),
        )
        .build();
    [unique_ce_id, due]
}

impl ManagerStore {
    /// Creates lib-commons' outbox indexes (as a Go Worker does at start) and this Worker's own
    /// `job` indexes; each already present with the same options is left as it is. Call it at
    /// start: an error means the deployment's database refuses them (stop and say so).
    pub async fn ensure_indexes(&self) -> Result<(), OutboxError> {
        const STEP: &str = "creating the Manager mode's indexes";
        let outbox = OUTBOX_INDEXES.iter().map(|(name, keys, unique, sparse)| {
            let mut options = IndexOptions::builder().name((*name).to_owned()).build();
            if *unique {
                options.unique = Some(true);
            }
            if *sparse {
                options.sparse = Some(true);
            }
            let keys: Document = keys
                .iter()
                .map(|k| ((*k).to_owned(), 1_i32.into()))
                .collect();
            IndexModel::builder().keys(keys).options(options).build()
        });
        for model in outbox {
            self.store()
                .outbox_rows()
                .create_index(model)
                .await
                .map_err(|e| unavailable(STEP, &e))?;
        }
        let own = |name: &str, keys: Document, partial: Document| {
            let mut options = IndexOptions::builder().name(name.to_owned()).build();
            options.partial_filter_expression = Some(partial);
            IndexModel::builder().keys(keys).options(options).build()
        };
        for model in [
            own(
                "fetcher_worker_lease",
                doc! {"fetcher_worker.lease_expires_at": 1},
                doc! {"fetcher_worker.state": "processing"},
            ),
            own(
                "fetcher_worker_object_left",
                doc! {"fetcher_worker.finished_at": 1},
                doc! {"fetcher_worker.object_left": true},
            ),
        ] {
            self.store()
                .jobs()
                .create_index(model)
                .await
                .map_err(|e| unavailable(STEP, &e))?;
        }
        let [unique_ce_id, due] = queue_indexes("fetcher_worker_outbox");
        let by_job = IndexModel::builder()
            .keys(doc! {"job_id": 1})
            .options(
                IndexOptions::builder()
                    .name("fetcher_worker_outbox_job".to_owned())
                    .build(),
            )
            .build();
        for model in [unique_ce_id, due, by_job] {
            self.store()
                .worker_rows()
                .create_index(model)
                .await
                .map_err(|e| unavailable(STEP, &e))?;
        }
        // The MQTT mirror's rows: one per event, and the relay's due scan. Created whether the
        // mirror is on or not, so turning it on needs no index build under load.
        for model in queue_indexes("fetcher_worker_mirror") {
            self.store()
                .mirror_rows()
                .create_index(model)
                .await
                .map_err(|e| unavailable(STEP, &e))?;
        }
        Ok(())
    }

    /// Runs an empty read-only transaction: `Err` when the server cannot run the transactions
    /// every transition needs (a standalone server; the chart's MongoDB is a replica set).
    pub async fn check_transactions(&self) -> Result<(), OutboxError> {
        const STEP: &str = "checking that the Manager's MongoDB runs transactions";
        let mut session = self
            .store()
            .client()
            .start_session()
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        session
            .start_transaction()
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        self.store()
            .jobs()
            .find_one(doc! {"_id": 0})
            .session(&mut session)
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        session
            .commit_transaction()
            .await
            .map_err(|e| unavailable(STEP, &e))
    }
}
