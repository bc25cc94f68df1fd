//! The JSON writer against Go itself: `go_reference/main.go`, built with Debian's golang-go,
//! encodes the same values with `encoding/json` (`Marshal` and `MarshalIndent(v, "", "  ")`) and
//! the bytes must be equal. Go 1.19's `\u0008`/`\u000c` are normalised to `\b`/`\f` (what Go 1.22+
//! and the Worker write); nothing else is.
//!
//! Every `f32` bit pattern is compared in `every_float32_matches_go`, ignored here (minutes; a
//! benchmark-style run, BENCHMARKS.md):
//! `cargo test --release -p contract --test go_reference -- --ignored --nocapture every_float32`

#[path = "go_reference/harness.rs"]
mod harness;

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use contract::json::{JsonWriter, Style};
use harness::{normalise_go_119, Answer, Rng};

/// Bit patterns Go encodes per `sweep32` process.
const SWEEP_SLICE: u64 = 1 << 26;

/// Our encoding of one finite `f32` run, as `json.Marshal([]float32{...})` of the finite values.
fn our_run(start: u64, end: u64, out: &mut Vec<u8>) {
    out.clear();
    let mut w = JsonWriter::new(&mut *out, Style::Compact);
    w.begin_array().expect("open");
    for bits in start..end {
        let f = f32::from_bits(bits as u32);
        if f.is_finite() {
            w.f32(f).expect("a finite f32 is written");
        }
    }
    w.end_array().expect("close");
}

/// Compares Go's `sweep32` output for `[lo, hi)` with ours; returns the mismatching values.
fn sweep(lo: u64, hi: u64) -> Vec<String> {
    let mut child = Command::new(harness::binary())
        .arg("sweep32")
        .arg(format!("{lo:x}"))
        .arg(format!("{hi:x}"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the Go sweep");
    let stdout = std::io::BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
    let mut mismatches = Vec::new();
    let mut ours = Vec::with_capacity(1 << 20);
    let mut start = lo;
    for line in stdout.split(b'\n') {
        let go = line.expect("read Go's sweep");
        let end = (start + (1 << 16)).min(hi);
        our_run(start, end, &mut ours);
        if go != ours {
            let finite = (start..end).filter(|b| f32::from_bits(*b as u32).is_finite());
            let go_items = go[1..go.len() - 1].split(|b| *b == b',');
            let our_items = ours[1..ours.len() - 1].split(|b| *b == b',');
            for ((bits, g), o) in finite.zip(go_items).zip(our_items) {
                if g != o {
                    mismatches.push(format!(
                        "{bits:08x}: Go {} ours {}",
                        String::from_utf8_lossy(g),
                        String::from_utf8_lossy(o)
                    ));
                }
            }
        }
        start = end;
    }
    assert!(
        child.wait().expect("wait for Go").success(),
        "the Go sweep failed"
    );
    assert_eq!(start, hi, "Go answered for every run of [{lo:x}, {hi:x})");
    mismatches
}

#[test]
#[ignore = "every f32 (minutes): run with --release --ignored, record the result in BENCHMARKS.md"]
fn every_float32_matches_go() {
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mismatches: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut found = Vec::new();
                    loop {
                        let lo = next.fetch_add(SWEEP_SLICE, Ordering::Relaxed);
                        if lo >= 1 << 32 {
                            return found;
                        }
                        found.extend(sweep(lo, lo + SWEEP_SLICE));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a sweep worker panicked"))
            .collect()
    });
    println!(
        "every float32: 4294967296 bit patterns ({} finite) on {workers} workers in {:.1?}; mismatches: {}",
        (1u64 << 32) - 2 * ((1 << 24) - 1) - 2,
        started.elapsed(),
        mismatches.len()
    );
    for m in mismatches.iter().take(50) {
        println!("  {m}");
    }
    assert!(
        mismatches.is_empty(),
        "{} f32 values differ from Go",
        mismatches.len()
    );
}

// ---- the sample run in every `make test` ----

/// Our bytes for one value in both layouts, or `None` where the writer refuses it (as Go does).
fn ours(write: impl Fn(&mut JsonWriter<Vec<u8>>) -> contract::json::Result<()>) -> Answer {
    let mut both = Vec::new();
    for style in [Style::Compact, Style::Indented] {
        let mut w = JsonWriter::new(Vec::new(), style);
        match write(&mut w).and_then(|()| w.finish()) {
            Ok(bytes) => both.push(bytes),
            Err(e) => return Answer::Refused(e.to_string()),
        }
    }
    let indented = both.pop().expect("two layouts");
    let compact = both.pop().expect("two layouts");
    Answer::Json { compact, indented }
}

/// Compares each request's Go answer with ours; every mismatch is listed before failing.
fn compare(cases: Vec<(String, Answer)>) {
    let requests: Vec<String> = cases.iter().map(|(r, _)| r.clone()).collect();
    let answers = harness::encode(&requests);
    let mut mismatches = Vec::new();
    for ((request, ours), go) in cases.into_iter().zip(answers) {
        let same = match (&go, &ours) {
            (
                Answer::Json { compact, indented },
                Answer::Json {
                    compact: our_compact,
                    indented: our_indented,
                },
            ) => {
                normalise_go_119(compact.clone()) == *our_compact
                    && normalise_go_119(indented.clone()) == *our_indented
            }
            (Answer::Refused(_), Answer::Refused(_)) => true,
            _ => false,
        };
        if !same {
            mismatches.push(format!("{request}: Go {} ours {}", show(&go), show(&ours)));
        }
    }
    for m in mismatches.iter().take(30) {
        eprintln!("{m}");
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} values differ from Go, first: {}",
        mismatches.len(),
        requests.len(),
        mismatches[0]
    );
}

