//! Proof that the process answering on memd's port is this user's memd, before anything secret
//! or private (the token, a prompt) is sent to it.
//!
//! Owns the challenge: the client picks a fresh random nonce, memd answers
//! HMAC-SHA256(token, "memd-hello:" + nonce + ":" + address) at [`HELLO_PATH`], where address is
//! the socket address the connection reached (memd's side of it), and the client checks it
//! against the address it connected to. Only a process that can read the token file in the 0700
//! data dir can answer, an old answer is useless for a new nonce (issue 17: a process that bound
//! the port first received the token and the prompt, and its answer was injected), and memd
//! never signs for an address it does not listen on, so a squatter on another port that relays
//! the challenge to the real memd fails (issue 36). The check runs on every new connection
//! (`handshake`). Must never put the token itself on the wire and never accept a proof it did
//! not compute for its own nonce and address.

use sha2::{Digest, Sha256};

/// `GET /api/hello?nonce=<hex>` → `{"proof": "<hex>"}`; no authentication.
pub const HELLO_PATH: &str = "/api/hello";
/// Nonce length in hex characters (128 random bits).
pub const NONCE_HEX_CHARS: usize = 32;

/// What memd answers for `nonce` on a connection that reached it at `reached`, and what a
/// client that connected to `reached` expects.
pub fn daemon_proof(token: &str, nonce: &str, reached: &std::net::SocketAddr) -> String {
    hex(&hmac_sha256(
        token.as_bytes(),
        format!("memd-hello:{nonce}:{reached}").as_bytes(),
    ))
}

/// The host name the dashboard is served under: `memd-<32 hex>.localhost`, the hex a MAC of
/// the token, so only this user's programs can name it. Browsers resolve `*.localhost` to
/// loopback and keep a host-only cookie for exactly this name: a page another program serves
/// on `127.0.0.1` or on a `.localhost` name of its own (any port) is never sent the session
/// cookie and cannot set one in its place (issue 36), and it cannot send the browser here
/// without knowing the name.
pub fn dashboard_host(token: &str) -> String {
    let mac = hex(&hmac_sha256(token.as_bytes(), b"memd-dashboard-host"));
    format!("memd-{}.localhost", &mac[..32])
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
        let here: std::net::SocketAddr = "127.0.0.1:47111".parse().unwrap();
        let other: std::net::SocketAddr = "127.0.0.1:47112".parse().unwrap();
        let p = daemon_proof("token-a", &n, &here);
        assert!(same(&p, &daemon_proof("token-a", &n, &here)));
        assert!(!same(&p, &daemon_proof("token-b", &n, &here)));
        assert!(!same(
            &p,
            &daemon_proof("token-a", &new_nonce().unwrap(), &here)
        ));
        assert!(
            !same(&p, &daemon_proof("token-a", &n, &other)),
            "bound to the port"
        );
        assert_ne!(dashboard_host("token-a"), dashboard_host("token-b"));
        assert!(dashboard_host("token-a").ends_with(".localhost"));
        assert!(!nonce_ok("xyz") && !nonce_ok(&"g".repeat(NONCE_HEX_CHARS)));
    }
}
