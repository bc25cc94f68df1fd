//! Builds and runs `main.go` beside this file, Go's own `encoding/json` (Debian's golang-go,
//! installed by `scripts/services.sh go`). A test that needs it fails loudly when Go is missing
//! or the program does not build: nothing is skipped.
//!
//! Shared by the contract's and the engine's Go-reference tests (the engine includes this file
//! by path), so both compare against one program.

#![allow(dead_code)] // Each including test uses its own part.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Go's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `json.Marshal(v)` and `json.MarshalIndent(v, "", "  ")`.
    Json { compact: Vec<u8>, indented: Vec<u8> },
    /// Go refused the value (NaN, an infinity, JSON text it cannot decode).
    Refused(String),
}

/// The built reference program, once per test process.
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(build)
}

fn build() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../contract/tests/go_reference/main.go")
        .canonicalize()
        .expect("crates/contract/tests/go_reference/main.go exists");
    // Under target/<profile>/ (writable in CI as root, where $HOME may not be), found from the
    // test binary (target/<profile>/deps/<test>) so unit and integration tests alike can use it;
    // one binary per process so test binaries building at the same time do not overwrite each
    // other's.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps");
    let dir = profile_dir.join("go_reference");
    std::fs::create_dir_all(&dir).expect("create the Go reference build directory");
    let output = dir.join(format!("go_reference-{}", std::process::id()));
    let built = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&output)
        .arg(&source)
        .env("GOCACHE", dir.join("cache"))
        .env("GOPATH", dir.join("gopath"))
        // A single file of the standard library: no module, nothing to download.
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOTOOLCHAIN", "local")
        .output()
        .unwrap_or_else(|e| {
            panic!("Go is required for this test and could not be run ({e}); install it with `bash scripts/services.sh go`")
        });
    assert!(
        built.status.success(),
        "the Go reference program did not build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    output
}

/// Sends `requests` (one `KIND ARG` line each, see main.go) and returns Go's answers in order.
pub fn encode(requests: &[String]) -> Vec<Answer> {
    let mut child = Command::new(binary())
        .arg("encode")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Go reference program");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input: Vec<u8> = requests
        .iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_string(&mut stdout)
        .expect("read Go's answers");
    let written = writer.join().expect("the writer thread ended");
    let status = child.wait_with_output().expect("wait for Go");
    assert!(
        status.status.success(),
        "the Go reference program failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    written.expect("write requests to Go");
    let answers: Vec<Answer> = stdout.lines().map(parse_answer).collect();
    assert_eq!(answers.len(), requests.len(), "one answer per request");
    answers
}

fn parse_answer(line: &str) -> Answer {
    if let Some(message) = line.strip_prefix("error ") {
        return Answer::Refused(message.to_owned());
    }
    let (compact, indented) = line.split_once(' ').expect("an answer is two hex fields");
    Answer::Json {
        compact: unhex(compact),
        indented: unhex(indented),
    }
}

/// Lowercase hexadecimal of `bytes`, as main.go reads it.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("Go answers in hexadecimal"))
        .collect()
}

/// Go 1.19 (Debian's) writes U+0008 and U+000C as `\u0008` and `\u000c`; Go 1.22 and later write
/// `\b` and `\f`, as the Worker does. Only these two escapes are rewritten to the newer form; every
/// other byte is compared as Go wrote it.
pub fn normalise_go_119(mut text: Vec<u8>) -> Vec<u8> {
    for (old, new) in [(&b"\\u0008"[..], &b"\\b"[..]), (b"\\u000c", b"\\f")] {
        let mut out = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            // An escaped backslash followed by `u0008` is text, not an escape: skip `\\` pairs.
            if text[i] == b'\\' && text.get(i + 1) == Some(&b'\\') {
                out.extend_from_slice(b"\\\\");
                i += 2;
            } else if text[i..].starts_with(old) {
                out.extend_from_slice(new);
                i += old.len();
            } else {
                out.push(text[i]);
                i += 1;
            }
        }
        text = out;
    }
    text
}

/// A small deterministic generator (SplitMix64): the sample is random across runs through its
/// seed, and a failure names the seed that reproduces it.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from the clock, or from `GO_REFERENCE_SEED` to reproduce a failure.
    pub fn from_env() -> Rng {
        let seed = std::env::var("GO_REFERENCE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("random sample seed: GO_REFERENCE_SEED={seed}");
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