fn show(answer: &Answer) -> String {
    match answer {
        Answer::Json { compact, indented } => format!(
            "{:?} / {:?}",
            String::from_utf8_lossy(compact),
            String::from_utf8_lossy(indented)
        ),
        Answer::Refused(message) => format!("refused ({message})"),
    }
}

/// Random samples per kind in one run (Go answers ~100k requests a second).
const SAMPLE: usize = 50_000;

fn f32_case(bits: u32) -> (String, Answer) {
    let f = f32::from_bits(bits);
    (format!("f32 {bits:x}"), ours(|w| w.f32(f)))
}

fn f64_case(bits: u64) -> (String, Answer) {
    let f = f64::from_bits(bits);
    (format!("f64 {bits:x}"), ours(|w| w.f64(f)))
}

/// A float and its neighbours one unit in the last place either side.
fn around<T: Copy>(bits: T, step: impl Fn(T, i64) -> T) -> [T; 3] {
    [step(bits, -1), bits, step(bits, 1)]
}

#[test]
// Some edges are literals that spell exact binary values (the ties of issue 18).
#[allow(clippy::excessive_precision)]
fn float32_matches_go() {
    let mut rng = Rng::from_env();
    let mut cases = Vec::new();
    let step = |b: u32, d: i64| (i64::from(b) + d).clamp(0, i64::from(u32::MAX)) as u32;
    let mut edges: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        16_777_216.0,
        // Exact in single precision, 8 digits end .2 or .3 at equal distance (issue 18).
        -3_626_911.25,
        // encoding/json's cut-offs, compared in single precision.
        1e-6,
        1e21,
        0.1,
        1.1,
    ];
    edges.extend((-45..=38).map(|e| format!("1e{e}").parse::<f32>().expect("a power of ten")));
    for edge in edges {
        for bits in around(edge.to_bits(), step) {
            cases.push(f32_case(bits));
            cases.push(f32_case(bits ^ 0x8000_0000));
        }
    }
    for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        cases.push(f32_case(special.to_bits()));
    }
    for _ in 0..SAMPLE {
        cases.push(f32_case(rng.next_u64() as u32));
    }
    // Values with few digits, where ties between two shortest candidates live.
    for _ in 0..SAMPLE / 5 {
        let scaled = (rng.below(1 << 24) as f32) / 4.0;
        cases.push(f32_case(scaled.to_bits()));
    }
    compare(cases);
}

