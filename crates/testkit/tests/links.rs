//! Every Markdown link of the repository's documents resolves: README.md, the other top-level
//! documents and `docs/*.md`. A relative target must exist, an `#anchor` (in the same file or
//! `file.md#anchor`) must be a heading's GitHub slug there, and an `http(s)` link must be well
//! formed (nothing is fetched). README stays a two-minute read (under 12 KB) that links every
//! document, and the "where does X live" table of `docs/architecture.md` names paths that exist.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The top-level documents checked beside `docs/*.md`.
const TOP_LEVEL: [&str; 5] = [
    "README.md",
    "SECURITY.md",
    "RELIABILITY.md",
    "BENCHMARKS.md",
    "CHANGELOG.md",
];

/// README's size limit, in bytes: what a newcomer reads in two minutes.
const README_MAX_BYTES: usize = 12_000;

/// The documents checked, relative to `root`: the top-level ones and every `docs/*.md`.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = TOP_LEVEL
        .iter()
        .map(PathBuf::from)
        .filter(|path| root.join(path).is_file())
        .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| PathBuf::from("docs").join(entry.file_name()))
                .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    found.extend(docs);
    found
}

/// The lines of `text` outside fenced code blocks (```` ``` ```` or `~~~`), with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<(char, usize)> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.len() - trimmed.trim_start_matches(c).len());
        match (fence, marker) {
            (None, Some(c)) if indent <= 3 && run >= 3 => fence = Some((c, run)),
            (Some((open, length)), Some(c))
                if c == open && run >= length && trimmed.trim_end_matches(c).trim().is_empty() =>
            {
                fence = None;
            }
            (None, _) => lines.push((index + 1, line)),
            (Some(_), _) => {}
        }
    }
    lines
}

