//! Results of many parts (issue 17): streamed from two datasources read in parallel into a
//! multipart upload, stored whole and in order, or, when a datasource fails after parts were
//! uploaded, nothing at all: no object, no multipart upload left open, no spill file.
//!
//! The S3 stand-in (s3s-fs) has no `ListMultipartUploads`; an upload it holds open is a
//! `.bucket-<bucket>.object-<key>.upload-<id>.metadata.json` file in its data directory
//! (`S3_DATA`, as `scripts/services.sh` starts it), removed by the abort and by the completion.

use std::path::Path;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use uuid::Uuid;

use crate::harness::{WorkerProcess, World};

/// Rows of the big tables: about 200 bytes of result JSON each, so 60 000 rows are about
/// 12 MB of JSON and 16 MB of stored text, two 8 MiB parts.
const ROWS: i64 = 60_000;

/// `big` (ids 1..=ROWS with a 150-byte pad) and `breaks`, which reads the same rows and fails
/// with a division by zero at the last one, after a whole part's worth of rows.
async fn big_tables(world: &World) {
    let source = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("source database");
    let fixture = format!(
        "CREATE TABLE big AS SELECT i AS id, repeat('x', 150) AS pad FROM generate_series(1, {ROWS}) i;
         CREATE VIEW breaks AS SELECT id, pad, 1 / ({ROWS} - id) AS boom FROM big;"
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
    serde_json::json!({"jobId": job_id, "mappedFields": mapped, "metadata": {"source": "e2e"}})
        .to_string()
        .into_bytes()
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
    // `early` sorts first: its rows stream straight into the upload, and it fails only after
    // a part's worth of them; `src` is read meanwhile, spooled, then abandoned.
    let mut env = world.source_aliases(&["early"]);
    env.push(("ENGINE_SPILL_DIR".into(), spill.display().to_string()));
    let worker = world.start_worker_with(env).await;
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    world
        .submit(
            &job(
                job_id,
                serde_json::json!({
                    "early": {"breaks": ["boom", "id", "pad"]},
                    "src": {"big": ["id", "pad"]},
                }),
            ),
            None,
            &[],
        )
        .await;
    let message = world.failure_of(&mut events, job_id).await;
    assert!(
        message.contains("query on datasource early failed")
            && message.contains("division by zero"),
        "{message}"
    );
    assert!(world.object_keys().await.is_empty(), "no object");
    // The abort is awaited before the job's end is recorded.
    assert_eq!(
        open_uploads(&world),
        Vec::<String>::new(),
        "no upload left open"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let files = spill_files(&worker, &spill);
        if files == (Vec::new(), 0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "spill files left: {files:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(worker);
    std::fs::remove_dir_all(&spill).ok();
    world.cleanup().await;
}
