//! A contract `like` pattern as a regular expression, for datasources without `LIKE` (MongoDB's
//! `$regex`, issue 15), and as a T-SQL pattern (SQL Server's `LIKE` has character classes).
//!
//! The pattern means what SQL `LIKE` means with its default escape: `%` is any run of
//! characters, `_` any one character, `\` makes the next character literal (a trailing `\` is
//! itself literal); everything else matches itself. Every regex metacharacter of the pattern is
//! escaped, and a NUL becomes `\x00` (a BSON regex is a C string). The caller sets the `s`
//! option, so `_` and `%` match line breaks as they do in SQL.
//!
//! The regex matches the whole value: `^` at the start and `(?!.)` at the end (with `s`, "no
//! character follows"; a `$` would also match before a final line break, in PCRE and Python).
//!
//! It cannot backtrack more than linearly. The `%` runs split the pattern into segments of
//! fixed length, `s0 % s1 % … % sk`, and the regex is `^s0(?>.*?s1)…(?>.*?s(k-1)).*sk(?!.)`:
//! each middle segment is found at its leftmost place after the previous one, inside an atomic
//! group the engine never re-enters. That is exactly `LIKE` (taking a fixed-length segment at its
//! leftmost place leaves the most room to the rest, so if any placement matches, that one does),
//! and it costs O(value × pattern) steps, where `^.*a.*a.*a…b$` costs O(value^runs) in a
//! backtracking engine such as MongoDB's PCRE or a Python stand-in.

/// The anchored regular expression of `pattern`.
pub fn like_to_regex(pattern: &str) -> String {
    let segments = segments(pattern);
    let mut regex = String::with_capacity(pattern.len() + 8 * segments.len() + 8);
    regex.push('^');
    let (last, rest) = segments.split_last().expect("at least one segment");
    if let Some((first, middle)) = rest.split_first() {
        regex.push_str(first);
        for segment in middle {
            regex.push_str("(?>.*?");
            regex.push_str(segment);
            regex.push(')');
        }
        regex.push_str(".*");
    }
    regex.push_str(last);
    regex.push_str("(?!.)");
    regex
}

/// Runs of unescaped `%` (`a%%b%` has two): what a pattern's matching cost grows with.
pub fn percent_runs(pattern: &str) -> usize {
    segments(pattern).len() - 1
}

