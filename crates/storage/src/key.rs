//! The object key rule of contract §7: `prefix + [tenant/] + external-data/<jobId>.json`.

use uuid::Uuid;

use super::error::{Result, StorageError};

/// Longest tenant id accepted in an object key, in bytes.
pub const MAX_TENANT_LEN: usize = 128;

/// Where a job's result is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    /// The S3 key, prefix included.
    pub full: String,
    /// The key without the prefix: the event's `result.path`.
    pub path: String,
}

/// Builds the object key of a job's result: `prefix` + (`<tenant>/` when the job has a non-empty
/// tenant) + `external-data/<jobId>.json`, by plain concatenation, with the job id as a lowercase
/// hyphenated UUID.
///
/// Tenants are ids, not paths. A tenant that could escape or blur its folder is rejected with
/// [`StorageError::InvalidKey`] (not retriable) rather than written elsewhere: one that contains
/// `/`, `..` or a control character, is exactly `.`, or is longer than [`MAX_TENANT_LEN`] bytes.
/// The prefix is the operator's setting and is taken as given.
pub fn object_key(prefix: &str, tenant: Option<&str>, job_id: Uuid) -> Result<ObjectKey> {
    let mut path = String::new();
    if let Some(tenant) = tenant.filter(|tenant| !tenant.is_empty()) {
        check_tenant(tenant)?;
        path.push_str(tenant);
        path.push('/');
    }
    path.push_str("external-data/");
    path.push_str(&job_id.as_hyphenated().to_string());
    path.push_str(".json");
    Ok(ObjectKey {
        full: format!("{prefix}{path}"),
        path,
    })
}

fn check_tenant(tenant: &str) -> Result<()> {
    // The tenant itself is not echoed: it is untrusted header input.
    let reason = if tenant.len() > MAX_TENANT_LEN {
        format!(
            "the tenant id is {} bytes long, more than {MAX_TENANT_LEN}",
            tenant.len()
        )
    } else if tenant.contains('/') {
        "the tenant id contains '/'".to_owned()
    } else if tenant.contains("..") || tenant == "." {
        "the tenant id is or contains a relative path segment".to_owned()
    } else if tenant.chars().any(char::is_control) {
        "the tenant id contains a control character".to_owned()
    } else {
        return Ok(());
    };
    Err(StorageError::InvalidKey { reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = "019391A2-7C1E-7A3B-9F00-0123456789AB";

    fn job() -> Uuid {
        Uuid::parse_str(JOB).expect("valid uuid")
    }

    #[test]
    fn key_without_prefix_or_tenant() {
        let key = object_key("", None, job()).expect("valid key");
        assert_eq!(
            key.full,
            "external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json"
        );
        assert_eq!(key.path, key.full);
    }

    #[test]
    fn prefix_is_plain_concatenation_and_left_out_of_the_path() {
        let with_slash = object_key("fetcher/", None, job()).expect("valid key");
        assert_eq!(
            with_slash.full,
            "fetcher/external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json"
        );
        assert_eq!(
            with_slash.path,
            "external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json"
        );
        let without_slash = object_key("fetcher", None, job()).expect("valid key");
        assert_eq!(
            without_slash.full,
            "fetcherexternal-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json"
        );
    }

    #[test]
    fn tenant_gets_its_own_folder_after_the_prefix() {
        let key = object_key("prod/", Some("tenant-42"), job()).expect("valid key");
        assert_eq!(
            key.full,
            "prod/tenant-42/external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json"
        );
        assert_eq!(
            key.path,
            "tenant-42/external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json"
        );
    }

    #[test]
    fn empty_tenant_is_no_tenant() {
        assert_eq!(
            object_key("p/", Some(""), job()).expect("valid key"),
            object_key("p/", None, job()).expect("valid key")
        );
    }

    #[test]
    fn tenants_that_would_leave_their_folder_are_rejected() {
        for tenant in [
            "a/b",
            "/",
            "..",
            "../other",
            "x..y",
            ".",
            "bad\ntenant",
            "nul\0",
        ] {
            let error = object_key("", Some(tenant), job()).expect_err(tenant);
            assert!(
                matches!(error, StorageError::InvalidKey { .. }),
                "{tenant:?}"
            );
            assert!(!error.is_retriable());
        }
    }

    #[test]
    fn tenant_length_is_limited_to_128_bytes() {
        let longest = "t".repeat(MAX_TENANT_LEN);
        assert!(object_key("", Some(&longest), job()).is_ok());
        let too_long = "t".repeat(MAX_TENANT_LEN + 1);
        let error = object_key("", Some(&too_long), job()).expect_err("too long");
        assert_eq!(
            error.to_string(),
            "Invalid object key: the tenant id is 129 bytes long, more than 128"
        );
    }

    #[test]
    fn ordinary_tenant_ids_are_accepted() {
        for tenant in ["acme", "tenant_01", "org.example", "a.b-c", "Ünïcode"] {
            assert!(object_key("", Some(tenant), job()).is_ok(), "{tenant}");
        }
    }
}