#[test]
// Some edges are literals that spell exact binary values (the ties of issue 18).
#[allow(clippy::excessive_precision)]
fn float64_matches_go() {
    let mut rng = Rng::from_env();
    let mut cases = Vec::new();
    let step = |b: u64, d: i64| (b as i128 + i128::from(d)).clamp(0, i128::from(u64::MAX)) as u64;
    let mut edges: Vec<f64> = vec![
        0.0,
        5e-324,
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::EPSILON,
        9_007_199_254_740_992.0,
        1_394_865_425_023_536.25,
        1e-6,
        1e21,
        0.1,
        0.3,
        123_456_789.0,
        f64::from(-3_626_911.25f32),
        f64::from(0.1f32),
    ];
    edges.extend((-323..=308).map(|e| format!("1e{e}").parse::<f64>().expect("a power of ten")));
    for edge in edges {
        for bits in around(edge.to_bits(), step) {
            cases.push(f64_case(bits));
            cases.push(f64_case(bits ^ (1 << 63)));
        }
    }
    for special in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        cases.push(f64_case(special.to_bits()));
    }
    for _ in 0..SAMPLE {
        cases.push(f64_case(rng.next_u64()));
    }
    for _ in 0..SAMPLE / 5 {
        let scaled = (rng.below(1 << 53) as f64) / 4.0;
        cases.push(f64_case(scaled.to_bits()));
    }
    compare(cases);
}

#[test]
fn integers_match_go() {
    let mut rng = Rng::from_env();
    let mut cases = Vec::new();
    let mut signed = vec![
        i64::MIN,
        i64::MIN + 1,
        -1,
        0,
        1,
        i64::MAX,
        1 << 53,
        (1 << 53) + 1,
    ];
    signed.extend((0..1000).map(|_| rng.next_u64() as i64 >> rng.below(64)));
    for i in signed {
        cases.push((format!("i64 {i}"), ours(|w| w.i64(i))));
    }
    let mut unsigned = vec![0, u64::MAX, u64::MAX - 1, 1 << 63];
    unsigned.extend((0..1000).map(|_| rng.next_u64() >> rng.below(64)));
    for u in unsigned {
        cases.push((format!("u64 {u}"), ours(|w| w.u64(u))));
    }
    compare(cases);
}

/// Byte strings for every escaping rule: each byte alone and between letters, the characters
/// Go escapes (controls, `"` `\` `<` `>` `&`, U+2028, U+2029) and those it leaves raw (DEL, `/`,
/// non-ASCII), and every way UTF-8 can be broken (stray continuation bytes, truncated, overlong,
/// surrogates, beyond U+10FFFF, bytes that never occur).
fn tricky_strings(rng: &mut Rng) -> Vec<Vec<u8>> {
    let pieces: &[&[u8]] = &[
        b"a",
        b"\"",
        b"\\",
        b"<",
        b">",
        b"&",
        b"/",
        b"\x7f",
        b"\x00",
        b"\x08",
        b"\x0c",
        b"\n",
        b"\r",
        b"\t",
        b"\x1f",
        b"\\u0008",
        b"\xe2\x80\xa8",
        b"\xe2\x80\xa9",
        b"\xe2\x80\xaa",
        b"\xe2\x80",
        b"\xe2",
        b"\xc3\xa9",
        "日本".as_bytes(),
        "😀".as_bytes(),
        "\u{fffd}".as_bytes(),
        "\u{feff}".as_bytes(),
        b"\x80",
        b"\xbf",
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xed\xa0\x80",
        b"\xed\xbf\xbf",
        b"\xf0\x80\x80\x80",
        b"\xf4\x90\x80\x80",
        b"\xf5",
        b"\xff",
        b"\xf0\x9f\x98",
        b" ",
    ];
    let mut strings: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    strings.extend((0..=255u8).map(|b| vec![b'a', b, b'z']));
    strings.extend(pieces.iter().map(|p| p.to_vec()));
    strings.push(Vec::new());
    for _ in 0..SAMPLE / 10 {
        let len = rng.below(12);
        let text = (0..len).flat_map(|_| pieces[rng.below(pieces.len() as u64) as usize].to_vec());
        strings.push(text.collect());
    }
    for _ in 0..SAMPLE / 10 {
        let len = rng.below(8);
        strings.push((0..len).map(|_| rng.next_u64() as u8).collect());
        let text: String = (0..len)
            .filter_map(|_| char::from_u32(rng.below(0x11_0000) as u32))
            .collect();
        strings.push(text.into_bytes());
    }
    strings
}

