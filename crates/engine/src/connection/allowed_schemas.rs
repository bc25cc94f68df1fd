//! The schemas (MySQL: databases) a datasource may be read from, when its operator lists them.

use std::collections::BTreeSet;

/// A non-empty set of schema names, matched exactly (case-sensitive, as the servers store
/// them). Read from `DATASOURCE_<NAME>_SCHEMAS` (comma-separated) or the `schemas` column
/// (`text[]`); a connection without one reads whatever its user's grants allow.
///
/// System schemas stay hidden even when listed: discovery never looks at them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSchemas(BTreeSet<String>);

/// Why a list of schemas was refused. Names positions, never a name (names are not secret,
/// but one rule for every configuration text keeps errors predictable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSchemas {
    #[error("the list is empty")]
    Empty,
    #[error("entry {0} of the list is empty")]
    EmptyEntry(usize),
}

impl AllowedSchemas {
    /// Reads `public, sales`: entries separated by commas, whitespace around each trimmed.
    /// An empty entry (`a,,b`, a trailing comma) is refused rather than skipped, so a typo
    /// cannot silently narrow or widen the list.
    pub fn parse(text: &str) -> Result<AllowedSchemas, InvalidSchemas> {
        AllowedSchemas::from_names(text.split(','))
    }

    /// The same rules over a list already split (the `schemas` column).
    pub fn from_names<I, S>(names: I) -> Result<AllowedSchemas, InvalidSchemas>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut set = BTreeSet::new();
        for (index, name) in names.into_iter().enumerate() {
            let name = name.as_ref().trim();
            if name.is_empty() {
                return Err(InvalidSchemas::EmptyEntry(index + 1));
            }
            set.insert(name.to_owned());
        }
        if set.is_empty() {
            return Err(InvalidSchemas::Empty);
        }
        Ok(AllowedSchemas(set))
    }

    pub fn contains(&self, schema: &str) -> bool {
        self.0.contains(schema)
    }

    /// The names, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// The names as a vector, for binding as a query parameter or storing.
    pub fn to_vec(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_trimmed_and_deduplicated() {
        let schemas = AllowedSchemas::parse(" b ,a,b").unwrap();
        assert_eq!(schemas.iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(schemas.contains("a"));
        assert!(!schemas.contains(" a"));
        assert!(!schemas.contains("A"));
    }

    #[test]
    fn empty_entries_and_empty_lists_are_refused() {
        assert_eq!(
            AllowedSchemas::parse("a,,b"),
            Err(InvalidSchemas::EmptyEntry(2))
        );
        assert_eq!(
            AllowedSchemas::parse(""),
            Err(InvalidSchemas::EmptyEntry(1))
        );
        assert_eq!(
            AllowedSchemas::from_names(Vec::<String>::new()),
            Err(InvalidSchemas::Empty)
        );
        assert_eq!(
            AllowedSchemas::from_names(["a", " "]),
            Err(InvalidSchemas::EmptyEntry(2))
        );
    }
}
