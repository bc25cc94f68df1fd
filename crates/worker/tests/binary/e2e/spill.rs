//! A spill directory that takes no file: found at start, the Worker refuses to start and
//! `config check` says so; gone at a job's spill, the job fails once, naming the directory, and
//! the customer's database is read once, not again every few seconds.
//!
//! The tests run as root, so mode bits make no directory unwritable: the start's case uses
//! sysfs (`/sys`, which takes no new file from anyone); the job's cases a directory removed
//! after the start (no file can be created in it, `O_TMPFILE` included), a 1 MiB tmpfs the
//! spill fills, and a tmpfs remounted read-only after the start (root may mount).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use crate::harness::{free_port, metric_sum, WorkerProcess, World};

/// Rows of `big`: about 200 bytes of result JSON each, 4 MB in all, well past the 1 MiB a part
/// waiting its turn keeps in memory.
const ROWS: i64 = 20_000;

/// `big`; `stalls`, the same rows sleeping 5 minutes at the last one, so the part read first
/// never ends and the other must spill; and `counted`, `big` again, each statement that reads
/// it noted in `extractions` over `dblink` (its own session: the note stays whatever becomes of
/// the extraction's read-only transaction).
async fn tables(source: &PgPool, source_url: &str) {
    let fixture = format!(
        "CREATE EXTENSION dblink;
         CREATE TABLE extractions (at timestamptz NOT NULL DEFAULT clock_timestamp());
         CREATE FUNCTION note_extraction() RETURNS integer LANGUAGE plpgsql AS $fn$
         BEGIN
             PERFORM public.dblink_exec($url${source_url}$url$,
                 'INSERT INTO extractions DEFAULT VALUES');
             RETURN 1;
         END $fn$;
         CREATE TABLE big AS SELECT i AS id, repeat('x', 150) AS pad FROM generate_series(1, {ROWS}) i;
         CREATE VIEW stalls AS SELECT id, pad,
             CASE WHEN id = {ROWS} THEN pg_sleep(300)::text END AS stall FROM big;
         CREATE VIEW counted AS
             WITH run AS MATERIALIZED (SELECT note_extraction() AS noted)
             SELECT id, pad FROM big, run;"
    );
    sqlx::raw_sql(&fixture)
        .execute(source)
        .await
        .expect("fixture");
}

async fn extractions(source: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM extractions")
        .fetch_one(source)
        .await
        .expect("extractions")
}

/// How the spill directory fails the job.
#[derive(Clone, Copy, Debug)]
enum Unusable {
    /// Removed after the start.
    Gone,
    /// A 1 MiB tmpfs: the start's probe fits, the job's 4 MB do not.
    Full,
    /// A tmpfs remounted read-only after the start.
    ReadOnly,
}

