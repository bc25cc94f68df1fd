//! The start-up probe of each dependency: one that does not answer (waited for) told apart
//! from one that answers and refuses the Worker (the start stops, saying what to fix).

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::Connection as _;
use storage::{ObjectStore, StorageError};

use crate::dependencies::ProbeError;

/// How long one probe waits for an answer.
const ANSWER: Duration = Duration::from_secs(10);

/// Connects to the state database once, outside the pool: the pool retries a refused
/// connection until its acquire timeout and then says only "pool timed out".
pub(crate) async fn postgres(options: &PgConnectOptions) -> Result<(), ProbeError> {
    let connecting = tokio::time::timeout(ANSWER, PgConnection::connect_with(options))
        .await
        .map_err(|_| {
            ProbeError::Unreachable(format!(
                "PostgreSQL did not answer within {} s",
                ANSWER.as_secs()
            ))
        })?;
    match connecting {
        Ok(connection) => {
            let _ = connection.close().await;
            Ok(())
        }
        Err(error) => Err(postgres_error(&error, options.get_database())),
    }
}

/// A connection error of the state database: its SQLSTATE says whether the server refused the
/// Worker (a database, user or password that is wrong) or did not answer.
fn postgres_error(error: &sqlx::Error, database: Option<&str>) -> ProbeError {
    let reason = contract::redact(&error.to_string());
    let code = match error {
        sqlx::Error::Database(db) => db.code().map(|code| code.into_owned()),
        _ => None,
    };
    refusal(reason, postgres_fix(code.as_deref(), database))
}

fn postgres_fix(code: Option<&str>, database: Option<&str>) -> Option<String> {
    Some(match code? {
        // invalid_catalog_name
        "3D000" => format!(
            "create the database {} or fix DATABASE_URL",
            database.unwrap_or("DATABASE_URL names")
        ),
        // invalid_password, invalid_authorization_specification (no such role, pg_hba.conf)
        "28P01" | "28000" => {
            "fix the user or password of DATABASE_URL, or let that user in (pg_hba.conf)".to_owned()
        }
        // insufficient_privilege: the role may not connect to the database
        "42501" => "grant the user of DATABASE_URL CONNECT on its database".to_owned(),
        _ => return None,
    })
}

/// A connection error of the broker: a refused login or vhost is the broker refusing the Worker.
pub(crate) fn amqp(error: &lapin::Error) -> ProbeError {
    let reason = contract::redact(&error.to_string());
    let id = match error.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => Some(amqp.get_id()),
        _ => None,
    };
    refusal(reason, amqp_fix(id))
}

fn amqp_fix(id: Option<u16>) -> Option<String> {
    Some(match id? {
        // ACCESS_REFUSED: the login was refused.
        403 => "fix the broker user or password (RABBITMQ_DEFAULT_USER, RABBITMQ_DEFAULT_PASS, or RABBITMQ_URI)".to_owned(),
        // NOT_ALLOWED: the vhost does not exist or the user may not use it.
        530 => "create the vhost RABBITMQ_VHOST names, or give the broker user access to it".to_owned(),
        _ => return None,
    })
}

/// The results bucket answers `HeadBucket`; a missing bucket, or one the credentials may not
/// read, is the store refusing the Worker.
pub(crate) async fn bucket(objects: &ObjectStore) -> Result<(), ProbeError> {
    match objects.head_bucket().await {
        Ok(_) => Ok(()),
        Err(error @ StorageError::BucketNotFound { .. }) => Err(ProbeError::Refused {
            reason: error.to_string(),
            fix: "create the bucket or fix OBJECT_STORAGE_BUCKET".to_owned(),
        }),
        // An answer that is not worth asking again (403 Forbidden, 400 wrong region...).
        Err(error @ StorageError::HeadBucket { .. }) if !error.is_retriable() => {
            Err(ProbeError::Refused {
                reason: error.to_string(),
                fix: "give the credentials (OBJECT_STORAGE_ACCESS_KEY_ID or the provider chain) access to the bucket, or fix OBJECT_STORAGE_REGION and OBJECT_STORAGE_ENDPOINT".to_owned(),
            })
        }
        Err(error) => Err(ProbeError::Unreachable(error.to_string())),
    }
}

fn refusal(reason: String, fix: Option<String>) -> ProbeError {
    match fix {
        Some(fix) => ProbeError::Refused { reason, fix },
        None => ProbeError::Unreachable(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_refuses_the_worker_is_told_apart_from_one_that_does_not_answer() {
        assert!(postgres_fix(Some("3D000"), Some("fetcher"))
            .unwrap()
            .contains("create the database fetcher"));
        assert!(postgres_fix(Some("28P01"), None).is_some());
        // too_many_connections, cannot_connect_now: the server will let the Worker in later.
        assert_eq!(postgres_fix(Some("53300"), None), None);
        assert_eq!(postgres_fix(Some("57P03"), None), None);
        assert_eq!(postgres_fix(None, None), None);
        assert!(amqp_fix(Some(403))
            .unwrap()
            .contains("RABBITMQ_DEFAULT_PASS"));
        assert!(amqp_fix(Some(530)).unwrap().contains("RABBITMQ_VHOST"));
        assert_eq!(amqp_fix(Some(320)), None);
        assert_eq!(amqp_fix(None), None);
    }
}
