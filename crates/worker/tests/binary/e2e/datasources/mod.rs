//! Jobs over every kind of datasource the Worker reads (issue 15), through the binary: each
//! kind's result checked byte for byte against its golden file under `e2e/fixtures/`, a job
//! mixing the kinds, fail-fast across kinds with the others' work gone from their servers, and
//! hostile MongoDB filters.
//!
//! Each test seeds databases of its own ([`crate::harness::sources`]) and gives them to its
//! Worker as `DATASOURCE_<NAME>_*` variables. A kind added later (SQL Server) brings its
//! [`SourceDb`](crate::harness::sources::SourceDb), a fixture and a golden file.

mod fail_fast;
mod hostile_filters;
mod mixed;
mod mongodb;
mod plugin_crm;

use uuid::Uuid;

use crate::harness::sources::SourceDb;
use crate::harness::{assert_golden, WorkerProcess, World};

/// A job body: `mapped` as its `mappedFields`, `filters` as its `filters` (`null`: none).
fn job(job_id: Uuid, mapped: serde_json::Value, filters: serde_json::Value) -> Vec<u8> {
    let mut body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": mapped,
        "metadata": {"source": "e2e"},
    });
    if !filters.is_null() {
        body["filters"] = filters;
    }
    body.to_string().into_bytes()
}

/// Starts a Worker whose datasources are `sources` (each a name and its database) and `extra`
/// variables besides, runs one job of `mapped` and `filters` to `job.completed`, and checks its
/// stored result against the golden file `golden`. The Worker, for the test's other jobs.
async fn golden_job(
    world: &World,
    sources: &[(&str, &dyn SourceDb)],
    extra: Vec<(String, String)>,
    (mapped, filters): (serde_json::Value, serde_json::Value),
    golden: &str,
) -> WorkerProcess {
    let env = sources
        .iter()
        .flat_map(|(name, source)| source.datasource(name))
        .chain(extra)
        .collect();
    let worker = world.start_worker_with(env).await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world.submit(&job(job_id, mapped, filters), None, &[]).await;
    let result = world.completed_result(&mut events, job_id).await;
    assert_golden(golden, &result);
    worker
}