#[test]
fn strings_and_keys_match_go() {
    let mut rng = Rng::from_env();
    let mut cases = Vec::new();
    for bytes in tricky_strings(&mut rng) {
        let request = |kind: &str| format!("{kind} {}", harness::hex(&bytes));
        cases.push((request("str"), ours(|w| w.string_bytes(&bytes))));
        cases.push((
            request("key"),
            ours(|w| {
                w.begin_object()?;
                w.key_bytes(&bytes)?;
                w.i64(1)?;
                w.end_object()
            }),
        ));
        if let Ok(text) = std::str::from_utf8(&bytes) {
            cases.push((request("str"), ours(|w| w.string(text))));
            cases.push((
                request("key"),
                ours(|w| {
                    w.begin_object()?;
                    w.key(text)?;
                    w.i64(1)?;
                    w.end_object()
                }),
            ));
        }
    }
    compare(cases);
}

/// Random JSON text as a database's JSON column may hold it: nested arrays and objects, keys to
/// sort (some repeated: the last wins, in Go as here), escapes, whitespace, and numbers in every
/// form JSON allows that a float64 holds (integers beyond 2⁵³ excepted: see
/// `big_integers_in_json_columns_stay_exact_where_go_rounds`).
fn json_text(rng: &mut Rng, depth: u32, out: &mut String) {
    let space = |rng: &mut Rng, out: &mut String| {
        if rng.below(4) == 0 {
            out.push_str([" ", "\n", "\t ", "\r\n  "][rng.below(4) as usize]);
        }
    };
    space(rng, out);
    let choice = if depth == 0 {
        rng.below(5)
    } else {
        rng.below(7)
    };
    match choice {
        0 => out.push_str(["null", "true", "false"][rng.below(3) as usize]),
        1 | 2 => out.push_str(&json_number(rng)),
        3 | 4 => out.push_str(&json_string(rng)),
        5 => {
            out.push('[');
            for i in 0..rng.below(5) {
                if i > 0 {
                    out.push(',');
                }
                json_text(rng, depth - 1, out);
            }
            space(rng, out);
            out.push(']');
        }
        _ => {
            out.push('{');
            let keys: Vec<String> = (0..rng.below(5)).map(|_| json_string(rng)).collect();
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(rng, out);
                // Now and then a key seen before in this object.
                let key = if rng.below(8) == 0 { &keys[0] } else { key };
                out.push_str(key);
                space(rng, out);
                out.push(':');
                json_text(rng, depth - 1, out);
            }
            space(rng, out);
            out.push('}');
        }
    }
    space(rng, out);
}

fn json_number(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => format!("{}", rng.next_u64() as i64 >> (11 + rng.below(53))),
        1 => [
            "0",
            "-0",
            "1.0",
            "-0.0",
            "1E+2",
            "0.1e1",
            "1e-7",
            "1e21",
            "123456789e-3",
        ][rng.below(9) as usize]
            .to_owned(),
        2 => {
            let f = f64::from_bits(rng.next_u64());
            if f.is_finite() {
                format!("{f:e}")
            } else {
                "2.5".to_owned()
            }
        }
        3 => format!("{}", (rng.below(1 << 40) as f64) / 1024.0),
        4 => format!(
            "{}",
            f64::from(f32::from_bits(rng.next_u64() as u32 & 0x7f7f_ffff))
        ),
        // Long digit strings: the parser must round them correctly, as Go's does.
        _ => {
            let digits: String = (0..1 + rng.below(30))
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect();
            let sign = if rng.below(2) == 0 { "-" } else { "" };
            let exponent = rng.below(80) as i64 - 40;
            format!("{sign}0.{digits}e{exponent}")
        }
    }
}