/// The regex of each fixed-length segment between runs of unescaped `%` (one more segment than
/// runs; the first and last may be empty).
fn segments(pattern: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        let segment = segments.last_mut().expect("at least one segment");
        match c {
            '%' => {
                while chars.peek() == Some(&'%') {
                    chars.next();
                }
                segments.push(String::new());
            }
            '_' => segment.push('.'),
            '\\' => match chars.next() {
                Some(escaped) => literal(segment, escaped),
                None => literal(segment, '\\'),
            },
            other => literal(segment, other),
        }
    }
    segments
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
    fn percent_runs_count_unescaped_runs_of_percent() {
        assert_eq!(percent_runs("abc"), 0);
        assert_eq!(percent_runs("a%%b%"), 2);
        assert_eq!(percent_runs("%%%%"), 1);
        assert_eq!(percent_runs("a\\%b\\%"), 0, "escaped % are literals");
        assert_eq!(percent_runs("\\\\%"), 1, "an escaped backslash then a run");
    }

    #[test]
    fn wildcards_become_their_regex_and_the_whole_value_is_matched() {
        assert_eq!(like_to_regex("abc"), "^abc(?!.)");
        assert_eq!(like_to_regex("50%_off"), "^50.*.off(?!.)");
        assert_eq!(like_to_regex("%"), "^.*(?!.)");
        assert_eq!(like_to_regex(""), "^(?!.)");
        assert_eq!(
            like_to_regex("a%%%%b"),
            "^a.*b(?!.)",
            "a run of % is one .*"
        );
        assert_eq!(
            like_to_regex("%a%b_%c"),
            "^(?>.*?a)(?>.*?b.).*c(?!.)",
            "middle segments are found leftmost, atomically"
        );
    }

    #[test]
    fn every_metacharacter_matches_only_itself() {
        assert_eq!(
            like_to_regex(r"a.b*c+d?e|f(g)[h]{i}^j$k#l-m/n"),
            r"^a\.b\*c\+d\?e\|f\(g\)\[h\]\{i\}\^j\$k\#l\-m\/n(?!.)"
        );
        // Operators of MongoDB's query language are only text in a regex.
        assert_eq!(like_to_regex("$where"), r"^\$where(?!.)");
        assert_eq!(like_to_regex("(a+)+$"), r"^\(a\+\)\+\$(?!.)");
        assert_eq!(like_to_regex("(?>x)"), r"^\(\?>x\)(?!.)");
    }

    #[test]
    fn a_backslash_makes_the_next_character_literal() {
        assert_eq!(like_to_regex(r"100\%"), r"^100%(?!.)");
        assert_eq!(like_to_regex(r"a\_b"), "^a_b(?!.)");
        assert_eq!(like_to_regex(r"a\\b"), r"^a\\b(?!.)");
        assert_eq!(like_to_regex(r"a\.b"), r"^a\.b(?!.)");
        assert_eq!(like_to_regex(r"trailing\"), r"^trailing\\(?!.)");
        assert_eq!(like_to_regex(r"a\%%b"), r"^a%.*b(?!.)");
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
        assert_eq!(like_to_regex("a\0b"), r"^a\x00b(?!.)");
        assert_eq!(like_to_regex("São Paulo 🙂"), "^São Paulo 🙂(?!.)");
    }

    /// A backtracking engine with atomic groups and look-ahead (as PCRE and Python's `re`), the
    /// `s` option on, and a limit of backtracking steps: `None` when the limit is reached.
    fn run(regex: &str, value: &str) -> Option<bool> {
        fancy_regex::RegexBuilder::new(&format!("(?s){regex}"))
            .backtrack_limit(1_000_000)
            .build()
            .expect("a valid regex")
            .is_match(value)
            .ok()
    }

    fn matches(pattern: &str, value: &str) -> bool {
        run(&like_to_regex(pattern), value).expect("within the backtracking limit")
    }

    /// `LIKE` itself, by dynamic programming over (pattern position, value position): the
    /// reference the regex is checked against.
    fn like(pattern: &str, value: &str) -> bool {
        enum Item {
            Any,
            Run,
            Char(char),
        }
        let mut items = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            items.push(match c {
                '%' => Item::Run,
                '_' => Item::Any,
                '\\' => Item::Char(chars.next().unwrap_or('\\')),
                other => Item::Char(other),
            });
        }
        let value: Vec<char> = value.chars().collect();
        // reach[j]: the first i items can match the first j characters.
        let mut reach = vec![false; value.len() + 1];
        reach[0] = true;
        for item in &items {
            let mut next = vec![false; value.len() + 1];
            for j in 0..=value.len() {
                next[j] = match item {
                    Item::Run => reach[j] || (j > 0 && next[j - 1]),
                    Item::Any => j > 0 && reach[j - 1],
                    Item::Char(c) => j > 0 && reach[j - 1] && value[j - 1] == *c,
                };
            }
            reach = next;
        }
        reach[value.len()]
    }

    #[test]
    fn the_regex_matches_what_like_matches() {
        assert!(matches("50%_off", "50% off"));
        assert!(matches("a%", "a\nmultiline"));
        assert!(matches("a_c", "a\nc"));
        assert!(!matches("abc", "xabcx"), "anchored");
        assert!(
            !matches("abc", "abc\n"),
            "a final line break is a character"
        );
        assert!(!matches("a.c", "abc"), "a dot is a dot");
        assert!(matches("a.c", "a.c"));
        assert!(matches(r"100\%", "100%"));
        assert!(!matches(r"100\%", "1000"));
        assert!(matches("(a+)+$", "(a+)+$"));
        assert!(!matches("(a+)+$", "aaaa"));
        assert!(matches("a\0b", "a\0b"));
        assert!(
            matches("%ab%ab%", "xabab"),
            "middle segments do not overlap"
        );
        assert!(!matches("%aba%aba%", "ababa"), "nor share characters");
        assert!(
            !matches("a%a", "a"),
            "the first and last segments do not overlap"
        );
        assert!(matches("a%a", "aa"));
    }

    #[test]
    fn a_pattern_of_many_runs_costs_linear_steps_where_plain_runs_explode() {
        let pattern = "%a%a%a%a%a%a%a%a%b";
        let value = "a".repeat(3_000);
        assert_eq!(run(&like_to_regex(pattern), &value), Some(false));
        // The same pattern with plain `.*` runs: the engine gives up at its backtracking limit.
        let naive = format!("^{}(?!.)", pattern.replace('%', ".*"));
        assert!(
            run(&naive, &value).is_none(),
            "{naive} should exhaust the limit"
        );
    }

    proptest::proptest! {
        /// Without wildcards or escapes, a pattern matches exactly itself.
        #[test]
        fn a_pattern_without_wildcards_matches_only_itself(text in "[^%_\\\\]{0,40}", other in ".{0,40}") {
            proptest::prop_assert!(matches(&text, &text));
            proptest::prop_assert_eq!(matches(&text, &other), text == other);
        }

        /// Over a small alphabet, where wildcards and near misses meet often, the regex matches
        /// exactly what `LIKE` matches.
        #[test]
        fn the_regex_is_like(pattern in "[ab%_\\\\]{0,12}", value in "[ab\n%_]{0,16}") {
            proptest::prop_assert_eq!(matches(&pattern, &value), like(&pattern, &value));
        }
    }
}