/// `line` with the contents of its code spans (`` `...` ``) blanked, so nothing in them reads
/// as a link. A backtick run without a closing run of the same length is kept as it is.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find('`') {
        out.push_str(&rest[..at]);
        let run = rest[at..].len() - rest[at..].trim_start_matches('`').len();
        let ticks = &rest[at..at + run];
        let after = &rest[at + run..];
        let closing = after
            .match_indices(ticks)
            .find(|(i, _)| !after[i + run..].starts_with('`'));
        match closing {
            Some((end, _)) => {
                out.push_str(ticks);
                out.extend(std::iter::repeat_n(' ', after[..end].len()));
                out.push_str(ticks);
                rest = &after[end + run..];
            }
            None => {
                out.push_str(ticks);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The link targets of one line: `[text](target)` and `![alt](target)`, the target without an
/// optional title (`"..."`) or angle brackets (a target with a space and no title is kept whole).
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let bytes = line.as_bytes();
    let mut targets = Vec::new();
    let mut at = 0;
    while let Some(open) = line[at..].find('[').map(|i| i + at) {
        let Some(close) = matching(bytes, open, b'[', b']') else {
            at = open + 1;
            continue;
        };
        if bytes.get(close + 1) != Some(&b'(') {
            at = open + 1;
            continue;
        }
        let Some(end) = matching(bytes, close + 1, b'(', b')') else {
            at = close + 1;
            continue;
        };
        let inside = line[close + 2..end].trim();
        let target = match inside.strip_prefix('<') {
            Some(angled) => angled.split('>').next().unwrap_or_default(),
            None => match inside.split_once(char::is_whitespace) {
                // A title follows the target; anything else is a target with a space in it.
                Some((target, title)) if title.trim_start().starts_with(['"', '\'', '(']) => target,
                _ => inside,
            },
        };
        targets.push(target.to_owned());
        at = end + 1;
    }
    targets
}

/// The index of the bracket closing the one at `open`, nested pairs counted.
fn matching(bytes: &[u8], open: usize, left: u8, right: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut index = open;
    while let Some(byte) = bytes.get(index) {
        if *byte == b'\\' {
            // An escaped bracket counts for nothing.
            index += 2;
            continue;
        }
        if *byte == left {
            depth += 1;
        } else if *byte == right {
            depth -= 1;
            if depth == 0 {
                return Some(index);
            }
        }
        index += 1;
    }
    None
}

/// GitHub's anchor of a heading: its text as rendered (code marks, emphasis and link targets
/// gone), lower case, every character that is not a letter, digit, space, `-` or `_` dropped,
/// spaces as `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link in a heading renders as its text.
    while let Some(open) = rest.find('[') {
        let bytes = rest.as_bytes();
        match matching(bytes, open, b'[', b']') {
            Some(close) if bytes.get(close + 1) == Some(&b'(') => {
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..close]);
                let end = matching(bytes, close + 1, b'(', b')').unwrap_or(rest.len() - 1);
                rest = &rest[end + 1..];
            }
            _ => {
                text.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a Markdown text: its headings' slugs (a repeated one numbered `-1`, `-2`, as
/// GitHub does) and the `id` / `name` of its HTML anchors.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut headings = Vec::new();
    let lines = prose_lines(text);
    for (position, (number, line)) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let hashes = trimmed.len() - trimmed.trim_start_matches('#').len();
        if (1..=6).contains(&hashes)
            && (trimmed.len() == hashes || trimmed[hashes..].starts_with(' '))
        {
            let title = trimmed[hashes..].trim().trim_end_matches('#').trim();
            headings.push(title.to_owned());
            continue;
        }
        // A setext heading: a paragraph line underlined with `===` or `---`.
        let underline = line.trim();
        let setext = !underline.is_empty()
            && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'));
        if setext && position > 0 {
            let (previous_number, previous) = lines[position - 1];
            let paragraph = !previous.trim().is_empty()
                && !previous.trim_start().starts_with(['|', '#', '-', '*', '>'])
                && previous_number + 1 == *number;
            if paragraph {
                headings.push(previous.trim().to_owned());
            }
        }
        for key in ["id=\"", "name=\""] {
            for (at, _) in line.match_indices(key) {
                let value = &line[at + key.len()..];
                if let Some(end) = value.find('"') {
                    found.insert(value[..end].to_owned());
                }
            }
        }
    }
    let mut seen = BTreeSet::new();
    for heading in headings {
        let base = slug(&heading);
        let mut candidate = base.clone();
        let mut n = 0;
        while seen.contains(&candidate) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
        seen.insert(candidate.clone());
        found.insert(candidate);
    }
    found
}

/// `%XX` escapes decoded (a link to a name with a space is written `%20`).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `url` is a well-formed `http(s)` URL: a scheme, a host of letters, digits, `.`, `-`
/// (and an optional `:port`), and no whitespace.
fn well_formed_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    !host.is_empty()
        && !host.starts_with(['.', '-'])
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        && port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok())
        && !url.chars().any(char::is_whitespace)
}

