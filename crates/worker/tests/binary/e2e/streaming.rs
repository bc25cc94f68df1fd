//! Results of many parts (issue 17): streamed from two datasources read in parallel into a
//! multipart upload, stored whole and in order, or, when a datasource fails, the job times out
//! or is force-canceled after parts were uploaded, nothing at all: no object, no multipart
//! upload left open, no spill file.
//!
//! The S3 stand-in (s3s-fs) has no `ListMultipartUploads`; an upload it holds open is a
//! `.bucket-<bucket>.object-<key>.upload-<id>.metadata.json` file in its data directory
//! (`S3_DATA`, as `scripts/services.sh` starts it), removed by the abort and by the completion.

use std::path::Path;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use uuid::Uuid;

use crate::harness::{Signing, WorkerProcess, World};

/// Rows of the big tables: about 200 bytes of result JSON each, so 60 000 rows are about
/// 12 MB of JSON and 16 MB of stored text, two 8 MiB parts.
const ROWS: i64 = 60_000;

/// `big` (ids 1..=ROWS with a 150-byte pad); `breaks`, which reads the same rows and fails
/// with a division by zero at the last one, after a whole part's worth of rows; and `stalls`,
/// which sleeps 5 minutes at the last one.
async fn big_tables(world: &World) {
    let source = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("source database");
    let fixture = format!(
        "CREATE TABLE big AS SELECT i AS id, repeat('x', 150) AS pad FROM generate_series(1, {ROWS}) i;
         CREATE VIEW breaks AS SELECT id, pad, 1 / ({ROWS} - id) AS boom FROM big;
         CREATE VIEW stalls AS SELECT id, pad,
             CASE WHEN id = {ROWS} THEN pg_sleep(300)::text END AS stall FROM big;"
    );
    sqlx::raw_sql(&fixture)
        .execute(&source)
        .await
        .expect("fixture");
    source.close().await;
}

/// A private, empty spill directory for the Worker.
fn spill_dir(world: &World) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fetcher-spill-{}", world.id));
    std::fs::create_dir_all(&dir).expect("spill dir");
    dir
}

/// Multipart uploads s3s-fs holds open in the world's bucket.
fn open_uploads(world: &World) -> Vec<String> {
    let data = std::env::var("S3_DATA").unwrap_or_else(|_| "/var/lib/fetcher-s3".into());
    let prefix = format!(".bucket-{}.object-", URL_SAFE_NO_PAD.encode(&world.bucket));
    std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("s3s-fs data directory {data}: {e}"))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(&prefix) && name.contains(".upload-"))
        .collect()
}

/// Files the Worker process holds open in `dir` (an unnamed spill file shows there as
/// `<dir>/#<inode> (deleted)`), and the entries `dir` lists.
fn spill_files(worker: &WorkerProcess, dir: &Path) -> (Vec<String>, usize) {
    let fds = format!("/proc/{}/fd", worker.child.id());
    let held = std::fs::read_dir(&fds)
        .expect("the Worker's fds")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with(&*dir.to_string_lossy()))
        .collect();
    let listed = std::fs::read_dir(dir).expect("spill dir").count();
    (held, listed)
}

fn job(job_id: Uuid, mapped: serde_json::Value) -> Vec<u8> {
    job_with(job_id, mapped, serde_json::json!({}))
}

/// A job body with `extra` members (e.g. `timeoutSeconds`).
fn job_with(job_id: Uuid, mapped: serde_json::Value, extra: serde_json::Value) -> Vec<u8> {
    let mut body =
        serde_json::json!({"jobId": job_id, "mappedFields": mapped, "metadata": {"source": "e2e"}});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body.to_string().into_bytes()
}

