//! A job's outcome as a consumer checks it: [`World::completed_result`] waits for the job's
//! event, checks it completed with a verifiable signature, and opens its stored object;
//! [`World::failure_of`] waits for a `job.failed` and gives its message.

use std::time::Duration;

use uuid::Uuid;

use super::{Listener, World};

impl World {
    /// The plaintext of `job_id`'s result, once its `job.completed` arrived: the event's
    /// signature verifies, and the object opens to bytes whose HMAC and size are the event's.
    pub async fn completed_result(&self, events: &mut Listener, job_id: Uuid) -> Vec<u8> {
        let event = events.event_for(job_id, Duration::from_secs(60)).await;
        let body = event.body();
        assert_eq!(
            event.delivery.routing_key.as_str(),
            "job.completed",
            "job {job_id} did not complete: {body}"
        );
        event.verify(&self.keys).expect("the event's signature");
        let result = &body["result"];
        let path = result["path"].as_str().expect("result path");
        let plaintext = self.open_object(path).await.expect("the stored object");
        assert_eq!(
            self.keys.external_hmac().sign_hex(&plaintext),
            result["hmac"].as_str().expect("hmac")
        );
        assert_eq!(result["sizeBytes"], plaintext.len());
        plaintext
    }

    /// The error message of `job_id`'s `job.failed`, once it arrived (signature verified).
    pub async fn failure_of(&self, events: &mut Listener, job_id: Uuid) -> String {
        let event = events.event_for(job_id, Duration::from_secs(60)).await;
        let body = event.body();
        assert_eq!(
            event.delivery.routing_key.as_str(),
            "job.failed",
            "job {job_id} did not fail: {body}"
        );
        event.verify(&self.keys).expect("the event's signature");
        assert!(body.get("result").is_none(), "a failed job has a result");
        body["metadata"]["error"]["message"]
            .as_str()
            .expect("error message")
            .to_owned()
    }
}
