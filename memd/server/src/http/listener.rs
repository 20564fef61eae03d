//! The accept loop: memd's own replacement for `axum::serve`, so that no local program can use
//! up the daemon's connections or file descriptors by opening connections and sending nothing.
//!
//! Owns accepting TCP connections, the connection cap (evicting the longest-idle connection when
//! it is reached), the header and request-body read timeouts, backing off after accept errors and
//! rate-limiting their log lines, the process's open-file limit, and draining connections at
//! shutdown. Must never keep a connection that sent no complete request header for longer than
//! the idle timeout, never spin on a failing `accept`, never write more than about one log line
//! a second about connections, and never cut off a request in flight at shutdown.

use axum::Router;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use memd_engine::shutdown::Shutdown;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower_service::Service;
use tracing::{debug, info, warn};

/// Connections served at once. A per-user daemon sees a handful of hooks, an MCP stream or two
/// per agent and the dashboard; 512 is far above that yet well under the open-file limit the
/// daemon raises itself to (see [`raise_open_file_limit`]), so a flood of connections reaches
/// the cap, and evicts idle connections, long before `accept` could fail with EMFILE.
pub const MAX_CONNECTIONS: usize = 512;
/// File descriptors kept out of the cap for the store, the log, models and PostgreSQL, so a
/// low open-file limit lowers the cap instead of starving the rest of the daemon.
const FD_RESERVE: u64 = 128;
/// The cap never goes below this, however low the open-file limit.
const MIN_CONNECTIONS: usize = 16;
/// A connection that sends no complete request header (first request or next keep-alive one)
/// for this long is closed, and so is a request whose body stalls this long between two
/// chunks. Hooks send their whole request at once, so 30 s is generous for them while it
/// bounds how long a slow-loris connection holds a slot.
const DEFAULT_IDLE: Duration = Duration::from_secs(30);
/// Overrides [`DEFAULT_IDLE`] in whole seconds (tests use a short one).
pub const IDLE_ENV: &str = "MEMD_HTTP_IDLE_SECS";
/// The open-file soft limit is raised to the hard limit, but not past this: enough for the cap
/// many times over, and small enough for tables sized by the limit.
#[cfg(unix)]
const NOFILE_CEILING: libc::rlim_t = 65_536;
/// An open-file limit as the OS counts it.
#[cfg(unix)]
type FileLimit = libc::rlim_t;
#[cfg(not(unix))]
type FileLimit = u64;
/// After a failed `accept` (EMFILE, ENFILE, ENOBUFS...) the loop sleeps, doubling from the
/// first to the last value while failures continue: long enough that a persistent failure costs
/// no CPU, short enough that service resumes within a tenth of a second once it clears.
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(100);
/// At most one log line per this interval for each kind of connection trouble.
const LOG_EVERY: Duration = Duration::from_secs(1);
/// At shutdown a connection with no request in flight is dropped after this if the graceful
/// close has not finished (a half-sent header would otherwise hold it for the idle timeout).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// How many connections and how long a silent one may stay.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub cap: usize,
    pub idle: Duration,
}

impl Limits {
    /// From the current open-file limit and `MEMD_HTTP_IDLE_SECS`.
    pub fn current() -> Limits {
        Limits {
            cap: connection_cap(open_file_limit()),
            idle: idle_timeout(std::env::var(IDLE_ENV).ok().as_deref()),
        }
    }
}

fn connection_cap(nofile: Option<FileLimit>) -> usize {
    let Some(n) = nofile else {
        return MAX_CONNECTIONS;
    };
    let usable = usize::try_from(n.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
    usable.clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

fn idle_timeout(env: Option<&str>) -> Duration {
    env.and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(DEFAULT_IDLE, Duration::from_secs)
}

#[cfg(unix)]
fn open_file_limit() -> Option<FileLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct we pass.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim.rlim_cur)
}

/// Windows has no open-file limit to read or raise: sockets are handles, bounded by memory, so
/// the cap is [`MAX_CONNECTIONS`].
#[cfg(not(unix))]
fn open_file_limit() -> Option<FileLimit> {
    None
}

/// Raises the open-file soft limit to the hard limit (at most [`NOFILE_CEILING`]); the common
/// default of 1,024 is what a connection flood used to exhaust. Returns the limit now in force.
#[cfg(unix)]
pub fn raise_open_file_limit() -> Option<FileLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let want = lim.rlim_max.min(NOFILE_CEILING);
    if want > lim.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct we pass; raising the soft limit up to the
        // hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = want;
        }
    }
    Some(lim.rlim_cur)
}

