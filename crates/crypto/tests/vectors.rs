//! Known answers from the repository's `tests/vectors/{keys,sealed}.json`: derivation, sealing, HMAC.

use crypto::{
    CipherKey, KeySet, OpenStream, SealStream, CREDENTIALS_LABEL, EXTERNAL_HMAC_LABEL,
    INTERNAL_HMAC_LABEL, STORAGE_LABEL,
};
use serde_json::Value;

const KEYS_JSON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/keys.json");
const SEALED_JSON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/vectors/sealed.json"
);

/// Reads a vector file at test time, so the repository's copy is the only source of truth.
fn json(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("vector has a string at {pointer}"))
}

fn nonce(hex_text: &str) -> [u8; 12] {
    hex::decode(hex_text)
        .expect("nonce is hex")
        .try_into()
        .expect("nonce is 12 bytes")
}

/// The cipher key of `keys` that an HKDF label names.
fn cipher_for(keys: &KeySet, label: &str) -> CipherKey {
    match label {
        CREDENTIALS_LABEL => keys.credentials().clone(),
        STORAGE_LABEL => keys.storage().clone(),
        other => panic!("{other} does not name a cipher key"),
    }
}

fn first_master_keys() -> KeySet {
    let vectors = json(KEYS_JSON);
    KeySet::from_base64(text(&vectors, "/masters/0/APP_ENC_KEY")).expect("masters[0] is valid")
}

#[test]
fn every_listed_master_derives_exactly_the_listed_keys() {
    let vectors = json(KEYS_JSON);
    let masters = vectors["masters"].as_array().expect("masters is an array");
    assert!(!masters.is_empty());
    for master in masters {
        let keys = KeySet::from_base64(text(master, "/APP_ENC_KEY")).expect("master is valid");
        let expected = master["keys"].as_object().expect("keys is an object");
        assert_eq!(expected.len(), 4, "the vector lists four keys");
        assert_eq!(
            keys.internal_hmac().reveal_hex(),
            text(master, &format!("/keys/{INTERNAL_HMAC_LABEL}"))
        );
        assert_eq!(
            keys.external_hmac().reveal_hex(),
            text(master, &format!("/keys/{EXTERNAL_HMAC_LABEL}"))
        );
        // Cipher keys are not revealable; check them by what they do: a key built from the
        // listed bytes must open what the derived key sealed, and the other way round.
        for label in [CREDENTIALS_LABEL, STORAGE_LABEL] {
            let listed: [u8; 32] = hex::decode(text(master, &format!("/keys/{label}")))
                .expect("key is hex")
                .try_into()
                .expect("key is 32 bytes");
            let listed = CipherKey::from_bytes(listed);
            let derived = cipher_for(&keys, label);
            let fixed = [7u8; 12];
            assert_eq!(
                derived.seal_with_nonce(b"probe", fixed),
                listed.seal_with_nonce(b"probe", fixed),
                "{label}"
            );
        }
    }
}

#[test]
fn every_rejected_master_is_rejected_without_echoing_it() {
    let vectors = json(KEYS_JSON);
    let rejected = vectors["rejected_masters"]
        .as_array()
        .expect("rejected_masters is an array");
    assert!(!rejected.is_empty());
    for entry in rejected {
        let value = text(entry, "/APP_ENC_KEY");
        let error = KeySet::from_base64(value).expect_err(text(entry, "/why"));
        let message = error.to_string();
        assert!(message.contains("APP_ENC_KEY"), "{message}");
        if !value.is_empty() {
            assert!(!message.contains(value), "{message}");
            assert!(!format!("{error:?}").contains(value), "{error:?}");
        }
    }
}

#[test]
fn result_sealed_with_the_fixed_nonce_matches_the_vector() {
    let vectors = json(SEALED_JSON);
    let keys = first_master_keys();
    let plaintext = text(&vectors, "/plaintext");
    let sealed = keys.storage().seal_with_nonce(
        plaintext.as_bytes(),
        nonce(text(&vectors, "/fixed_nonce_hex")),
    );
    assert_eq!(sealed, text(&vectors, "/sealed"));
}

#[test]
fn result_sealed_as_a_stream_matches_the_vector_in_any_split() {
    let vectors = json(SEALED_JSON);
    let keys = first_master_keys();
    let plaintext = text(&vectors, "/plaintext").as_bytes();
    let expected = text(&vectors, "/sealed");
    for cut in 0..=plaintext.len() {
        let mut stream =
            SealStream::with_nonce(keys.storage(), nonce(text(&vectors, "/fixed_nonce_hex")));
        let mut out = Vec::new();
        stream.update(&plaintext[..cut], &mut out).expect("short");
        stream.update(&plaintext[cut..], &mut out).expect("short");
        stream.finish(&mut out);
        assert_eq!(out, expected.as_bytes(), "cut at {cut}");

        let mut opener = OpenStream::new(keys.storage());
        let mut opened = Vec::new();
        let text_cut = cut.min(expected.len());
        opener
            .update(&expected.as_bytes()[..text_cut], &mut opened)
            .expect("base64");
        opener
            .update(&expected.as_bytes()[text_cut..], &mut opened)
            .expect("base64");
        opener.finish(&mut opened).expect("authentic");
        assert_eq!(opened, plaintext);
    }
}

#[test]
fn sealed_result_vector_opens_to_the_plaintext() {
    let vectors = json(SEALED_JSON);
    let opened = first_master_keys()
        .storage()
        .open(text(&vectors, "/sealed"))
        .expect("vector opens");
    assert_eq!(opened, text(&vectors, "/plaintext").as_bytes());
}

#[test]
fn result_hmac_and_size_match_the_vector() {
    let vectors = json(SEALED_JSON);
    let keys = first_master_keys();
    let plaintext = text(&vectors, "/plaintext").as_bytes();
    let expected_hmac = text(&vectors, "/result_hmac");
    assert_eq!(keys.external_hmac().sign_hex(plaintext), expected_hmac);
    assert!(keys.external_hmac().verify_hex(plaintext, expected_hmac));
    assert_eq!(
        Some(plaintext.len() as u64),
        vectors["size_bytes"].as_u64(),
        "size_bytes is the plaintext length"
    );
}

#[test]
fn sealed_password_matches_the_vector_and_opens_back() {
    let vectors = json(SEALED_JSON);
    let keys = first_master_keys();
    let cipher = cipher_for(&keys, text(&vectors, "/sealed_password/key_label"));
    let password = text(&vectors, "/sealed_password/password");
    let expected = text(&vectors, "/sealed_password/sealed");
    let sealed = cipher.seal_with_nonce(
        password.as_bytes(),
        nonce(text(&vectors, "/sealed_password/fixed_nonce_hex")),
    );
    assert_eq!(sealed, expected);
    assert_eq!(
        cipher.open(expected).expect("vector opens"),
        password.as_bytes()
    );
}
