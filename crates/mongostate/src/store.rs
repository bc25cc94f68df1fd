//! The handle on the Manager's MongoDB, and the encoding every job and connection filter uses.

use mongodb::bson::{spec::BinarySubtype, Binary, Bson, Document};
use mongodb::{Client, Collection, Database};
use uuid::Uuid;

/// The Manager's jobs (UPSTREAM-MANAGER §1).
pub const JOB_COLLECTION: &str = "job";
/// The connections the Manager registers (§3).
pub const CONNECTION_COLLECTION: &str = "connection";
/// lib-streaming's outbox (§4).
pub const OUTBOX_COLLECTION: &str = "streaming_outbox_events";

/// The Manager's databases on one client.
#[derive(Clone, Debug)]
pub struct Store {
    client: Client,
    /// `job` and `connection`: `lower(MONGO_NAME)`, as the Go Worker opens them
    /// (`fetcher:pkg/mongodb/tenant.go:56`).
    jobs: Database,
    /// `streaming_outbox_events`: `MONGO_NAME` as given, trimmed, as lib-commons opens it
    /// (`lc:commons/mongo/mongo.go:448-459`). The two coincide for the chart's `fetcher-db`.
    outbox: Database,
}

impl Store {
    /// The store on `client` for the database `mongo_name` (`MONGO_NAME`).
    pub fn new(client: Client, mongo_name: &str) -> Store {
        let name = mongo_name.trim();
        Store {
            jobs: client.database(&name.to_lowercase()),
            outbox: client.database(name),
            client,
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The `job` collection.
    pub fn jobs(&self) -> Collection<Document> {
        self.jobs.collection(JOB_COLLECTION)
    }

    /// The `connection` collection.
    pub fn connections(&self) -> Collection<Document> {
        self.jobs.collection(CONNECTION_COLLECTION)
    }

    /// This Worker's own outbox (`worker_outbox`), beside the jobs.
    pub fn worker_rows(&self) -> Collection<Document> {
        self.jobs
            .collection(crate::worker_outbox::WORKER_OUTBOX_COLLECTION)
    }

    /// The MQTT mirror's rows (`mirror`), beside the jobs.
    pub fn mirror_rows(&self) -> Collection<Document> {
        self.jobs.collection(crate::mirror::MIRROR_COLLECTION)
    }

    /// The capped datasources' slots (`slots`), beside the jobs.
    pub fn slot_rows(&self) -> Collection<Document> {
        self.jobs.collection(crate::slots::SLOTS_COLLECTION)
    }

    /// lib-streaming's outbox collection.
    pub fn outbox_rows(&self) -> Collection<Document> {
        self.outbox.collection(OUTBOX_COLLECTION)
    }
}

/// A job's or connection's `_id` as Go's driver writes a `uuid.UUID` (`[16]byte`): BSON binary
/// subtype 0x00 in RFC 4122 byte order, never subtype 0x04, which Go can neither decode into
/// the model nor match with its filters (UPSTREAM-MANAGER §1.1).
pub fn binary_id(id: Uuid) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: id.as_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_generic_binary_in_rfc_order() {
        let id = Uuid::parse_str("01890a5d-ac96-774b-bcce-b302099a8057").unwrap();
        let Bson::Binary(binary) = binary_id(id) else {
            panic!("not binary")
        };
        assert_eq!(binary.subtype, BinarySubtype::Generic);
        assert_eq!(binary.bytes[..4], [0x01, 0x89, 0x0a, 0x5d]);
    }
}
