//! A state write the server acknowledged survives the server's crash: a private secantusdb is
//! SIGKILLed right after a job's claim and terminal record (its outbox row and markers in one
//! transaction) and started again on the same data. The Worker's client asks for journaled
//! writes (`mongostate::journaled_writes`); secantusdb honours that on single writes only, so
//! the server runs with `--sync-on-commit` as the chaos soak's does (`PrivateSecantus::
//! start_durable` says why): without it this test lost the terminal record's commit.

use std::time::Duration;

use mongodb::bson::{doc, Bson};
use mongodb::options::ClientOptions;
use mongodb::Client;
use testkit::manager::Manager;
use testkit::secantus::PrivateSecantus;
use uuid::Uuid;

use crate::manager_world::{
    claim_request, completed, event, manager_store, request, terminal_record, LEASE,
};

async fn client(server: &PrivateSecantus) -> Client {
    let mut options = ClientOptions::parse(server.url()).await.expect("the URL");
    options.server_selection_timeout = Some(Duration::from_secs(20));
    mongostate::journaled_writes(&mut options);
    Client::with_options(options).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_claims_and_terminal_records_survive_a_sigkill_of_the_server() {
    let mut server = PrivateSecantus::start_durable();
    let name = format!("fetcher_durability_{}", Uuid::new_v4().simple());
    let before = client(&server).await;
    let manager = Manager::new(before.database(&name));
    manager.ensure_indexes().await;
    let states = manager_store(&before, &name);

    // One job ended (claim, then its terminal record and outbox row), one only claimed.
    let ended = manager.create_job(&request()).await.expect("create");
    let claimed = manager
        .create_job(&testkit::manager::NewJob {
            metadata: doc! {"source": "tests", "second": true},
            ..request()
        })
        .await
        .expect("create");
    for id in [ended, claimed] {
        states
            .claim(&claim_request(id, "worker-1", LEASE))
            .await
            .expect("claim");
    }
    let outcome = completed();
    let terminal_event = event(ended, &outcome);
    states
        .record_terminal(&terminal_record(
            ended,
            Some("worker-1"),
            outcome,
            &terminal_event,
        ))
        .await
        .expect("record");

    // The crash, at once: nothing had time to reach a checkpoint.
    server.stop("KILL");
    drop(states);
    before.shutdown().await;
    server.resume();

    let after = client(&server).await;
    let manager = Manager::new(after.database(&name));
    let stored = manager
        .stored(ended)
        .await
        .expect("the ended job is still there");
    assert_eq!(stored.get_str("status"), Ok("completed"), "{stored:?}");
    assert_eq!(stored.get("dedup_active"), Some(&Bson::Boolean(false)));

    let rows = manager_store(&after, &name)
        .store()
        .outbox_rows()
        .count_documents(doc! {})
        .await
        .expect("count the outbox rows");
    assert_eq!(rows, 1, "the terminal event's outbox row is still there");
    let stored = manager
        .stored(claimed)
        .await
        .expect("the claimed job is still there");
    assert_eq!(stored.get_str("status"), Ok("processing"), "{stored:?}");
}

#[test]
fn the_state_client_asks_for_journaled_writes_unless_the_connection_string_chose() {
    let mut options = ClientOptions::default();
    mongostate::journaled_writes(&mut options);
    let concern = options.write_concern.expect("a write concern");
    assert_eq!(concern.journal, Some(true));
    assert_eq!(concern.w, None, "the server's default acknowledgement");

    let mut options = ClientOptions::default();
    options.write_concern = Some(
        mongodb::options::WriteConcern::builder()
            .w(mongodb::options::Acknowledgment::Majority)
            .build(),
    );
    mongostate::journaled_writes(&mut options);
    let concern = options.write_concern.expect("a write concern");
    assert_eq!(concern.w, Some(mongodb::options::Acknowledgment::Majority));
    assert_eq!(concern.journal, None, "the operator's choice is kept");
}
