//! Output layout: Go's `json.Marshal` (compact) or `json.MarshalIndent(v, "", "  ")`.

/// Which of Go's two layouts to produce.
///
/// Both are byte-for-byte Go: compact has no whitespace at all; indented puts every member and
/// element on its own line, indented by two spaces per level, writes `": "` after keys, keeps
/// empty containers as `{}` / `[]`, and ends without a trailing newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// `json.Marshal`: used for event bodies and metadata.
    Compact,
    /// `json.MarshalIndent(v, "", "  ")`: used for the result JSON.
    Indented,
}

/// Levels of indentation served from one static slice; deeper levels are written in pieces.
const STATIC_LEVELS: usize = 32;

/// `,` then `\n` then enough spaces for [`STATIC_LEVELS`] levels: every separator the writer
/// needs is a sub-slice of this, so a separator costs one `write_all`.
static SEPARATOR: [u8; 2 + 2 * STATIC_LEVELS] = {
    let mut bytes = [b' '; 2 + 2 * STATIC_LEVELS];
    bytes[0] = b',';
    bytes[1] = b'\n';
    bytes
};

impl Style {
    /// What ends a key: its closing quote and what goes between the key and its value.
    #[inline]
    pub(crate) fn key_close(self) -> &'static [u8] {
        match self {
            Style::Compact => b"\":",
            Style::Indented => b"\": ",
        }
    }

    /// Writes what precedes a member or element at nesting `depth` (1 = inside the top-level
    /// container): a comma unless it is the first, then in indented style a newline and indent.
    #[inline]
    pub(crate) fn write_item_prefix<W: std::io::Write>(
        self,
        out: &mut W,
        first: bool,
        depth: usize,
    ) -> std::io::Result<()> {
        let from = usize::from(first);
        match self {
            Style::Compact if first => Ok(()),
            Style::Compact => out.write_all(b","),
            Style::Indented => write_newline_indent(out, from, depth),
        }
    }

    /// Writes what precedes the closing bracket of a non-empty container whose contents sat at
    /// `depth + 1`: in indented style a newline and the container's own indent.
    #[inline]
    pub(crate) fn write_close_prefix<W: std::io::Write>(
        self,
        out: &mut W,
        depth: usize,
    ) -> std::io::Result<()> {
        match self {
            Style::Compact => Ok(()),
            Style::Indented => write_newline_indent(out, 1, depth),
        }
    }
}

/// Writes `SEPARATOR[from..]` cut to `depth` levels; `from` is 0 to include the comma, 1 not to.
#[inline]
fn write_newline_indent<W: std::io::Write>(
    out: &mut W,
    from: usize,
    depth: usize,
) -> std::io::Result<()> {
    if depth <= STATIC_LEVELS {
        return out.write_all(&SEPARATOR[from..2 + 2 * depth]);
    }
    out.write_all(&SEPARATOR[from..])?;
    let mut remaining = depth - STATIC_LEVELS;
    while remaining > 0 {
        let levels = remaining.min(STATIC_LEVELS);
        out.write_all(&SEPARATOR[2..2 + 2 * levels])?;
        remaining -= levels;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(style: Style, first: bool, depth: usize) -> String {
        let mut out = Vec::new();
        style.write_item_prefix(&mut out, first, depth).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn compact_separates_with_a_bare_comma() {
        assert_eq!(prefix(Style::Compact, true, 3), "");
        assert_eq!(prefix(Style::Compact, false, 3), ",");
    }

    #[test]
    fn indented_separates_with_newline_and_two_spaces_per_level() {
        assert_eq!(prefix(Style::Indented, true, 1), "\n  ");
        assert_eq!(prefix(Style::Indented, false, 2), ",\n    ");
    }

    #[test]
    fn indentation_deeper_than_the_static_slice_is_exact() {
        for depth in [STATIC_LEVELS, STATIC_LEVELS + 1, 3 * STATIC_LEVELS + 5] {
            let expected = format!(",\n{}", "  ".repeat(depth));
            assert_eq!(prefix(Style::Indented, false, depth), expected);
        }
    }
}
