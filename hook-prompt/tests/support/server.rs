//! A fake HTTP server for hook tests: one thread per connection, one request per connection
//! (`Connection: close`), every request recorded before it is answered. It answers memd's
//! identity check (`/api/hello`) itself, as memd would for the sandbox's token, and keeps those
//! requests out of the record.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics with the body text if it is not JSON: tests only).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body of {} is not JSON ({e}): {}",
                self.path,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// How the server answers a request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Status, extra headers, JSON (or any) body.
    Body {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Never answer; hold the connection until the client gives up.
    Hang,
    /// Close the connection with a TCP reset.
    Reset,
}

impl Reply {
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::Body {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    pub fn with_header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Body {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.into(), value.into()));
                Reply::Body {
                    status,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// A running fake server; stops accepting when dropped.
pub struct FakeServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stopping: Arc<AtomicBool>,
}

impl FakeServer {
    pub fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake server");
        let addr = listener.local_addr().expect("fake server address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (log, stop) = (requests.clone(), stopping.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (log, handler) = (log.clone(), handler.clone());
                std::thread::spawn(move || serve_one(stream, &log, &*handler));
            }
        });
        FakeServer {
            addr,
            requests,
            stopping,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Requests to `path`, in arrival order.
    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve_one(stream: TcpStream, log: &Mutex<Vec<Recorded>>, handler: &Handler) {
    // Bounds a hang if a client never closes (the tests' own processes always do).
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(reached) = stream.local_addr() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let Some(mut request) = read_request(&mut reader) else {
        return;
    };
    // Clients prove each connection first and then send their request on it, as memd expects:
    // the proof is answered keep-alive, the request that follows as the handler says.
    while let Some(proof) = hello_proof(&request.path, &reached) {
        let body = serde_json::json!({ "proof": proof }).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let _ = reader
            .get_mut()
            .write_all(format!("{head}{body}").as_bytes());
        let Some(next) = read_request(&mut reader) else {
            return;
        };
        request = next;
    }
    log.lock().unwrap().push(request.clone());
    let reply = handler(&request);
    let mut stream = reader.into_inner();
    match reply {
        Reply::Body {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
        }
        Reply::Hang => {
            // Returns when the client closes (timeout or process exit).
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        }
        Reply::Reset => reset(stream),
    }
}

/// For `/api/hello?nonce=N` on a connection that reached `reached`: what memd holding the
/// sandbox token answers.
fn hello_proof(path: &str, reached: &SocketAddr) -> Option<String> {
    let query = path
        .strip_prefix(memd_client::proof::HELLO_PATH)?
        .strip_prefix('?')?;
    let nonce = query.split('&').find_map(|p| p.strip_prefix("nonce="))?;
    Some(memd_client::proof::daemon_proof(
        &test_token(),
        nonce,
        reached,
    ))
}

/// The token every sandbox of this test process writes (this server proves it holds it).
pub fn test_token() -> String {
    format!("tok-{}", std::process::id())
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
    })
}

/// Closes `stream` with RST instead of FIN (SO_LINGER with a zero timeout).
fn reset(stream: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid socket fd owned by `stream`; the option struct outlives the call.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// A port on 127.0.0.1 with nothing listening (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}
