//! The page cursor of `GET /v1/fetcher`: the last job of a page, `(created_at, job id)`, as
//! opaque base64url text. A cursor that does not decode to exactly that is refused.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What a cursor's text starts with: a later format gets another tag.
const TAG: &str = "j1";
/// The longest cursor text taken (a valid one is about 70 characters).
const MAX_LEN: usize = 128;

/// The cursor after the job created at `created_at` (microseconds, as the database keeps it).
pub(super) fn encode(created_at: DateTime<Utc>, job_id: Uuid) -> String {
    let text = format!(
        "{TAG}.{}.{}",
        created_at.timestamp_micros(),
        job_id.simple()
    );
    URL_SAFE_NO_PAD.encode(text)
}

/// The `(created_at, job id)` a cursor names; `None` when it is not one [`encode`] makes.
pub(super) fn decode(cursor: &str) -> Option<(DateTime<Utc>, Uuid)> {
    if cursor.len() > MAX_LEN {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let mut parts = text.split('.');
    let (tag, micros, id) = (parts.next()?, parts.next()?, parts.next()?);
    if tag != TAG || parts.next().is_some() {
        return None;
    }
    let micros: i64 = micros.parse().ok()?;
    let created_at = DateTime::from_timestamp_micros(micros)?;
    // Only the simple form, so one position has one cursor.
    if id.len() != 32 {
        return None;
    }
    let job_id = Uuid::try_parse(id).ok()?;
    (encode(created_at, job_id) == cursor).then_some((created_at, job_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_the_position_it_encodes() {
        let at = DateTime::from_timestamp_micros(1_764_870_000_123_456).unwrap();
        let id = Uuid::now_v7();
        let cursor = encode(at, id);
        assert!(cursor
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(decode(&cursor), Some((at, id)));
        // Before 1970 too.
        let early = DateTime::from_timestamp_micros(-5).unwrap();
        assert_eq!(decode(&encode(early, id)), Some((early, id)));
    }

    #[test]
    fn anything_else_is_not_a_cursor() {
        let id = Uuid::now_v7();
        let b64 = |text: String| URL_SAFE_NO_PAD.encode(text);
        let bad = [
            String::new(),
            "not base64!".into(),
            b64(format!("j2.1.{}", id.simple())),
            b64(format!("j1.x.{}", id.simple())),
            b64(format!("j1.1.{}", id.hyphenated())),
            b64(format!("j1.1.{}.extra", id.simple())),
            b64(format!("j1.+1.{}", id.simple())),
            b64(format!("j1.{}.{}", i64::MAX, id.simple())),
            b64("j1.1".into()),
            // Padded, or in the other alphabet: not the text this encodes.
            format!("{}=", encode(DateTime::UNIX_EPOCH, id)),
            "A".repeat(MAX_LEN + 1),
        ];
        for cursor in bad {
            assert_eq!(decode(&cursor), None, "{cursor}");
        }
    }
}
