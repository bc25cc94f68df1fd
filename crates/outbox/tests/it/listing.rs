//! Finding jobs: a page is read from an index in order (never sorted, never scanned whole),
//! whatever its filters; pages follow each other by keyset without gap or duplicate.

use chrono::{DateTime, Utc};
use outbox::JobQuery;
use uuid::Uuid;

use crate::support::TestDb;

/// 3,000 jobs of two tenants and single-tenant ones, a seventh of them failed, of two sources,
/// one a second.
async fn seeded() -> TestDb {
    let db = TestDb::migrated().await;
    sqlx::query(
        "INSERT INTO jobs (job_id, tenant_id, status, created_at, finished_at, error_message,
                           metadata)
         SELECT gen_random_uuid(), (ARRAY['acme', 'globex', NULL])[g % 3 + 1],
                CASE WHEN g % 7 = 0 THEN 'failed' ELSE 'pending' END,
                timestamptz '2026-03-01' - g * interval '1 second',
                CASE WHEN g % 7 = 0 THEN now() END, CASE WHEN g % 7 = 0 THEN 'x' END,
                jsonb_build_object('source', (ARRAY['reporter', 'matcher'])[g % 2 + 1])
         FROM generate_series(1, 3000) g",
    )
    .execute(db.pool())
    .await
    .expect("seed");
    sqlx::query("ANALYZE jobs")
        .execute(db.pool())
        .await
        .expect("analyze");
    db
}

#[tokio::test]
async fn every_page_query_reads_an_index_in_order() {
    let db = seeded().await;
    // One connection, on which sorting and scanning the table are made as costly as PostgreSQL
    // allows: a plan that still sorts or scans the table has no index that serves the page.
    let store = db.store_with(1).await;
    for setting in ["enable_sort", "enable_seqscan", "enable_bitmapscan"] {
        sqlx::query(&format!("SET {setting} = off"))
            .execute(store.pool())
            .await
            .expect("set");
    }
    let at: DateTime<Utc> = "2026-02-28T23:00:00Z".parse().unwrap();
    for tenant in [Some("acme"), None] {
        for (status, source) in [
            (Some("failed"), None),
            (None, None),
            (None, Some("matcher")),
            (Some("failed"), Some("matcher")),
        ] {
            for window in [None, Some(at)] {
                for after in [None, Some((at, Uuid::max()))] {
                    let query = JobQuery {
                        tenant,
                        status,
                        source,
                        created_after: window.map(|at| at - chrono::Duration::hours(1)),
                        created_before: window,
                        after,
                        limit: 51,
                    };
                    let plan = store.list_jobs_plan(&query).await.expect("plan").join("\n");
                    // A source and a status together: either's index serves the page in order,
                    // the other filtered on it.
                    let indexes: &[&str] = match (status, source) {
                        (Some(_), Some(_)) => &["jobs_listing_source ", "jobs_listing_status "],
                        (None, Some(_)) => &["jobs_listing_source "],
                        (Some(_), None) => &["jobs_listing_status "],
                        (None, None) => &["jobs_listing "],
                    };
                    assert!(
                        indexes
                            .iter()
                            .any(|index| plan.contains(&format!("Index Scan using {index}"))),
                        "{query:?}\n{plan}"
                    );
                    assert!(!plan.contains("Sort"), "{query:?}\n{plan}");
                    // Only a source and a status together filter (one of them, on the index).
                    let filters = plan.contains("Filter");
                    assert_eq!(
                        filters,
                        status.is_some() && source.is_some(),
                        "{query:?}\n{plan}"
                    );
                    if after.is_some() {
                        assert!(plan.contains("ROW(created_at, job_id) <"), "{plan}");
                    }
                }
            }
        }
    }
    drop(store);
    db.drop().await;
}

