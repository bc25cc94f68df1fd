//! Benchmark: sealing 64 MiB of plaintext into the base64 text of contract §2 with
//! `SealStream` (in 64 KiB pieces, output handed on and cleared after each) versus the one-shot
//! `CipherKey::seal_with_nonce` and today's `seal_raw` + `STANDARD.encode`, in one process run.
//!
//! Run: `cargo bench -p crypto --bench seal_stream`. A plain harness (no criterion): warm-up,
//! then interleaved timed iterations of each side; prints the median, throughput and ratios.

use std::hint::black_box;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use crypto::{CipherKey, SealStream, NONCE_LEN};

const PLAINTEXT_LEN: usize = 64 << 20;
const PIECE: usize = 64 << 10;
const WARMUP: usize = 2;
const ITERATIONS: usize = 11;
const NONCE: [u8; NONCE_LEN] = [7; NONCE_LEN];

fn key() -> CipherKey {
    CipherKey::from_bytes(std::array::from_fn(|i| i as u8 ^ 0x5c))
}

/// Result-JSON-like bytes: not all zero, not random.
fn plaintext() -> Vec<u8> {
    let row = br#"{"account_id":18000000000000007919,"amount":"7331.01","memo":"ok"},"#;
    row.iter().copied().cycle().take(PLAINTEXT_LEN).collect()
}

/// The streamed seal: pieces in, base64 text out, the output cleared after each piece as an
/// upload part would take it. Returns the total text length.
fn streamed(key: &CipherKey, plaintext: &[u8], out: &mut Vec<u8>) -> usize {
    let mut stream = SealStream::with_nonce(key, NONCE);
    let mut total = 0;
    for piece in plaintext.chunks(PIECE) {
        stream
            .update(piece, out)
            .expect("64 MiB is within the GCM limit");
        total += black_box(&*out).len();
        out.clear();
    }
    stream.finish(out);
    total += black_box(&*out).len();
    out.clear();
    total
}

fn time<T>(run: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    black_box(run());
    start.elapsed()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn main() {
    let key = key();
    let plaintext = plaintext();

    // All three produce the same text before anything is timed.
    let one_shot = key.seal_with_nonce(&plaintext, NONCE);
    let mut whole = Vec::new();
    let mut stream = SealStream::with_nonce(&key, NONCE);
    for piece in plaintext.chunks(PIECE) {
        stream.update(piece, &mut whole).unwrap();
    }
    stream.finish(&mut whole);
    assert_eq!(
        whole,
        one_shot.as_bytes(),
        "streamed seal equals the one-shot seal"
    );
    let sealed_len = one_shot.len();
    drop((one_shot, whole));

    let mut out = Vec::with_capacity(PIECE / 3 * 4 + 64);
    let mut times: [Vec<Duration>; 3] = Default::default();
    for iteration in 0..WARMUP + ITERATIONS {
        // `seal_raw` consumes its buffer: the copy (with room for nonce and tag, as the engine
        // leaves it) is made outside the timed region.
        let mut copy = Vec::with_capacity(PLAINTEXT_LEN + 28);
        copy.extend_from_slice(&plaintext);
        let runs = [
            time(|| streamed(&key, &plaintext, &mut out)),
            time(|| key.seal_with_nonce(&plaintext, NONCE)),
            time(|| STANDARD.encode(key.seal_raw(copy))),
        ];
        if iteration >= WARMUP {
            for (side, run) in times.iter_mut().zip(runs) {
                side.push(run);
            }
        }
    }
    let [streamed_median, one_shot_median, raw_median] = times.map(|mut t| median(&mut t));

    let report = |name: &str, time: Duration| {
        let ms = time.as_secs_f64() * 1e3;
        let mib_s = PLAINTEXT_LEN as f64 / (1 << 20) as f64 / time.as_secs_f64();
        println!("{name:<42} median {ms:8.2} ms  {mib_s:8.1} MiB/s of plaintext");
    };
    println!(
        "seal_stream: {} MiB plaintext -> {sealed_len} bytes of base64, streamed in {} KiB pieces",
        PLAINTEXT_LEN >> 20,
        PIECE >> 10
    );
    println!("{WARMUP} warm-up + {ITERATIONS} timed iterations, sides in turn");
    report("SealStream (64 KiB pieces)", streamed_median);
    report("CipherKey::seal_with_nonce (one shot)", one_shot_median);
    report("seal_raw + STANDARD.encode (today)", raw_median);
    println!(
        "ratio streamed/one-shot (time): {:.3}; streamed/today: {:.3}",
        streamed_median.as_secs_f64() / one_shot_median.as_secs_f64(),
        streamed_median.as_secs_f64() / raw_median.as_secs_f64()
    );
}
