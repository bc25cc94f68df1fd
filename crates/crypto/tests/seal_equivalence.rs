//! The streamed seal (on the eight-block GHASH where the CPU has PCLMULQDQ) against the one-shot
//! `aes-gcm` seal, through the public API: byte-equal text for any split of the plaintext, at
//! lengths that cross the GHASH's eight-block groups and `SealStream`'s 48 KiB steps, and
//! opened back by `OpenStream` and `CipherKey::open_bytes`.

use crypto::{CipherKey, OpenStream, SealStream, NONCE_LEN};
use proptest::prelude::*;

fn streamed(key: &CipherKey, nonce: [u8; NONCE_LEN], plaintext: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut stream = SealStream::with_nonce(key, nonce);
    let mut text = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain([&plaintext.len()]) {
        let end = cut.clamp(start, plaintext.len());
        stream
            .update(&plaintext[start..end], &mut text)
            .expect("within the GCM limit");
        start = end;
    }
    stream.finish(&mut text);
    text
}

fn opened_in_pieces(key: &CipherKey, text: &[u8], piece: usize) -> Vec<u8> {
    let mut open = OpenStream::new(key);
    let mut plaintext = Vec::new();
    for chunk in text.chunks(piece.max(1)) {
        open.update(chunk, &mut plaintext).expect("valid base64");
    }
    open.finish(&mut plaintext).expect("the tag verifies");
    plaintext
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Every single cut of inputs from 0 to 300 bytes (0 to 18 blocks and a partial one): each
/// way a piece can end inside, at, or across an eight-block group.
#[test]
fn streamed_seal_equals_one_shot_for_every_single_cut() {
    let key = CipherKey::from_bytes([0xa7; 32]);
    let nonce = [3; NONCE_LEN];
    for len in 0..=300 {
        let plaintext = bytes(len, len as u8);
        let expected = key.seal_with_nonce(&plaintext, nonce);
        for cut in 0..=len {
            assert_eq!(
                streamed(&key, nonce, &plaintext, &[cut]),
                expected.as_bytes(),
                "length {len}, cut {cut}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random keys, nonces, lengths up to 160 KiB (more than three 48 KiB steps) and splits.
    #[test]
    fn streamed_seal_equals_one_shot_for_random_keys_lengths_and_splits(
        key in any::<[u8; 32]>(),
        nonce in any::<[u8; NONCE_LEN]>(),
        len in 0usize..160 * 1024,
        seed in any::<u8>(),
        mut cuts in proptest::collection::vec(0usize..160 * 1024, 0..10),
        open_piece in 1usize..70_000,
    ) {
        let key = CipherKey::from_bytes(key);
        let plaintext = bytes(len, seed);
        cuts.sort_unstable();
        let text = streamed(&key, nonce, &plaintext, &cuts);
        let one_shot = key.seal_with_nonce(&plaintext, nonce);
        prop_assert_eq!(&text, one_shot.as_bytes());
        prop_assert_eq!(text.len() as u64, SealStream::sealed_len(len as u64));
        prop_assert_eq!(&opened_in_pieces(&key, &text, open_piece), &plaintext);
        prop_assert_eq!(&key.open_bytes(&text).expect("opens"), &plaintext);
    }
}