/// Accepts until `shutdown` fires, then lets requests in flight finish and closes the rest.
pub async fn run(listener: TcpListener, app: Router, shutdown: Shutdown, limits: Limits) {
    info!(
        "HTTP: at most {} connections; a connection silent for {} s is closed",
        limits.cap,
        limits.idle.as_secs()
    );
    let conns = Arc::new(Conns::default());
    let mut accept_errors = Throttled::default();
    let mut refused = Throttled::default();
    let mut backoff = BACKOFF_FIRST;
    let stop = shutdown.wait();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = BACKOFF_FIRST;
                if !conns.make_room(limits.cap) {
                    refused.log(|n| {
                        warn!(
                            "all {} connections busy; refused one{}",
                            limits.cap,
                            also(n)
                        )
                    });
                    continue;
                }
                spawn_connection(stream, app.clone(), conns.clone(), limits.idle);
            }
            Err(e) => {
                accept_errors.log(|n| warn!("accept failed: {e}{}; backing off", also(n)));
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    drop(listener);
    conns.drain().await;
}

fn also(suppressed: u64) -> String {
    if suppressed == 0 {
        String::new()
    } else {
        format!(" ({suppressed} more since the last report)")
    }
}

/// Logs at most once per [`LOG_EVERY`], counting what it held back.
#[derive(Default)]
struct Throttled {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    fn log(&mut self, emit: impl FnOnce(u64)) {
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            self.suppressed += 1;
            return;
        }
        emit(self.suppressed);
        self.suppressed = 0;
        self.last = Some(now);
    }
}

/// One open connection, as the accept loop sees it.
struct Conn {
    /// Requests being read or answered (a response counts until its body is fully sent, so a
    /// long-lived event stream is never taken for idle).
    busy: AtomicUsize,
    last_active: Mutex<Instant>,
    /// Set before `close` is notified: drop at once instead of closing gracefully.
    evicted: AtomicBool,
    close: Notify,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            busy: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
            evicted: AtomicBool::new(false),
            close: Notify::new(),
        }
    }

    fn touch(&self) {
        *self.last_active.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_since(&self) -> Option<Instant> {
        (self.busy.load(Ordering::Acquire) == 0)
            .then(|| *self.last_active.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn begin(self: &Arc<Conn>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.touch();
        BusyGuard(self.clone())
    }
}

/// Marks its connection busy while alive.
struct BusyGuard(Arc<Conn>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Every open connection, and a wake-up whenever one ends.
#[derive(Default)]
struct Conns {
    open: Mutex<(u64, HashMap<u64, Arc<Conn>>)>,
    ended: Notify,
}

impl Conns {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<u64, Arc<Conn>>)> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self) -> (u64, Arc<Conn>) {
        let mut open = self.lock();
        open.0 += 1;
        let id = open.0;
        let conn = Arc::new(Conn::new());
        open.1.insert(id, conn.clone());
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.lock().1.remove(&id);
        self.ended.notify_waiters();
    }

    /// Below the cap, or made so by evicting the connection idle the longest; false when every
    /// connection is busy. Evicting (not refusing) is what keeps the daemon reachable while
    /// something holds hundreds of silent connections: the newest caller gets in, the
    /// stalest silent one goes.
    fn make_room(&self, cap: usize) -> bool {
        let mut open = self.lock();
        if open.1.len() < cap {
            return true;
        }
        let idlest = open
            .1
            .iter()
            .filter_map(|(id, c)| c.idle_since().map(|t| (t, *id)))
            .min()
            .map(|(_, id)| id);
        let Some(conn) = idlest.and_then(|id| open.1.remove(&id)) else {
            return false;
        };
        conn.evicted.store(true, Ordering::Release);
        conn.close.notify_one();
        true
    }

    /// Asks every connection to close (gracefully) and waits until all have.
    async fn drain(&self) {
        for conn in self.lock().1.values() {
            conn.close.notify_one();
        }
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.lock().1.is_empty() {
                return;
            }
            ended.await;
        }
    }
}

fn spawn_connection(stream: TcpStream, app: Router, conns: Arc<Conns>, idle: Duration) {
    let (id, conn) = conns.add();
    tokio::spawn(async move {
        serve_connection(stream, app, conn, idle).await;
        conns.remove(id);
    });
}

