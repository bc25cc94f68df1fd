//! A SQL Server job through the built Worker: a private pysqlbridge (the TDS stand-in) as the
//! datasource, the job completed, and the sealed result's bytes exactly the golden text.

use std::time::Duration;

use serde_json::json;
use testkit::sqlbridge::SqlBridge;
use uuid::Uuid;

use crate::harness::World;

/// The result of `dbo.people` (`dbo` stripped from the key), as the Go Worker indents it.
const GOLDEN: &str = concat!(
    "{\n  \"mssql\": {\n    \"people\": [\n",
    "      {\n        \"big\": 9007199254740993,\n        \"id\": 1,\n",
    "        \"name\": \"Ada \\u003cb\\u003e\",\n        \"score\": 0.5\n      },\n",
    "      {\n        \"big\": null,\n        \"id\": 2,\n",
    "        \"name\": \"Bob\",\n        \"score\": 1.25\n      }\n    ]\n  }\n}"
);

#[tokio::test]
async fn a_sql_server_job_completes_with_its_rows_sealed() {
    let world = World::new().await;
    let server = SqlBridge::start(&[(
        "people",
        json!([
            {"id": 1, "name": "Ada <b>", "score": 0.5, "big": 9007199254740993i64},
            {"id": 2, "name": "Bob", "score": 1.25, "big": null},
        ]),
    )]);
    let (worker, _api) = world
        .start_worker_with_api(server.vars("MSSQL", "mssql", &[]))
        .await;
    let mut events = world.listen().await;
    let job_id = Uuid::now_v7();
    world
        .submit_job(
            job_id,
            "mssql",
            "dbo.people",
            &["score", "id", "name", "big"],
        )
        .await;
    let event = events.event_for(job_id, Duration::from_secs(60)).await;
    event.verify(&world.keys).expect("signature");
    let body = event.body();
    assert_eq!(
        event.delivery.routing_key.as_str(),
        "job.completed",
        "{body}\n{}",
        server.server_log()
    );
    assert_eq!(body["result"]["rowCount"], 2, "{body}");
    let path = body["result"]["path"].as_str().expect("path");
    let plaintext = world
        .open_object(path)
        .await
        .expect("the stored object opens");
    assert_eq!(String::from_utf8(plaintext).expect("UTF-8"), GOLDEN);
    drop(worker);
    drop(server);
    world.cleanup().await;
}