/// `relative` (a repository path with `..` and `.`) as a path under the root, or `None` when it
/// leaves the repository.
fn normalised(relative: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// What is wrong with `target`, linked from `document` (relative to `root`), or `None`.
fn broken(root: &Path, document: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("an empty target".to_owned());
    }
    if target.contains(char::is_whitespace) {
        return Some("whitespace in the target (write it %20)".to_owned());
    }
    if target.starts_with("http://") || target.starts_with("https://") {
        return (!well_formed_url(target)).then(|| "a malformed URL".to_owned());
    }
    if let Some(address) = target.strip_prefix("mailto:") {
        return (!address.contains('@')).then(|| "a malformed mailto".to_owned());
    }
    let scheme = target.split([':', '/', '#']).next().unwrap_or_default();
    if target[scheme.len()..].starts_with(':') {
        return Some(format!("the scheme {scheme:?}, neither http(s) nor mailto"));
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let path = percent_decoded(path);
    let linked = if path.is_empty() {
        document.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        PathBuf::from(from_root)
    } else {
        document.parent().unwrap_or(Path::new("")).join(&path)
    };
    let Some(linked) = normalised(&linked) else {
        return Some(format!("{path} leaves the repository"));
    };
    let on_disk = root.join(&linked);
    if !on_disk.exists() {
        return Some(format!("{} does not exist", linked.display()));
    }
    let anchor = anchor?;
    if on_disk.extension().is_none_or(|ext| ext != "md") {
        return Some(format!(
            "an anchor in {}, which is no Markdown",
            linked.display()
        ));
    }
    let text = std::fs::read_to_string(&on_disk).ok()?;
    let anchor = percent_decoded(anchor).to_lowercase();
    (!anchors(&text).contains(&anchor)).then(|| {
        format!(
            "{} has no heading with the anchor #{anchor}",
            linked.display()
        )
    })
}

/// Every broken link of the documents under `root`: `path:line: target: what is wrong`.
fn broken_links(root: &Path) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut problems = Vec::new();
    for document in documents(root) {
        let text = std::fs::read_to_string(root.join(&document))
            .unwrap_or_else(|e| panic!("{}: {e}", document.display()));
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                checked += 1;
                if let Some(problem) = broken(root, &document, &target) {
                    problems.push(format!(
                        "{}:{number}: ({target}): {problem}",
                        document.display()
                    ));
                }
            }
        }
    }
    (checked, problems)
}

#[test]
fn every_link_of_readme_and_docs_resolves() {
    let (checked, problems) = broken_links(&root());
    assert!(checked > 30, "links are read: {checked}");
    assert!(problems.is_empty(), "broken links: {problems:#?}");
}

#[test]
fn readme_is_a_two_minute_read() {
    let size = std::fs::metadata(root().join("README.md"))
        .expect("README.md")
        .len();
    assert!(
        size < README_MAX_BYTES as u64,
        "README.md is {size} bytes, over {README_MAX_BYTES}: move the detail into docs/"
    );
}

#[test]
fn readme_links_every_document() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let linked: BTreeSet<String> = prose_lines(&readme)
        .into_iter()
        .flat_map(|(_, line)| link_targets(line))
        .map(|target| target.split('#').next().unwrap_or_default().to_owned())
        .collect();
    let mut expected: Vec<String> = documents(&root)
        .into_iter()
        .map(|path| path.display().to_string())
        .filter(|path| path != "README.md")
        .collect();
    expected.push("LICENSE".to_owned());
    let missing: Vec<&String> = expected.iter().filter(|d| !linked.contains(*d)).collect();
    assert!(missing.is_empty(), "README does not link {missing:?}");
}

/// The backticked paths of a table cell (a directory `a/b/` or a name with an extension; not
/// `a::b` or words with spaces) that do not exist. A path is looked for under the directory of
/// the last path the cell named from the root (`crates/worker/src/job/` (`core.rs`)), then
/// under the root. Returns the paths checked and those missing.
fn missing_cell_paths(root: &Path, cell: &str) -> (usize, Vec<String>) {
    let mut base = PathBuf::new();
    let (mut checked, mut missing) = (0, Vec::new());
    for word in cell.split('`').skip(1).step_by(2) {
        let is_path = !word.contains(' ')
            && !word.contains("::")
            && (word.contains('/') || word.rsplit_once('.').is_some_and(|(_, e)| !e.is_empty()));
        if !is_path {
            continue;
        }
        checked += 1;
        let under_base = !base.as_os_str().is_empty() && root.join(&base).join(word).exists();
        if under_base {
            continue;
        }
        if root.join(word).exists() {
            base = if word.ends_with('/') {
                PathBuf::from(word)
            } else {
                Path::new(word)
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default()
            };
            continue;
        }
        missing.push(word.to_owned());
    }
    (checked, missing)
}

