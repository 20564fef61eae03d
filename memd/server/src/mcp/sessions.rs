//! MCP sessions held in memory, bounded: rmcp's `LocalSessionManager` with an idle expiry and a
//! cap on how many exist at once.
//!
//! Owns which sessions are alive and when each was last used. Must never let abandoned sessions
//! (a client that opens a session per run and never ends it) grow the daemon without bound, and
//! never drop a session for any reason other than idleness, the cap, or the client ending it: a
//! client whose session went away gets 404 and opens a new one (`memd mcp` does so itself).

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, ServerSseMessage, SessionId, SessionManager,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sessions alive at once; beyond it the least recently used is closed. Each costs about 50 KB
/// (3,000 abandoned ones grew the daemon by 160 MB), so 256 bounds them to about 13 MB, while
/// one user runs a few agents with a session each.
pub const MAX_SESSIONS: usize = 256;
/// A session unused this long is closed. Long enough for a user to think between tool calls
/// without the agent losing its session; short enough that abandoned ones do not pile up.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// rmcp's in-memory sessions, with a cap.
pub struct BoundedSessions {
    inner: LocalSessionManager,
    last_used: Mutex<HashMap<SessionId, Instant>>,
    cap: usize,
}

impl Default for BoundedSessions {
    fn default() -> Self {
        BoundedSessions::new(MAX_SESSIONS, SESSION_IDLE)
    }
}

impl BoundedSessions {
    pub fn new(cap: usize, idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        // rmcp's worker closes the session after this long without an event.
        inner.session_config.keep_alive = Some(idle);
        BoundedSessions {
            inner,
            last_used: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        }
    }

    fn used(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Instant>> {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self, id: &SessionId) {
        if let Some(t) = self.used().get_mut(id) {
            *t = Instant::now();
        }
    }

    /// The least recently used session, removed from the books, while at the cap.
    fn take_least_recent_at_cap(&self) -> Option<SessionId> {
        let mut used = self.used();
        if used.len() < self.cap {
            return None;
        }
        let oldest = used
            .iter()
            .min_by_key(|(_, t)| **t)
            .map(|(id, _)| id.clone())?;
        used.remove(&oldest);
        Some(oldest)
    }

    /// How many sessions are alive.
    pub fn len(&self) -> usize {
        self.used().len()
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        while let Some(old) = self.take_least_recent_at_cap() {
            tracing::debug!("closing MCP session {old}: {} sessions open", self.cap);
            // Already gone (expired meanwhile) is fine: the point is that it is gone.
            let _ = self.inner.close_session(&old).await;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.used().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.used().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.resume(id, last_event_id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn open(s: &BoundedSessions) -> SessionId {
        s.create_session().await.expect("session").0
    }

    #[tokio::test]
    async fn the_least_recently_used_session_goes_at_the_cap() {
        let s = BoundedSessions::new(3, SESSION_IDLE);
        let a = open(&s).await;
        let b = open(&s).await;
        let c = open(&s).await;
        s.touch(&a);
        let d = open(&s).await;
        assert_eq!(s.len(), 3);
        assert!(
            !s.has_session(&b).await.unwrap(),
            "b was the least recently used"
        );
        for id in [&a, &c, &d] {
            assert!(s.has_session(id).await.unwrap());
        }
        for _ in 0..50 {
            open(&s).await;
        }
        assert_eq!(s.len(), 3);
        assert_eq!(s.inner.sessions.read().await.len(), 3);
    }

    #[tokio::test]
    async fn closing_forgets_and_idle_expiry_is_set() {
        let s = BoundedSessions::default();
        // rmcp's session worker ends itself after keep_alive without an event, and the
        // service then calls close_session, which takes the session off the books.
        assert_eq!(s.inner.session_config.keep_alive, Some(SESSION_IDLE));
        let id = open(&s).await;
        assert_eq!(s.len(), 1);
        s.close_session(&id).await.unwrap();
        assert_eq!(s.len(), 0);
        assert!(!s.has_session(&id).await.unwrap());
    }
}