#[tokio::test]
async fn pages_follow_each_other_without_gap_or_duplicate() {
    let db = seeded().await;
    let mut all: Vec<(DateTime<Utc>, Uuid)> = sqlx::query_as(
        "SELECT created_at, job_id FROM jobs WHERE tenant_id IS NULL AND status = 'failed'",
    )
    .fetch_all(db.pool())
    .await
    .expect("expected");
    all.sort_by_key(|key| std::cmp::Reverse(*key));
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let query = JobQuery {
            tenant: None,
            status: Some("failed"),
            source: None,
            created_after: None,
            created_before: None,
            after,
            limit: 40,
        };
        let page = db.store.list_jobs(&query).await.expect("page");
        assert!(page
            .iter()
            .all(|job| job.tenant_id.is_none() && job.status == "failed"));
        seen.extend(page.iter().map(|job| (job.created_at, job.job_id)));
        match page.last() {
            Some(last) if page.len() == 40 => after = Some((last.created_at, last.job_id)),
            _ => break,
        }
    }
    assert_eq!(seen, all);
    db.drop().await;
}

/// The benchmark of BENCHMARKS.md ("Finding jobs"): `LISTING_BENCH_ROWS` jobs (default ten
/// million) of 100 tenants, then the time of a first page, a page deep in the middle (by
/// cursor) and a page of failed jobs, each the median of 25 runs, and the chosen plans.
#[tokio::test]
#[ignore = "benchmark: fills a database with millions of rows; run by hand (BENCHMARKS.md)"]
async fn bench_a_page_over_millions_of_jobs() {
    let rows: i64 = std::env::var("LISTING_BENCH_ROWS")
        .ok()
        .map(|v| v.parse().expect("LISTING_BENCH_ROWS"))
        .unwrap_or(10_000_000);
    let db = TestDb::migrated().await;
    let filled = std::time::Instant::now();
    sqlx::query(
        "INSERT INTO jobs (job_id, tenant_id, status, created_at, finished_at, error_message,
                           result_path, result_hmac)
         SELECT gen_random_uuid(), 't' || (g % 100),
                CASE WHEN g % 7 = 0 THEN 'failed' ELSE 'completed' END,
                timestamptz '2026-03-01' - g * interval '1 second', now(),
                CASE WHEN g % 7 = 0 THEN 'x' END,
                CASE WHEN g % 7 <> 0 THEN 'r' END, CASE WHEN g % 7 <> 0 THEN 'h' END
         FROM generate_series(1, $1) g",
    )
    .bind(rows)
    .execute(db.pool())
    .await
    .expect("fill");
    sqlx::query("VACUUM ANALYZE jobs")
        .execute(db.pool())
        .await
        .expect("analyze");
    println!("{rows} jobs filled in {:?}", filled.elapsed());
    let middle: (DateTime<Utc>, Uuid) = sqlx::query_as(
        "SELECT created_at, job_id FROM jobs WHERE tenant_id = 't42'
         ORDER BY created_at DESC, job_id DESC OFFSET $1 LIMIT 1",
    )
    .bind(rows / 200)
    .fetch_one(db.pool())
    .await
    .expect("middle");
    let page = |status, after| JobQuery {
        tenant: Some("t42"),
        status,
        source: None,
        created_after: None,
        created_before: None,
        after,
        limit: 51,
    };
    for (name, query) in [
        ("first page", page(None, None)),
        ("middle page", page(None, Some(middle))),
        ("failed, middle", page(Some("failed"), Some(middle))),
    ] {
        let mut times = Vec::new();
        for _ in 0..25 {
            let start = std::time::Instant::now();
            let jobs = db.store.list_jobs(&query).await.expect("page");
            times.push(start.elapsed());
            assert_eq!(jobs.len(), 51);
        }
        times.sort();
        let plan = db.store.list_jobs_plan(&query).await.expect("plan");
        println!(
            "{name}: median {:?}, max {:?}; {}",
            times[12],
            times[24],
            plan[1].trim()
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_source_finds_exactly_its_jobs_of_the_tenant() {
    let db = seeded().await;
    let expected: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE tenant_id = 'acme' AND status = 'failed'
           AND metadata->>'source' = 'matcher'",
    )
    .fetch_one(db.pool())
    .await
    .expect("count");
    assert!(expected > 0);
    let query = JobQuery {
        tenant: Some("acme"),
        status: Some("failed"),
        source: Some("matcher"),
        created_after: None,
        created_before: None,
        after: None,
        limit: 1000,
    };
    let page = db.store.list_jobs(&query).await.expect("page");
    assert_eq!(page.len() as i64, expected);
    assert!(page
        .iter()
        .all(|job| job.tenant_id.as_deref() == Some("acme")
            && job.status == "failed"
            && job.metadata["source"] == "matcher"));
    db.drop().await;
}
