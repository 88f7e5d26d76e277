//! The challenge and the two plugins' scrambles, compared in constant time.

use rand::RngCore;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::NONCE_LEN;

/// A 20-byte challenge as MySQL makes them: 7-bit, never NUL (clients
/// treat it as a C string) nor `$`.
pub(super) fn fresh_nonce() -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    for b in &mut nonce {
        *b &= 0x7f;
        if *b == 0 || *b == b'$' {
            *b += 1;
        }
    }
    nonce
}

/// MySQL treats a missing response and a lone NUL alike: no password.
pub(super) fn is_empty_response(response: &[u8]) -> bool {
    response.is_empty() || response == [0]
}

/// mysql_native_password: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))).
fn native_scramble(nonce: &[u8], password: &[u8]) -> [u8; 20] {
    let stage1: [u8; 20] = Sha1::digest(password).into();
    let stage2: [u8; 20] = Sha1::digest(stage1).into();
    let mut hasher = Sha1::new();
    hasher.update(nonce);
    hasher.update(stage2);
    let mask: [u8; 20] = hasher.finalize().into();
    xor(stage1, &mask)
}

/// caching_sha2_password: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce).
fn sha2_scramble(nonce: &[u8], password: &[u8]) -> [u8; 32] {
    let stage1: [u8; 32] = Sha256::digest(password).into();
    let mut hasher = Sha256::new();
    hasher.update(Sha256::digest(stage1));
    hasher.update(nonce);
    let mask: [u8; 32] = hasher.finalize().into();
    xor(stage1, &mask)
}

fn xor<const N: usize>(mut a: [u8; N], b: &[u8; N]) -> [u8; N] {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
    a
}

/// An empty password expects an empty response; otherwise the scramble.
pub(super) fn native_matches(nonce: &[u8], password: &str, response: &[u8]) -> bool {
    if password.is_empty() {
        return is_empty_response(response);
    }
    let expected = native_scramble(nonce, password.as_bytes());
    bool::from(expected.as_slice().ct_eq(response))
}

pub(super) fn sha2_matches(nonce: &[u8], password: &str, response: &[u8]) -> bool {
    let expected = sha2_scramble(nonce, password.as_bytes());
    bool::from(expected.as_slice().ct_eq(response))
}

pub(super) fn double_sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(Sha256::digest(bytes)).into()
}

/// Compares passwords without leaking their lengths or contents.
pub(super) fn digest_eq(a: &[u8], b: &[u8]) -> bool {
    let (a, b): ([u8; 32], [u8; 32]) = (Sha256::digest(a).into(), Sha256::digest(b).into());
    bool::from(a.ct_eq(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::scramble::{scramble_native, scramble_sha256};

    #[test]
    fn scrambles_match_mysql_common() {
        let nonce = fresh_nonce();
        for pw in ["", "a", "s3cret", "pässword", &"x".repeat(100)] {
            if let Some(s) = scramble_native(&nonce, pw.as_bytes()) {
                assert_eq!(native_scramble(&nonce, pw.as_bytes()), s);
                assert!(native_matches(&nonce, pw, &s));
            }
            if let Some(s) = scramble_sha256(&nonce, pw.as_bytes()) {
                assert_eq!(sha2_scramble(&nonce, pw.as_bytes()), s);
                assert!(sha2_matches(&nonce, pw, &s));
            }
        }
        assert!(native_matches(&nonce, "", b""));
        assert!(native_matches(&nonce, "", b"\0"));
        assert!(!native_matches(&nonce, "a", b""));
        assert!(!native_matches(&nonce, "a", &[0; 19]));
    }
}