/// The address a connection reached memd at (its local end), on every request it carries: the
/// identity proof is bound to it (`memd_client::proof`).
#[derive(Debug, Clone, Copy)]
pub struct Reached(pub std::net::SocketAddr);

async fn serve_connection(stream: TcpStream, app: Router, conn: Arc<Conn>, idle: Duration) {
    let tracked = conn.clone();
    let reached = stream.local_addr().ok().map(Reached);
    let svc = service_fn(move |req: hyper::Request<Incoming>| {
        let busy = tracked.begin();
        let mut app = app.clone();
        let mut req = req.map(|b| axum::body::Body::new(StallLimited::new(b, idle)));
        if let Some(reached) = reached {
            req.extensions_mut().insert(reached);
        }
        async move {
            let resp = app.call(req).await?;
            Ok::<_, Infallible>(resp.map(|b| {
                axum::body::Body::new(Tracked {
                    inner: b,
                    _busy: busy,
                })
            }))
        }
    });
    // The header timeout runs from the moment hyper waits for a request head, first or next
    // keep-alive one, so it is also the idle timeout.
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(idle)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(http);
    tokio::select! {
        r = http.as_mut() => return finished(r),
        _ = conn.close.notified() => {}
    }
    if conn.evicted.load(Ordering::Acquire) {
        return;
    }
    http.as_mut().graceful_shutdown();
    loop {
        tokio::select! {
            r = http.as_mut() => return finished(r),
            _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
                if conn.idle_since().is_some() {
                    return;
                }
            }
        }
    }
}

/// A connection's end is the client's business (timeouts, resets): debug level only, so no
/// client can fill the log.
fn finished(r: hyper::Result<()>) {
    if let Err(e) = r {
        debug!("connection ended: {e}");
    }
}

/// A response body that keeps its connection marked busy until it is fully sent.
struct Tracked<B> {
    inner: B,
    _busy: BusyGuard,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that fails when the client sends nothing for the idle timeout mid-body
/// (hyper times out only the header), so a stalled upload cannot hold its handler forever.
struct StallLimited<B> {
    inner: B,
    idle: Duration,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> StallLimited<B> {
    fn new(inner: B, idle: Duration) -> Self {
        StallLimited {
            inner,
            idle,
            stall: None,
        }
    }
}

impl<B> Body for StallLimited<B>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            self.stall = None;
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        let idle = self.idle;
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err("request body stalled".into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_follows_the_open_file_limit() {
        assert_eq!(connection_cap(None), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(65_536)), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(300)), 172);
        assert_eq!(connection_cap(Some(20)), MIN_CONNECTIONS);
    }

    #[test]
    fn idle_timeout_from_env() {
        assert_eq!(idle_timeout(None), DEFAULT_IDLE);
        assert_eq!(idle_timeout(Some("2")), Duration::from_secs(2));
        assert_eq!(idle_timeout(Some("0")), DEFAULT_IDLE);
        assert_eq!(idle_timeout(Some("x")), DEFAULT_IDLE);
    }

    #[test]
    fn throttled_logs_once_per_interval_and_counts_the_rest() {
        let mut t = Throttled::default();
        let mut lines = Vec::new();
        for _ in 0..1000 {
            t.log(|n| lines.push(n));
        }
        assert_eq!(lines, vec![0]);
        t.last = Some(Instant::now() - LOG_EVERY);
        t.log(|n| lines.push(n));
        assert_eq!(lines, vec![0, 999]);
    }

    #[test]
    fn make_room_evicts_the_idlest_and_spares_busy_connections() {
        let conns = Conns::default();
        let (_, busy) = conns.add();
        let _guard = busy.begin();
        let (old_id, old) = conns.add();
        *old.last_active.lock().unwrap() -= Duration::from_secs(5);
        let (new_id, _) = conns.add();
        assert!(conns.make_room(3));
        assert!(old.evicted.load(Ordering::Acquire));
        let open = conns.lock();
        assert!(!open.1.contains_key(&old_id));
        assert!(open.1.contains_key(&new_id));
        drop(open);
        assert!(conns.make_room(3), "below the cap again");
    }

    #[test]
    fn make_room_refuses_when_all_are_busy() {
        let conns = Conns::default();
        let (_, a) = conns.add();
        let _guard = a.begin();
        assert!(!conns.make_room(1));
    }
}