fn json_string(rng: &mut Rng) -> String {
    let pieces = [
        "a",
        "Z",
        "é",
        "日本",
        "😀",
        "<",
        ">",
        "&",
        "/",
        "\u{2028}",
        "\u{2029}",
        "\u{7f}",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u0000",
        "\\u001f",
        "\\u003c",
        "\\u00e9",
        "\\u2028",
        "\\ud83d\\ude00",
        "\\uFFFD",
        " ",
        "_",
        "0",
    ];
    let mut text = String::from("\"");
    for _ in 0..rng.below(6) {
        text.push_str(pieces[rng.below(pieces.len() as u64) as usize]);
    }
    text.push('"');
    text
}

#[test]
fn json_columns_match_go() {
    let mut rng = Rng::from_env();
    let mut cases = Vec::new();
    for _ in 0..SAMPLE / 5 {
        let mut text = String::new();
        json_text(&mut rng, 4, &mut text);
        // What the result writer does with a JSON column (engine `write_json_text`): decode,
        // then write the value with its object keys sorted.
        let value: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("generated JSON {text:?} parses: {e}"));
        let request = format!("json {}", harness::hex(text.as_bytes()));
        cases.push((request, ours(|w| w.value(&value))));
    }
    compare(cases);
}

#[test]
fn big_integers_in_json_columns_stay_exact_where_go_rounds() {
    // Go decodes a JSON number into a float64, so an integer beyond 2⁵³ loses its low digits;
    // the Worker keeps any integer that fits 64 bits exact (docs/datasources.md, value mapping).
    let cases = [
        ("9007199254740993", "9007199254740992"),
        ("-9223372036854775807", "-9223372036854776000"),
        ("18446744073709551615", "18446744073709552000"),
    ];
    let requests: Vec<String> = cases
        .iter()
        .map(|(text, _)| format!("json {}", harness::hex(text.as_bytes())))
        .collect();
    for ((text, go_text), answer) in cases.iter().zip(harness::encode(&requests)) {
        let value: serde_json::Value = serde_json::from_str(text).expect("an integer");
        let ours = contract::json::to_vec_compact(&value).expect("written");
        assert_eq!(String::from_utf8_lossy(&ours), *text, "kept exact");
        match answer {
            Answer::Json { compact, .. } => assert_eq!(String::from_utf8_lossy(&compact), *go_text),
            Answer::Refused(e) => panic!("Go refused {text}: {e}"),
        }
    }
    // Within 2⁵³ both agree, as json_columns_match_go checks at random.
}

#[test]
fn times_match_go() {
    let mut rng = Rng::from_env();
    // 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the years Go marshals.
    let (first, last) = (-62_135_596_800i64, 253_402_300_799i64);
    let mut instants = vec![
        (first, 0),
        (last, 999_999_999),
        (0, 0),
        (0, 1),
        (1_784_052_251, 204_000_000),
    ];
    for _ in 0..SAMPLE / 5 {
        let secs = first + rng.below((last - first) as u64 + 1) as i64;
        let nanos = match rng.below(5) {
            0 => 0,
            1 => rng.below(1000) as u32 * 1_000_000,
            2 => rng.below(1_000_000) as u32 * 1000,
            3 => rng.below(10) as u32 * 100_000_000,
            _ => rng.below(1_000_000_000) as u32,
        };
        instants.push((secs, nanos));
    }
    let cases = instants
        .into_iter()
        .map(|(secs, nanos)| {
            let at = chrono::DateTime::from_timestamp(secs, nanos).expect("in chrono's range");
            let text = contract::json::GoTime::from(at);
            (
                format!("time {secs} {nanos}"),
                ours(|w| w.string(text.as_str())),
            )
        })
        .collect();
    compare(cases);
}

