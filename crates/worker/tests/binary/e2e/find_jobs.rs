//! Finding jobs through the real binary's control API (lifecycle §3): a tenant pages through
//! its failed jobs two at a time and sees exactly them, newest first, without duplicates or
//! gaps, each page item the job document `GET /v1/fetcher/{id}` answers; a query string other
//! than the signed one is refused; every bad parameter is a 400 with its reason.

use chrono::{DateTime, Duration as Span, Utc};
use uuid::Uuid;

use crate::harness::{Signing, World};

/// One job row of the fixture.
struct Seeded {
    id: Uuid,
    tenant: Option<&'static str>,
    status: &'static str,
    created_at: DateTime<Utc>,
}

async fn seed(world: &World, job: &Seeded) {
    let ended = ["failed", "completed"].contains(&job.status);
    sqlx::query(
        "INSERT INTO jobs (job_id, tenant_id, status, created_at, finished_at, error_message,
                           result_path, result_hmac, metadata)
         VALUES ($1, $2, $3, $4, $5,
                 CASE WHEN $3 = 'failed' THEN 'source unreachable' END,
                 CASE WHEN $3 = 'completed' THEN 'r/' || $1::text END,
                 CASE WHEN $3 = 'completed' THEN repeat('0', 64) END,
                 -- The failed jobs asked by one system, the others by another.
                 jsonb_build_object('source',
                     CASE WHEN $3 = 'failed' THEN 'matcher' ELSE 'reporter' END))",
    )
    .bind(job.id)
    .bind(job.tenant)
    .bind(job.status)
    .bind(job.created_at)
    .bind(ended.then_some(job.created_at))
    .execute(&world.state)
    .await
    .expect("seed a job");
}

