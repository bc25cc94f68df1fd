//! A `plugin_crm` job through the binary: the Worker holds the CRM's two keys
//! (`CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM`, `CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM`), the CRM's
//! collections `holders_*` hold encrypted fields and their `search.*` HMACs (made with
//! `crypto::crm`, whose known answers its own tests check), and the job filters on sensitive
//! fields by their plain values: the rows of every `holders_*` collection that match, decrypted,
//! are the golden file `plugin_crm.json`.

use crypto::{CrmCipher, CrmHashKey};
use mongodb::bson::{doc, Bson, Document};
use serde_json::json;
use uuid::Uuid;

use super::{golden_job, job};
use crate::harness::sources::MongoDb;
use crate::harness::World;

const HASH_KEY: &str = "e2e-crm-hash-key";
const ENCRYPT_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// A holder as the CRM stores one: its sensitive fields encrypted (fixed nonces, so the fixture
/// is the same every run), their HMACs under `search.*`.
fn holder(n: u8, document: &str, email: &str, status: &str) -> Document {
    let cipher = CrmCipher::from_hex(ENCRYPT_KEY).expect("encrypt key");
    let hash = CrmHashKey::new(HASH_KEY).expect("hash key");
    let seal = |text: &str, field: u8| {
        Bson::String(
            cipher.encrypt_with_nonce(text.as_bytes(), [n, field, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]),
        )
    };
    let account = format!("0001-{n}");
    doc! {
        "document": seal(document, 1),
        "name": seal(&format!("Holder {n} <{status}>"), 2),
        "contact": { "primary_email": seal(email, 3), "mobile_phone": "" },
        "banking_details": { "account": seal(&account, 4), "bank": "341" },
        "natural_person": { "mother_name": seal(&format!("Mother of {n}"), 5) },
        "status": status,
        "search": {
            "document": hash.hash(document),
            "name": hash.hash(&format!("Holder {n} <{status}>")),
            "contact_primary_email": hash.hash(email),
            "banking_details_account": hash.hash(&account),
        },
    }
}

#[tokio::test]
async fn a_plugin_crm_job_filters_by_hashes_and_decrypts_every_prefixed_collection() {
    let world = World::new().await;
    let crm = MongoDb::create().await;
    crm.insert(
        "holders_0001",
        vec![
            holder(1, "12345678900", "ana@example.com", "active"),
            holder(2, "22222222222", "bo@example.com", "active"),
            holder(3, "12345678900", "old@example.com", "inactive"),
        ],
    )
    .await;
    crm.insert(
        "holders_0002",
        vec![
            holder(4, "33333333333", "cy@example.com", "active"),
            holder(5, "12345678900", "dee@example.com", "active"),
        ],
    )
    .await;
    // Not `holders_`: never read, though it matches the filter.
    crm.insert(
        "holdersX",
        vec![holder(6, "12345678900", "x@example.com", "active")],
    )
    .await;
    let keys = vec![
        (crypto::CRM_HASH_KEY_VAR.to_owned(), HASH_KEY.to_owned()),
        (
            crypto::CRM_ENCRYPT_KEY_VAR.to_owned(),
            ENCRYPT_KEY.to_owned(),
        ),
    ];
    // Holders 1, 4 and 5 by document, less 5 by e-mail (both filters by their HMACs); 3 has the
    // document but is inactive, 2 neither.
    let fields = [
        "document",
        "name",
        "contact.primary_email",
        "banking_details.account",
        "natural_person.mother_name",
        "status",
    ];
    let filters = json!({"plugin_crm": {"holders": {
        "document": {"in": ["12345678900", "33333333333"]},
        "contact.primary_email": {"nin": ["dee@example.com"]},
        "status": {"eq": ["active"]},
    }}});
    let worker = golden_job(
        &world,
        &[("plugin_crm", &crm)],
        keys,
        (json!({"plugin_crm": {"holders": fields}}), filters),
        "plugin_crm.json",
    )
    .await;
    let mut events = world.listen().await;

    // A filter on a sensitive field by its HMAC cannot be `like`: the job fails, naming it.
    let refused = Uuid::now_v7();
    let like = json!({"plugin_crm": {"holders": {"contact.primary_email": {"like": ["ana%"]}}}});
    world
        .submit(
            &job(refused, json!({"plugin_crm": {"holders": ["name"]}}), like),
            None,
            &[],
        )
        .await;
    let message = world.failure_of(&mut events, refused).await;
    assert!(
        message.contains("like on contact.primary_email cannot apply"),
        "{message}"
    );
    assert!(!message.contains("ana"), "a filter value leaked: {message}");

    let output = worker.output();
    for secret in [HASH_KEY, ENCRYPT_KEY] {
        assert!(!output.contains(secret), "a CRM key appeared in the logs");
    }
    drop(worker);
    crm.drop().await;
    world.cleanup().await;
}
