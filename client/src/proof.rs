//! Proof that the process answering on memd's port is this user's memd, before anything secret
//! or private (the token, a prompt) is sent to it.
//!
//! Owns the challenge: the client picks a fresh random nonce, memd answers
//! HMAC-SHA256(token, "memd-hello:" + nonce) at [`HELLO_PATH`], the client checks it. Only a
//! process that can read the token file in the 0700 data dir can answer, and an old answer is
//! useless for a new nonce (issue 17: a process that bound the port first received the token
//! and the prompt, and its answer was injected). Must never put the token itself on the wire
//! and never accept a proof it did not compute for its own nonce.

use sha2::{Digest, Sha256};

/// `GET /api/hello?nonce=<hex>` → `{"proof": "<hex>"}`; no authentication.
pub const HELLO_PATH: &str = "/api/hello";
/// Nonce length in hex characters (128 random bits).
pub const NONCE_HEX_CHARS: usize = 32;

/// What memd answers for `nonce`, and what the client expects.
pub fn daemon_proof(token: &str, nonce: &str) -> String {
    hex(&hmac_sha256(
        token.as_bytes(),
        format!("memd-hello:{nonce}").as_bytes(),
    ))
}

/// A fresh nonce from the operating system's random source.
pub fn new_nonce() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; NONCE_HEX_CHARS / 2];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex(&bytes))
}

/// Whether `nonce` is one a client makes (memd refuses anything else).
pub fn nonce_ok(nonce: &str) -> bool {
    nonce.len() == NONCE_HEX_CHARS && nonce.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Equality that takes as long whatever the first difference (the proof is a secret's MAC).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// HMAC (RFC 2104) over SHA-256.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2.
    #[test]
    fn hmac_matches_the_rfc_vector() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn proofs_depend_on_token_and_nonce() {
        let n = new_nonce().unwrap();
        assert!(nonce_ok(&n));
        assert_ne!(new_nonce().unwrap(), n);
        let p = daemon_proof("token-a", &n);
        assert!(same(&p, &daemon_proof("token-a", &n)));
        assert!(!same(&p, &daemon_proof("token-b", &n)));
        assert!(!same(&p, &daemon_proof("token-a", &new_nonce().unwrap())));
        assert!(!nonce_ok("xyz") && !nonce_ok(&"g".repeat(NONCE_HEX_CHARS)));
    }
}