#[tokio::test]
async fn a_tenant_pages_through_exactly_its_failed_jobs_newest_first() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let base = DateTime::parse_from_rfc3339("2026-03-01T10:00:00.123456Z")
        .unwrap()
        .with_timezone(&Utc);
    let mut jobs = Vec::new();
    // acme: seven failed jobs (two created in the same microsecond, so a page boundary falls
    // between equal times), completed and pending ones between them; globex and the
    // single-tenant jobs fail at the same times.
    let acme_statuses = [
        "failed",
        "completed",
        "failed",
        "pending",
        "failed",
        "failed",
        "completed",
        "failed",
        "failed",
    ];
    for (minute, status) in acme_statuses.iter().enumerate() {
        jobs.push(Seeded {
            id: Uuid::new_v4(),
            tenant: Some("acme"),
            status,
            created_at: base + Span::minutes(minute as i64),
        });
    }
    jobs.push(Seeded {
        id: Uuid::new_v4(),
        tenant: Some("acme"),
        status: "failed",
        created_at: base + Span::minutes(4),
    });
    for minute in [0, 4, 8] {
        jobs.push(Seeded {
            id: Uuid::new_v4(),
            tenant: Some("globex"),
            status: "failed",
            created_at: base + Span::minutes(minute),
        });
    }
    jobs.push(Seeded {
        id: Uuid::new_v4(),
        tenant: None,
        status: "failed",
        created_at: base + Span::minutes(5),
    });
    for job in &jobs {
        seed(&world, job).await;
    }
    let mut expected: Vec<&Seeded> = jobs
        .iter()
        .filter(|j| j.tenant == Some("acme") && j.status == "failed")
        .collect();
    expected.sort_by_key(|j| std::cmp::Reverse((j.created_at, j.id)));
    let expected: Vec<String> = expected.iter().map(|j| j.id.to_string()).collect();
    assert_eq!(expected.len(), 7);
    // One failed execution of the newest, so the page item carries it as the document does.
    sqlx::query(
        "INSERT INTO job_executions (job_id, datasource, status, started_at, ended_at, error)
         VALUES ($1, 'ledger', 'FAILED', now(), now(), 'source unreachable'),
                ($1, 'audit', 'SUCCEEDED', now(), now(), NULL)",
    )
    .bind(Uuid::parse_str(&expected[0]).unwrap())
    .execute(&world.state)
    .await
    .expect("executions");

    let mut seen = Vec::new();
    let mut query = "?status=failed&limit=2".to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = api.list(&query, &query, Some("acme"));
        assert_eq!(status, 200, "{page}");
        pages += 1;
        let items = page["items"].as_array().expect("items");
        assert!(items.len() <= 2, "{page}");
        for item in items {
            assert_eq!(item["status"], "failed", "{item}");
            let id = item["id"].as_str().unwrap().to_owned();
            // Exactly the document of GET /v1/fetcher/{id}.
            let (status, document) = api.send(
                "GET",
                Uuid::parse_str(&id).unwrap(),
                "",
                Some("acme"),
                b"",
                Signing::Valid,
            );
            assert_eq!(status, 200);
            assert_eq!(item, &document);
            seen.push(id);
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => query = format!("?status=failed&limit=2&cursor={cursor}"),
            None => {
                assert!(page["nextCursor"].is_null(), "{page}");
                break;
            }
        }
        assert!(pages < 10, "the pages never end");
    }
    assert_eq!(seen, expected, "newest first, no duplicate, no gap");
    assert_eq!(pages, 4, "seven jobs in pages of two");
    let (_, first) = api.list("?limit=1", "?limit=1", Some("acme"));
    assert_eq!(first["items"][0]["id"], expected[0]);
    assert_eq!(first["items"][0]["executions"][0]["datasource"], "audit");
    assert_eq!(
        first["items"][0]["executions"][1]["statusDetails"]["error"],
        "source unreachable"
    );

    // The time filters bound the page (both ends exclusive); the default limit takes them all.
    let window = format!(
        "?createdAfter={}&createdBefore={}",
        (base + Span::minutes(1)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        (base + Span::minutes(5)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    );
    let (status, page) = api.list(&window, &window, Some("acme"));
    assert_eq!(status, 200, "{page}");
    let statuses: Vec<_> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["failed", "failed", "pending", "failed"]);
    assert!(page["nextCursor"].is_null());

    // By source: the failed ones came from the matcher (the seed's rule).
    let (status, matcher) = api.list(
        "?source=matcher&limit=250",
        "?source=matcher&limit=250",
        Some("acme"),
    );
    assert_eq!(status, 200, "{matcher}");
    let ids: Vec<String> = matcher["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, expected, "{matcher}");

    // Another tenant, and the single-tenant caller, see only theirs.
    let (_, globex) = api.list("?status=failed", "?status=failed", Some("globex"));
    assert_eq!(globex["items"].as_array().unwrap().len(), 3, "{globex}");
    let (_, single) = api.list("", "", None);
    assert_eq!(single["items"].as_array().unwrap().len(), 1, "{single}");
    assert_eq!(
        single["items"][0]["id"],
        jobs.last().unwrap().id.to_string()
    );

    // A job's executions, by execution status.
    let newest = Uuid::parse_str(&expected[0]).unwrap();
    let (status, runs) = api.send(
        "GET",
        newest,
        "/executions?status=FAILED",
        Some("acme"),
        b"",
        Signing::Valid,
    );
    assert_eq!(status, 200, "{runs}");
    assert_eq!(runs["jobId"], newest.to_string());
    assert_eq!(runs["executions"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["executions"][0]["datasource"], "ledger");
    let (status, _) = api.send(
        "GET",
        newest,
        "/executions",
        Some("globex"),
        b"",
        Signing::Valid,
    );
    assert_eq!(status, 404, "another tenant's job is unknown");
    let (status, runs) = api.send(
        "GET",
        newest,
        "/executions?status=LOST",
        Some("acme"),
        b"",
        Signing::Valid,
    );
    assert_eq!(status, 400);
    assert!(runs["error"].as_str().unwrap().contains("LOST"), "{runs}");

    // A captured request sent with another filter than it was signed for is refused.
    let (status, answer) = api.list("?status=completed", "?status=failed", Some("acme"));
    assert_eq!(status, 401, "{answer}");
    assert!(answer.get("items").is_none());
    let (status, _) = api.list("?status=failed&limit=250", "?status=failed", Some("acme"));
    assert_eq!(status, 401);

    // Every bad parameter is a 400 that names what is wrong.
    for (query, names) in [
        ("?status=exploded", "exploded"),
        ("?limit=0", "limit"),
        ("?limit=251", "limit"),
        ("?cursor=bm90LWEtY3Vyc29y", "cursor"),
        ("?createdAfter=yesterday", "createdAfter"),
        ("?createdBefore=2026-02-30T00:00:00Z", "createdBefore"),
        ("?datasource=ledger", "datasource"),
        ("?source=a%0Ab", "source"),
        ("?status=failed&status=completed", "more than once"),
    ] {
        let (status, answer) = api.list(query, query, Some("acme"));
        assert_eq!(status, 400, "{query}: {answer}");
        assert_eq!(answer["code"], "invalid_query", "{query}");
        let reason = answer["error"].as_str().unwrap();
        assert!(reason.contains(names), "{query}: {reason}");
    }
    drop(worker);
    world.cleanup().await;
}
