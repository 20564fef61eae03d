//! The proving connector: every TCP connection a client opens to memd is checked with
//! [`crate::proof`] before ureq sends a single request (and so the token) on it.
//!
//! Owns the agent's connector chain (plain TCP, then the check), the `GET /api/hello` exchange
//! on each new connection, and handing the proven connection to ureq, which keeps it alive for
//! the requests that follow. Checking once
//! per client was not enough: `memd mcp` runs for hours, and when memd stopped and another
//! user's process took the port, the bridge's next connection handed it the token (issue 36).
//! Must never hand ureq a connection whose peer did not prove itself for the address this
//! client reached, never read more than [`HELLO_MAX_BYTES`] of an answer, and never wait past
//! the connection's deadline.

use crate::proof::{self, HELLO_PATH};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use ureq::unversioned::transport::{ConnectionDetails, Connector, NextTimeout, Transport};

/// The largest hello answer read (memd's is about 150 bytes with its headers).
pub const HELLO_MAX_BYTES: usize = 8 * 1024;

/// The token proofs are checked with, shared by a client and its agent: a refresh that
/// re-reads the token file changes it in place. `None` when memd has written no token.
pub type ProofKey = Arc<Mutex<Option<String>>>;

/// The process on the port could not prove it is this user's memd; nothing was sent to it.
#[derive(Debug)]
pub struct NotMemd(pub String);

impl fmt::Display for NotMemd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotMemd {}

/// Why a ureq error happened, when it was this check: the [`NotMemd`] inside it.
pub fn not_memd(error: &ureq::Error) -> Option<&NotMemd> {
    match error {
        ureq::Error::Io(io) => io.get_ref().and_then(|e| e.downcast_ref::<NotMemd>()),
        _ => None,
    }
}

/// The agent's connector chain: plain TCP, then this check on every connection it opens.
pub fn connector(key: ProofKey, user_agent: &str) -> impl Connector {
    use ureq::unversioned::transport::TcpConnector;
    ().chain(TcpConnector::default())
        .chain(Proving::new(key, user_agent))
}

/// Proves each connection the previous connector opened before ureq may use it.
#[derive(Clone)]
pub struct Proving {
    key: ProofKey,
    user_agent: String,
}

impl fmt::Debug for Proving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proving").finish_non_exhaustive()
    }
}

impl Proving {
    pub fn new(key: ProofKey, user_agent: &str) -> Proving {
        Proving {
            key,
            user_agent: user_agent.to_string(),
        }
    }
}

impl<In: Transport> Connector<In> for Proving {
    type Out = In;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<In>, ureq::Error> {
        let Some(mut transport) = chained else {
            return Ok(None);
        };
        let host = details
            .uri
            .authority()
            .map_or_else(|| "127.0.0.1".to_string(), |a| a.to_string());
        let token = self.key.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let hello = Hello {
            host: &host,
            user_agent: &self.user_agent,
            // The connector before this one connected to one of these; memd signs only the
            // address it listens on, so one of them must be it.
            reached: &details.addrs,
            token: token.as_deref(),
        };
        hello.prove(&mut transport, details.timeout)?;
        Ok(Some(transport))
    }
}

fn impostor(why: impl Into<String>) -> ureq::Error {
    ureq::Error::Io(std::io::Error::other(NotMemd(why.into())))
}

/// One hello exchange.
struct Hello<'a> {
    host: &'a str,
    user_agent: &'a str,
    reached: &'a [SocketAddr],
    token: Option<&'a str>,
}