/// Waits until the world's bucket has a multipart upload open: parts are being uploaded.
async fn wait_for_open_upload(world: &World) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while open_uploads(world).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no multipart upload was ever started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// After a job that ended without a result: no object, no open upload, and (once the aborted
/// tasks are gone) no spill file held or named.
async fn assert_nothing_left(world: &World, worker: &WorkerProcess, spill: &Path) {
    assert!(world.object_keys().await.is_empty(), "no object");
    // The abort is awaited before the job's end is recorded.
    assert_eq!(
        open_uploads(world),
        Vec::<String>::new(),
        "no upload left open"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let files = spill_files(worker, spill);
        if files == (Vec::new(), 0) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "spill files left: {files:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The job of the interrupted cases: `early` (sorting first, so its rows stream straight into
/// the upload) reads `view`; `src` is read meanwhile, spooled, then abandoned.
fn interrupted_job(job_id: Uuid, view: &str, fields: &[&str], extra: serde_json::Value) -> Vec<u8> {
    job_with(
        job_id,
        serde_json::json!({
            "early": {view: fields},
            "src": {"big": ["id", "pad"]},
        }),
        extra,
    )
}

#[tokio::test]
async fn a_result_of_many_parts_from_two_datasources_is_stored_whole_and_in_order() {
    let world = World::new().await;
    big_tables(&world).await;
    let spill = spill_dir(&world);
    let mut env = world.source_aliases(&["second"]);
    env.push(("ENGINE_SPILL_DIR".into(), spill.display().to_string()));
    let worker = world.start_worker_with(env).await;
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    let fields = ["id", "pad"];
    world
        .submit(
            &job(
                job_id,
                serde_json::json!({"src": {"big": fields}, "second": {"big": fields}}),
            ),
            None,
            &[],
        )
        .await;
    // Opened with the one-shot `open`, its HMAC and size checked against the event.
    let plaintext = world.completed_result(&mut events, job_id).await;
    assert!(
        plaintext.len() > 16 << 20,
        "the result spans several 8 MiB parts: {} bytes",
        plaintext.len()
    );
    let document: serde_json::Value =
        serde_json::from_slice(&plaintext).expect("the result is one JSON document");
    let connections: Vec<_> = document.as_object().expect("object").keys().collect();
    assert_eq!(connections, ["second", "src"], "connections in name order");
    for connection in ["second", "src"] {
        let rows = document[connection]["big"].as_array().expect("rows");
        assert_eq!(rows.len() as i64, ROWS, "every row of {connection}");
        let mut ids: Vec<i64> = rows
            .iter()
            .map(|row| row["id"].as_i64().expect("id"))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len() as i64, ROWS, "no row of {connection} twice");
    }
    assert!(open_uploads(&world).is_empty(), "the upload completed");
    assert_eq!(
        spill_files(&worker, &spill),
        (Vec::new(), 0),
        "no spill file left open or named"
    );
    drop(worker);
    std::fs::remove_dir_all(&spill).ok();
    world.cleanup().await;
}

#[tokio::test]
async fn a_datasource_failing_after_parts_were_uploaded_leaves_no_object_upload_or_spill_file() {
    let world = World::new().await;
    big_tables(&world).await;
    let spill = spill_dir(&world);
    let mut env = world.source_aliases(&["early"]);
    env.push(("ENGINE_SPILL_DIR".into(), spill.display().to_string()));
    let worker = world.start_worker_with(env).await;
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    // `boom` is the column that fails.
    let body = interrupted_job(
        job_id,
        "breaks",
        &["boom", "id", "pad"],
        serde_json::json!({}),
    );
    world.submit(&body, None, &[]).await;
    let message = world.failure_of(&mut events, job_id).await;
    assert!(
        message.contains("query on datasource early failed")
            && message.contains("division by zero"),
        "{message}"
    );
    assert_nothing_left(&world, &worker, &spill).await;
    drop(worker);
    std::fs::remove_dir_all(&spill).ok();
    world.cleanup().await;
}

#[tokio::test]
async fn a_timeout_or_a_force_cancel_after_parts_were_uploaded_leaves_nothing() {
    let world = World::new().await;
    big_tables(&world).await;
    let spill = spill_dir(&world);
    let mut env = world.source_aliases(&["early"]);
    env.push(("ENGINE_SPILL_DIR".into(), spill.display().to_string()));
    let (worker, api) = world.start_worker_with_api(env).await;
    let mut events = world.listen().await;

    // The job's own timeout fires while its last row stalls, parts already uploaded.
    let timed_out = Uuid::now_v7();
    world
        .submit(
            &interrupted_job(
                timed_out,
                "stalls",
                &["id", "pad"],
                serde_json::json!({"timeoutSeconds": 30}),
            ),
            None,
            &[],
        )
        .await;
    wait_for_open_upload(&world).await;
    let message = world.failure_of(&mut events, timed_out).await;
    assert!(message.contains("timed out after 30s"), "{message}");
    assert_nothing_left(&world, &worker, &spill).await;

    // A force-cancel once parts are uploaded.
    let canceled = Uuid::now_v7();
    world
        .submit(
            &interrupted_job(canceled, "stalls", &["id", "pad"], serde_json::json!({})),
            None,
            &[],
        )
        .await;
    wait_for_open_upload(&world).await;
    let (status, document) = api.send(
        "POST",
        canceled,
        "/cancel",
        None,
        br#"{"force":true,"comment":"mid-upload","reasonCode":"OPS_1"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    let mut ended = None;
    for _ in 0..2 {
        let event = events.event_for(canceled, Duration::from_secs(60)).await;
        ended = Some(event.delivery.routing_key.as_str().to_owned());
    }
    assert_eq!(ended.as_deref(), Some("job.canceled"));
    assert_nothing_left(&world, &worker, &spill).await;
    drop(worker);
    std::fs::remove_dir_all(&spill).ok();
    world.cleanup().await;
}
