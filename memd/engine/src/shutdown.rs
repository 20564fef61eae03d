//! A one-shot "stop now" signal that every task can hold and wait on.
//!
//! Owns nothing but the signal; fired once by the daemon on SIGTERM/SIGINT.

use tokio::sync::watch;

#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);
pub struct Trigger(watch::Sender<bool>);

pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Shutdown(rx))
}

impl Trigger {
    pub fn fire(&self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }
}