/// A tmpfs mounted at a directory of its own, unmounted and removed when dropped.
struct Mount(std::path::PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(dir).expect("mount point");
        let mount = Mount(dir.to_owned());
        mount.run(&[
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=1777"),
            "tmpfs",
        ]);
        mount
    }

    fn read_only(&self) {
        self.run(&["-o", "remount,ro"]);
    }

    fn run(&self, args: &[&str]) {
        let output = Command::new("mount")
            .args(args)
            .arg(&self.0)
            .output()
            .expect("mount (the tests run as root)");
        assert!(
            output.status.success(),
            "mount {args:?} {}: {}",
            self.0.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[tokio::test]
async fn a_spill_directory_gone_at_job_time_fails_the_job_once_and_reads_the_source_once() {
    fails_once(Unusable::Gone).await;
}

#[tokio::test]
async fn a_full_spill_directory_fails_the_job_once_and_reads_the_source_once() {
    fails_once(Unusable::Full).await;
}

#[tokio::test]
async fn a_read_only_spill_directory_fails_the_job_once_and_reads_the_source_once() {
    fails_once(Unusable::ReadOnly).await;
}

async fn fails_once(unusable: Unusable) {
    let world = World::new().await;
    let source = PgPool::connect(world.source_url())
        .await
        .expect("source database");
    tables(&source, world.source_url()).await;
    let spill = std::env::temp_dir().join(format!("fetcher-spill-{}", world.id));
    let mount = match unusable {
        Unusable::Gone => {
            std::fs::create_dir_all(&spill).expect("spill dir");
            None
        }
        Unusable::Full => Some(Mount::tmpfs(&spill, "1m")),
        Unusable::ReadOnly => Some(Mount::tmpfs(&spill, "64m")),
    };
    let mut env = world.source_aliases(&["early"]);
    env.push(("ENGINE_SPILL_DIR".into(), spill.display().to_string()));
    // Ready: the start's check created a file there.
    let mut worker = world.start_worker_with(env).await;
    match (unusable, &mount) {
        (Unusable::Gone, _) => std::fs::remove_dir(&spill).expect("remove the spill dir"),
        (Unusable::ReadOnly, Some(mount)) => mount.read_only(),
        _ => {}
    }
    let mut events = world.listen().await;

    // `early` comes first in name order and streams through until it stalls; `src` waits its
    // turn, past its memory share, so it spills.
    let job_id = Uuid::now_v7();
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": {"early": {"stalls": ["id", "pad"]}, "src": {"counted": ["id", "pad"]}},
        "metadata": {"source": "e2e"},
    });
    world.submit(body.to_string().as_bytes(), None, &[]).await;
    let message = world.failure_of(&mut events, job_id).await;
    let reason = format!(
        "the spill directory ENGINE_SPILL_DIR ({}) could not be written: ",
        spill.display()
    );
    assert!(message.starts_with(&reason), "{message}");
    let cause = match unusable {
        Unusable::Gone => "No such file or directory",
        Unusable::Full => "No space left on device",
        Unusable::ReadOnly => "Read-only file system",
    };
    assert!(message.contains(cause), "{unusable:?}: {message}");
    // The terminal state is recorded before the event is published.
    assert_eq!(world.job_status(job_id).await.as_deref(), Some("failed"));
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert_eq!(
        metric_sum(&metrics, "fetcher_engine_spill_failures_total", ""),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric_sum(&metrics, "fetcher_jobs_total", "outcome=\"failed\""),
        1.0,
        "{metrics}"
    );
    let job = job_id.to_string();
    worker
        .wait_for_lines(
            "the job's failure at WARN",
            1,
            Duration::from_secs(10),
            |line| {
                line.contains("\"level\":\"WARN\"") && line.contains(&job) && line.contains(&reason)
            },
        )
        .await;

    // A message not acked goes back to the queue when the Worker's channel closes: after a
    // graceful stop, an empty queue says the job's message was acked, not requeued.
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(60)).await, Some(0));
    assert_eq!(world.broker.depth(&world.queue).await, 0, "acked");
    assert_eq!(
        extractions(&source).await,
        1,
        "the source database was read once"
    );
    source.close().await;
    drop(worker);
    drop(mount);
    world.cleanup().await;
}

#[tokio::test]
async fn a_spill_directory_root_cannot_write_refuses_the_start_and_fails_the_config_check() {
    let world = World::new().await;
    let port = free_port();
    let mut env = world.env(port);
    assert!(Path::new("/sys").is_dir(), "sysfs is mounted");
    env.insert("ENGINE_SPILL_DIR".into(), "/sys".into());
    let problem = "ENGINE_SPILL_DIR \"/sys\" must be a writable directory";

    let checked = Command::new(WorkerProcess::binary())
        .args(["config", "check"])
        .env_clear()
        .envs(&env)
        .output()
        .expect("fetcher-worker config check");
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(2), "{said}");
    assert!(
        said.contains(problem) && said.contains("Permission denied"),
        "{said}"
    );

    let mut worker = WorkerProcess::spawn(env, port);
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(2));
    let output = worker.output();
    assert!(
        output.lines().any(|line| line.contains(problem)),
        "{output}"
    );
    drop(worker);
    world.cleanup().await;
}
