//! The CPU cost of sealing, old path against new in one run: an `#[ignore]`d measurement, not a
//! check (issue 36). Run it in release:
//! `cargo test --release -p crypto -- --ignored --nocapture cost`.
//!
//! It prints CPU seconds per GiB of plaintext for GHASH alone, the incremental AES-256-GCM and
//! the whole [`SealStream`] (GCM + base64), each on the `ghash` crate ("portable", the code
//! before issue 36) and on the eight-block PCLMULQDQ GHASH ("fast" where the CPU has it).
//! CPU time is this thread's user + system time from `/proc/thread-self/stat`, so other tests
//! running alongside do not count.

use std::hint::black_box;

use crate::gcm::Gcm;
use crate::seal::CipherKey;
use crate::seal_stream::SealStream;

/// Plaintext per measurement: enough for the 10 ms clock tick to be noise.
const TOTAL: usize = 1 << 30;
/// Piece handed to each call, as the Worker's result writer does.
const PIECE: usize = 64 << 10;
/// Clock ticks per second of `/proc` times (`USER_HZ`, 100 on every Linux ABI Rust targets).
const TICKS_PER_SECOND: f64 = 100.0;

/// This thread's user + system CPU seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("Linux /proc");
    // Fields after the command name, which is parenthesised and may hold spaces: state is
    // field 3, utime 14 and stime 15.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("stat has a name") + 2..]
        .split(' ')
        .collect();
    let ticks = |i: usize| fields[i - 3].parse::<u64>().expect("a tick count");
    (ticks(14) + ticks(15)) as f64 / TICKS_PER_SECOND
}

/// CPU seconds per GiB of `run` over [`TOTAL`] bytes of plaintext.
fn per_gib(mut run: impl FnMut(&mut [u8])) -> f64 {
    let row = br#"{"account_id":18000000000000007919,"amount":"7331.01","memo":"ok"},"#;
    let mut buffer: Vec<u8> = row.iter().copied().cycle().take(PIECE).collect();
    run(&mut buffer); // warm-up: page faults, CPU feature detection
    let start = cpu_seconds();
    for _ in 0..TOTAL / PIECE {
        run(&mut buffer);
    }
    (cpu_seconds() - start) / (TOTAL as f64 / f64::from(1u32 << 30))
}

fn report(what: &str, portable: f64, fast: f64) {
    println!(
        "{what:<28} portable {portable:.3} CPU-s/GiB   fast {fast:.3} CPU-s/GiB   ({:.2}x)",
        portable / fast
    );
}

#[test]
#[ignore = "a measurement for BENCHMARKS.md; run in release with --ignored --nocapture"]
fn cpu_seconds_per_gib_of_ghash_gcm_and_seal_stream() {
    let key = [0x5c; 32];
    let nonce = [7; 12];

    let ghash_cost = |portable: bool| {
        let h = [0x66; 16];
        let mut ghash = if portable {
            crate::gcm::Ghash::portable(&h)
        } else {
            crate::gcm::Ghash::new(&h)
        };
        let cost = per_gib(|piece| ghash.update(piece));
        black_box(ghash.finalize());
        cost
    };
    report("GHASH", ghash_cost(true), ghash_cost(false));

    let gcm_cost = |portable: bool| {
        let mut gcm = if portable {
            Gcm::portable(&key, &nonce)
        } else {
            Gcm::new(&key, &nonce)
        };
        let cost = per_gib(|piece| gcm.encrypt(piece).expect("1 GiB is within the limit"));
        black_box(gcm.finish());
        cost
    };
    report("AES-256-GCM (CTR + GHASH)", gcm_cost(true), gcm_cost(false));

    let cipher = CipherKey::from_bytes(key);
    let seal_cost = |portable: bool| {
        let mut stream = if portable {
            SealStream::portable(&cipher, nonce)
        } else {
            SealStream::with_nonce(&cipher, nonce)
        };
        let mut text = Vec::with_capacity(PIECE / 3 * 4 + 8);
        let cost = per_gib(|piece| {
            stream.update(piece, &mut text).expect("within the limit");
            black_box(&text);
            text.clear();
        });
        stream.finish(&mut text);
        black_box(text);
        cost
    };
    report(
        "SealStream (GCM + base64)",
        seal_cost(true),
        seal_cost(false),
    );
}