impl Hello<'_> {
    /// A fresh nonce out, memd's MAC for it and for the address this connection reached back;
    /// the connection stays open for the requests that follow.
    fn prove(&self, t: &mut dyn Transport, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let nonce = proof::new_nonce()
            .map_err(|e| ureq::Error::Io(std::io::Error::other(e.to_string())))?;
        let request = format!(
            "GET {HELLO_PATH}?nonce={nonce} HTTP/1.1\r\nhost: {}\r\nuser-agent: {}\r\n\
             accept: application/json\r\n\r\n",
            self.host, self.user_agent
        );
        let out = t.buffers().output();
        if out.len() < request.len() {
            return Err(ureq::Error::Io(std::io::Error::other(
                "the output buffer is too small for the identity check",
            )));
        }
        out[..request.len()].copy_from_slice(request.as_bytes());
        t.transmit_output(request.len(), timeout)?;
        let answer = read_answer(t, timeout)?;
        let Some(token) = self.token else {
            return Err(impostor(
                "memd's token file is missing, so its answer cannot be checked",
            ));
        };
        let hello: proto::HelloResponse = serde_json::from_slice(&answer)
            .map_err(|_| impostor("no proof: its answer is not memd's"))?;
        let genuine = self
            .reached
            .iter()
            .any(|addr| proof::same(&hello.proof, &proof::daemon_proof(token, &nonce, addr)));
        if genuine {
            Ok(())
        } else {
            Err(impostor("its proof is wrong"))
        }
    }
}

/// Reads one HTTP/1.1 answer with a `content-length` body, at most [`HELLO_MAX_BYTES`], and
/// consumes it from the transport's input; the body when the status is 200 and the server
/// keeps the connection open.
fn read_answer(t: &mut dyn Transport, timeout: NextTimeout) -> Result<Vec<u8>, ureq::Error> {
    loop {
        let (done, have) = {
            let input = t.buffers().input();
            (complete(input)?, input.len())
        };
        if let Some((used, body)) = done {
            t.buffers().input_consume(used);
            return Ok(body);
        }
        if have >= HELLO_MAX_BYTES {
            return Err(impostor("no proof: its answer is too long"));
        }
        match t.await_input(timeout) {
            Ok(true) => {}
            Ok(false) => return Err(impostor("no proof: it closed the connection")),
            Err(e @ ureq::Error::Timeout(_)) => return Err(e),
            Err(_) => return Err(impostor("no proof: the connection failed")),
        }
    }
}

/// `Some((bytes used, body))` once `buf` holds a whole answer, `None` while more must be read.
fn complete(buf: &[u8]) -> Result<Option<(usize, Vec<u8>)>, ureq::Error> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if status.split(' ').nth(1) != Some("200") {
        return Err(impostor(format!(
            "no proof: it answered {}",
            status
                .chars()
                .filter(char::is_ascii_graphic)
                .take(40)
                .collect::<String>()
        )));
    }
    let mut length = None;
    for line in lines {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        match (name.trim(), value.trim()) {
            ("content-length", v) => length = v.parse::<usize>().ok(),
            ("connection", "close") => {
                return Err(impostor(
                    "no proof: it closes the connection after the proof",
                ));
            }
            _ => {}
        }
    }
    let Some(length) = length else {
        return Err(impostor("no proof: its answer has no content-length"));
    };
    let body = &buf[end + 4..];
    if body.len() > length {
        return Err(impostor("no proof: it sent more than it announced"));
    }
    Ok((body.len() == length).then(|| (end + 4 + length, body.to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_complete_only_with_its_whole_body() {
        let head =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4\r\n\r\n";
        assert!(complete(&head[..20]).unwrap().is_none());
        let mut partial = head.to_vec();
        partial.extend_from_slice(b"{}");
        assert!(complete(&partial).unwrap().is_none());
        partial.extend_from_slice(b"  ");
        assert_eq!(
            complete(&partial).unwrap().unwrap(),
            (head.len() + 4, b"{}  ".to_vec())
        );
        partial.push(b'x');
        assert!(complete(&partial).is_err(), "more than announced");
    }

    #[test]
    fn refusals_are_not_memd() {
        for answer in [
            &b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
        ] {
            let e = complete(answer).unwrap_err();
            assert!(not_memd(&e).is_some(), "{e}");
        }
    }
}
