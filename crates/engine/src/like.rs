//! A contract `like` pattern as a regular expression, for datasources without `LIKE` (MongoDB's
//! `$regex`, issue 15), and as a T-SQL pattern (SQL Server's `LIKE` has character classes).
//!
//! The pattern means what SQL `LIKE` means with its default escape: `%` is any run of
//! characters, `_` any one character, `\` makes the next character literal (a trailing `\` is
//! itself literal); everything else matches itself. The regex is anchored at both ends (as
//! `LIKE` matches the whole value), every regex metacharacter of the pattern is escaped, and a
//! NUL becomes `\x00` (a BSON regex is a C string). A run of `%` is one `.*`: `%%%%` cannot
//! multiply backtracking. The caller sets the `s` option, so `_` and `%` match line breaks as
//! they do in SQL.

/// The anchored regular expression of `pattern`.
pub fn like_to_regex(pattern: &str) -> String {
    let mut regex = String::with_capacity(pattern.len() + 8);
    regex.push('^');
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' => {
                while chars.peek() == Some(&'%') {
                    chars.next();
                }
                regex.push_str(".*");
            }
            '_' => regex.push('.'),
            '\\' => match chars.next() {
                Some(escaped) => literal(&mut regex, escaped),
                None => literal(&mut regex, '\\'),
            },
            other => literal(&mut regex, other),
        }
    }
    regex.push('$');
    regex
}

/// The pattern as T-SQL `LIKE … ESCAPE '\'` reads it with the same meaning: SQL Server's
/// `LIKE` also has `[…]` character classes, so every `[` is escaped (`\[`), and a trailing `\`
/// (which would make T-SQL's pattern invalid) becomes `\\`. `%`, `_` and `\x` are kept.
pub fn like_to_tsql(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '[' => out.push_str("\\["),
            '\\' => match chars.next() {
                Some(escaped) => {
                    out.push('\\');
                    out.push(escaped);
                }
                None => out.push_str("\\\\"),
            },
            other => out.push(other),
        }
    }
    out
}

/// Appends `c` so that it matches only itself.
fn literal(regex: &mut String, c: char) {
    match c {
        '\0' => regex.push_str("\\x00"),
        '\\' | '^' | '$' | '.' | '|' | '?' | '*' | '+' | '(' | ')' | '[' | ']' | '{' | '}'
        | '#' | '-' | '/' => {
            regex.push('\\');
            regex.push(c);
        }
        other => regex.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_become_their_regex_and_the_whole_value_is_matched() {
        assert_eq!(like_to_regex("abc"), "^abc$");
        assert_eq!(like_to_regex("50%_off"), "^50.*.off$");
        assert_eq!(like_to_regex("%"), "^.*$");
        assert_eq!(like_to_regex(""), "^$");
        assert_eq!(like_to_regex("a%%%%b"), "^a.*b$", "a run of % is one .*");
    }

    #[test]
    fn every_metacharacter_matches_only_itself() {
        assert_eq!(
            like_to_regex(r"a.b*c+d?e|f(g)[h]{i}^j$k#l-m/n"),
            r"^a\.b\*c\+d\?e\|f\(g\)\[h\]\{i\}\^j\$k\#l\-m\/n$"
        );
        // Operators of MongoDB's query language are only text in a regex.
        assert_eq!(like_to_regex("$where"), r"^\$where$");
        assert_eq!(like_to_regex("(a+)+$"), r"^\(a\+\)\+\$$");
    }

    #[test]
    fn a_backslash_makes_the_next_character_literal() {
        assert_eq!(like_to_regex(r"100\%"), r"^100%$");
        assert_eq!(like_to_regex(r"a\_b"), "^a_b$");
        assert_eq!(like_to_regex(r"a\\b"), r"^a\\b$");
        assert_eq!(like_to_regex(r"a\.b"), r"^a\.b$");
        assert_eq!(like_to_regex(r"trailing\"), r"^trailing\\$");
    }

    #[test]
    fn tsql_patterns_escape_brackets_and_a_trailing_backslash() {
        assert_eq!(like_to_tsql("50%_off"), "50%_off");
        assert_eq!(like_to_tsql("[a-h]%"), r"\[a-h]%");
        assert_eq!(like_to_tsql("[^x]]"), r"\[^x]]");
        assert_eq!(like_to_tsql(r"100\%"), r"100\%");
        assert_eq!(like_to_tsql(r"a\["), r"a\[");
        assert_eq!(like_to_tsql(r"trailing\"), r"trailing\\");
        assert_eq!(like_to_tsql("' OR 1=1 --"), "' OR 1=1 --");
    }

    #[test]
    fn a_nul_is_escaped_and_other_text_is_kept() {
        assert_eq!(like_to_regex("a\0b"), r"^a\x00b$");
        assert_eq!(like_to_regex("São Paulo 🙂"), "^São Paulo 🙂$");
    }

    /// What the regex matches, as a regex engine with the `s` option reads it (the `regex`
    /// crate's escapes of punctuation and `\x00` are PCRE's).
    fn matches(pattern: &str, value: &str) -> bool {
        regex::RegexBuilder::new(&like_to_regex(pattern))
            .dot_matches_new_line(true)
            .build()
            .expect("a valid regex")
            .is_match(value)
    }

    #[test]
    fn the_regex_matches_what_like_matches() {
        assert!(matches("50%_off", "50% off"));
        assert!(matches("a%", "a\nmultiline"));
        assert!(matches("a_c", "a\nc"));
        assert!(!matches("abc", "xabcx"), "anchored");
        assert!(!matches("a.c", "abc"), "a dot is a dot");
        assert!(matches("a.c", "a.c"));
        assert!(matches(r"100\%", "100%"));
        assert!(!matches(r"100\%", "1000"));
        assert!(matches("(a+)+$", "(a+)+$"));
        assert!(!matches("(a+)+$", "aaaa"));
        assert!(matches("a\0b", "a\0b"));
    }

    proptest::proptest! {
        /// Without wildcards or escapes, a pattern matches exactly itself.
        #[test]
        fn a_pattern_without_wildcards_matches_only_itself(text in "[^%_\\\\]{0,40}", other in ".{0,40}") {
            proptest::prop_assert!(matches(&text, &text));
            proptest::prop_assert_eq!(matches(&text, &other), text == other);
        }
    }
}