/// Seals 64 MiB through [`SealStream`] in 64 KiB pieces: the workload whose instructions
/// callgrind counts (BENCHMARKS.md), one test per GHASH so each run counts one path.
fn seal_64_mib(mut stream: SealStream) -> usize {
    let row = br#"{"account_id":18000000000000007919,"amount":"7331.01","memo":"ok"},"#;
    let piece: Vec<u8> = row.iter().copied().cycle().take(PIECE).collect();
    let mut text = Vec::with_capacity(PIECE / 3 * 4 + 8);
    let mut total = 0;
    for _ in 0..(64 << 20) / PIECE {
        stream.update(&piece, &mut text).expect("within the limit");
        total += black_box(&text).len();
        text.clear();
    }
    stream.finish(&mut text);
    total + text.len()
}

#[test]
#[ignore = "a workload for callgrind; see BENCHMARKS.md"]
fn callgrind_seal_64_mib_portable() {
    let stream = SealStream::portable(&CipherKey::from_bytes([0x5c; 32]), [7; 12]);
    assert_eq!(seal_64_mib(stream) as u64, SealStream::sealed_len(64 << 20));
}

#[test]
#[ignore = "a workload for callgrind; see BENCHMARKS.md"]
fn callgrind_seal_64_mib_fast() {
    #[cfg(target_arch = "x86_64")]
    assert!(
        matches!(
            crate::gcm::Ghash::new(&[0; 16]),
            crate::gcm::Ghash::Clmul(_)
        ),
        "the CPU (or valgrind's) offers PCLMULQDQ, so the fast path is what is counted"
    );
    let stream = SealStream::with_nonce(&CipherKey::from_bytes([0x5c; 32]), [7; 12]);
    assert_eq!(seal_64_mib(stream) as u64, SealStream::sealed_len(64 << 20));
}

/// The per-stage limits of issue 36's table, measured on this machine in the same run as the
/// Worker's profile: CPU seconds per GiB of plaintext for HMAC-SHA256 (the result's signature),
/// the AES-256-GCM the Worker seals with, base64 of the sealed bytes (SIMD, into a buffer with
/// room), and one copy of every byte.
#[test]
#[ignore = "a measurement for BENCHMARKS.md; run in release with --ignored --nocapture"]
fn cpu_seconds_per_gib_of_each_stage_alone() {
    let mut hmac = crate::sign::HmacKey::from_bytes([0x3a; 32]).start();
    let hmac_cost = per_gib(|piece| hmac.update(piece));
    black_box(hmac.finish_hex());

    let mut gcm = Gcm::new(&[0x5c; 32], &[7; 12]);
    let gcm_cost = per_gib(|piece| gcm.encrypt(piece).expect("1 GiB is within the limit"));
    black_box(gcm.finish());

    let mut text = vec![0u8; PIECE / 3 * 4 + 8];
    let base64_cost = per_gib(|piece| {
        let out = base64_simd::STANDARD.encode(piece, base64_simd::Out::from_slice(&mut text));
        black_box(out);
    });

    let mut copy = vec![0u8; PIECE];
    let copy_cost = per_gib(|piece| {
        copy.copy_from_slice(piece);
        black_box(&copy);
    });

    println!("HMAC-SHA256                  {hmac_cost:.3} CPU-s/GiB");
    println!("AES-256-GCM                  {gcm_cost:.3} CPU-s/GiB");
    println!("base64 (SIMD)                {base64_cost:.3} CPU-s/GiB of input");
    println!("one copy (64 KiB pieces)     {copy_cost:.3} CPU-s/GiB");
}