#[test]
fn terminal_event_bodies_match_go() {
    use contract::event::{event_body, Outcome, StoredResult};
    use contract::Redacted;

    let mut rng = Rng::from_env();
    let mut requests = Vec::new();
    let mut bodies = Vec::new();
    for i in 0..SAMPLE / 50 {
        let job = uuid::Uuid::from_u64_pair(rng.next_u64(), rng.next_u64());
        // Metadata as a job message carries it: an object of arbitrary JSON, now and then with
        // an `error` member of its own (a failure's replaces it).
        let mut text = String::from("{");
        for k in 0..rng.below(5) {
            if k > 0 {
                text.push(',');
            }
            if rng.below(6) == 0 {
                text.push_str("\"error\"");
            } else {
                // `k<é>` and a random tail: json_string without its opening quote.
                text.push_str("\"k<é>");
                text.push_str(&json_string(&mut rng)[1..]);
            }
            text.push(':');
            json_text(&mut rng, 3, &mut text);
        }
        text.push('}');
        let metadata: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("metadata {text:?}: {e}"));
        let bytes_text = |rng: &mut Rng| {
            let strings = tricky_strings_sample(rng);
            String::from_utf8_lossy(&strings).into_owned()
        };
        let (spec, ours) = if i % 2 == 0 {
            let result = StoredResult {
                path: format!("external-data/{job}{}.json", bytes_text(&mut rng)),
                size_bytes: rng.next_u64() >> (1 + rng.below(63)),
                row_count: rng.next_u64() >> (1 + rng.below(63)),
                hmac: format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64()),
            };
            let execution_time_ms = [0, 1, rng.below(1 << 40)][rng.below(3) as usize];
            let (secs, nanos) = (
                rng.below(4_102_444_800) as i64,
                rng.below(1_000_000_000) as u32,
            );
            let completed_at = chrono::DateTime::from_timestamp(secs, nanos).expect("in range");
            let outcome = Outcome::Completed {
                result: &result,
                execution_time_ms,
                completed_at,
            };
            let spec = serde_json::json!({
                "jobId": job.to_string(), "metadata": metadata, "status": "completed",
                "result": {"path": result.path, "sizeBytes": result.size_bytes,
                           "rowCount": result.row_count, "hmac": result.hmac},
                "executionTimeMs": execution_time_ms, "completedAt": [secs, nanos],
            });
            (spec, event_body(job, &metadata, &outcome))
        } else {
            let error = Redacted::new(&bytes_text(&mut rng));
            let spec = serde_json::json!({
                "jobId": job.to_string(), "metadata": metadata, "status": "failed",
                "error": error.as_str(),
            });
            (
                spec,
                event_body(job, &metadata, &Outcome::Failed { error: &error }),
            )
        };
        requests.push(format!(
            "body {}",
            harness::hex(spec.to_string().as_bytes())
        ));
        bodies.push(ours.expect("an event body is written"));
    }
    for ((request, ours), answer) in requests.iter().zip(bodies).zip(harness::encode(&requests)) {
        match answer {
            Answer::Json { compact, .. } => assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&normalise_go_119(compact)),
                "{request}"
            ),
            Answer::Refused(e) => panic!("Go refused {request}: {e}"),
        }
    }
}

/// A short random run of the tricky pieces of [`tricky_strings`].
fn tricky_strings_sample(rng: &mut Rng) -> Vec<u8> {
    let pieces: [&[u8]; 10] = [
        b"a",
        b"<",
        b"&",
        b"\"",
        b"\\",
        b"\x08",
        b"\x01",
        "é😀".as_bytes(),
        b"\xe2\x80\xa9",
        b"/",
    ];
    (0..rng.below(6))
        .flat_map(|_| pieces[rng.below(10) as usize].to_vec())
        .collect()
}