#[test]
fn the_where_table_names_paths_that_exist() {
    let root = root();
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).expect("architecture");
    let start = text
        .find("| what | where |")
        .expect("docs/architecture.md has the \"where does X live\" table");
    let mut missing = Vec::new();
    let mut checked = 0;
    for row in text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cell = row
            .trim_matches('|')
            .split(" | ")
            .nth(1)
            .unwrap_or_default();
        let (paths, absent) = missing_cell_paths(&root, cell);
        checked += paths;
        missing.extend(absent);
    }
    assert!(checked > 40, "paths are read: {checked}");
    assert!(
        missing.is_empty(),
        "the where table names {missing:?}, which do not exist"
    );
}

/// A scratch repository of documents, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("links-test-{}-{}", std::process::id(), files.len()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_checker_finds_each_kind_of_broken_link_and_passes_the_good_ones() {
    let scratch = Scratch::new(&[
        (
            "README.md",
            "# Top\n\n\
             Good: [guide](docs/guide.md), [a section](docs/guide.md#the-plugin_crm-path),\n\
             [here](#top), [`code` text](LICENSE), [web](https://example.com/a?b=c#d),\n\
             [angled](<docs/guide.md>), [titled](docs/guide.md \"Guide\"), `[not](a-link.md)`.\n\
             Broken: [gone](docs/missing.md), [no anchor](docs/guide.md#nowhere),\n\
             [bad url](https://exa mple.com), [no host](http:///path), [self](#bottom),\n\
             [outside](../../etc/passwd), [ftp](ftp://example.com/file).\n\n\
             ```sh\n[in a fence](not-checked.md)\n```\n",
        ),
        (
            "docs/guide.md",
            "# Guide\n\n## The `plugin_crm` path\n\nBack [up](../README.md#top), \
             [twice](#guide-1).\n\n## Guide\n",
        ),
        ("LICENSE", "Apache-2.0\n"),
    ]);
    let (checked, problems) = broken_links(&scratch.0);
    let targets: Vec<&str> = problems
        .iter()
        .map(|p| {
            p.split(" (")
                .nth(1)
                .unwrap_or_default()
                .split("):")
                .next()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        targets,
        vec![
            "docs/missing.md",
            "docs/guide.md#nowhere",
            "https://exa mple.com",
            "http:///path",
            "#bottom",
            "../../etc/passwd",
            "ftp://example.com/file",
        ],
        "{problems:#?}"
    );
    assert_eq!(checked, 16, "{problems:#?}");
    assert!(problems[0].starts_with("README.md:6: "), "{problems:#?}");
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug("The `plugin_crm` path"), "the-plugin_crm-path");
    assert_eq!(
        slug("Job lifecycle and control API"),
        "job-lifecycle-and-control-api"
    );
    assert_eq!(slug("Reliability (`make chaos`)"), "reliability-make-chaos");
    assert_eq!(slug("1. Keys: HKDF-SHA256"), "1-keys-hkdf-sha256");
    assert_eq!(slug("See [the guide](x.md) now"), "see-the-guide-now");
    let text = "# A\n## A\n```\n# not a heading\n```\nB title\n---\n";
    assert_eq!(
        anchors(text),
        BTreeSet::from(["a".into(), "a-1".into(), "b-title".into()])
    );
}

#[test]
fn code_spans_hide_their_contents_and_urls_are_checked_for_form() {
    assert_eq!(link_targets("`[a](b)` and [c](d)"), vec!["d"]);
    assert_eq!(link_targets("``[a](`b`)`` [e](f \"t\")"), vec!["f"]);
    assert!(well_formed_url("https://github.com/owner/repo#readme"));
    assert!(well_formed_url("http://localhost:3000"));
    assert!(!well_formed_url("http://localhost:port"));
    assert!(!well_formed_url("https://"));
    assert_eq!(percent_decoded("a%20b"), "a b");
}
