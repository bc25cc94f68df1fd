//! Case-insensitive member-name matching, as Go's `encoding/json` matches struct fields.

/// Whether the member name `member` selects the field named `field` (ASCII).
///
/// Go folds case with Unicode simple folding, under which two non-ASCII letters also fold to
/// ASCII ones: the long s (U+017F) to `s` and the Kelvin sign (U+212A) to `k`. Field names here are
/// ASCII, so those two are the only non-ASCII characters that can ever match.
pub(crate) fn matches(member: &str, field: &str) -> bool {
    let mut expected = field.bytes();
    for c in member.chars() {
        let folded = match c {
            '\u{17F}' => b's',
            '\u{212A}' => b'k',
            c if c.is_ascii() => (c as u8).to_ascii_lowercase(),
            _ => return false,
        };
        match expected.next() {
            Some(b) if b.to_ascii_lowercase() == folded => {}
            _ => return false,
        }
    }
    expected.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn exact_and_case_variants_match() {
        assert!(matches("jobId", "jobId"));
        assert!(matches("JOBID", "jobId"));
        assert!(matches("jobid", "jobId"));
        assert!(matches("MappedFields", "mappedFields"));
    }

    #[test]
    fn go_unicode_folds_match_their_ascii_letters() {
        assert!(matches("mappedField\u{17f}", "mappedFields"));
        assert!(matches("\u{212a}", "k"));
    }

    #[test]
    fn other_names_do_not_match() {
        assert!(!matches("jobIds", "jobId"));
        assert!(!matches("jobI", "jobId"));
        assert!(!matches("job_id", "jobId"));
        assert!(!matches("jöbId", "jobId"));
        assert!(!matches("", "jobId"));
    }
}
