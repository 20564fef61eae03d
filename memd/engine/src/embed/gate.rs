//! The lock in front of a model's session, with the prompt path first in line.
//!
//! Owns the order in which waiting callers run a session: an urgent caller (a prompt's or a
//! search's query) goes before every background one (embedding new memories, their token
//! states) that is still waiting; callers of the same kind take turns in no set order.
//! Must never hold its own bookkeeping lock while the model runs, nor starve urgent work:
//! background work waits as long as urgent work is waiting.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// A mutex over `T` whose urgent lockers overtake waiting background ones.
pub struct Gate<T> {
    value: Mutex<T>,
    turn: Mutex<Turn>,
    freed: Condvar,
}

#[derive(Default)]
struct Turn {
    busy: bool,
    urgent_waiting: usize,
    /// Every caller waiting, urgent or not (for the tests' view of the queue).
    waiting: usize,
}

/// Who is asking for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A query a prompt or a search is waiting for.
    Urgent,
    /// Work nobody is waiting for now.
    Background,
}

/// Access to the value; the next waiter goes when it is dropped.
pub struct GateGuard<'a, T> {
    value: Option<MutexGuard<'a, T>>,
    gate: &'a Gate<T>,
}

impl<T> Gate<T> {
    pub fn new(value: T) -> Self {
        Gate {
            value: Mutex::new(value),
            turn: Mutex::new(Turn::default()),
            freed: Condvar::new(),
        }
    }

    /// Waits for the value: until it is free and, for background work, until no urgent
    /// caller is waiting either.
    pub fn lock(&self, priority: Priority) -> GateGuard<'_, T> {
        let urgent = priority == Priority::Urgent;
        let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        if urgent {
            turn.urgent_waiting += 1;
        }
        turn.waiting += 1;
        while turn.busy || (!urgent && turn.urgent_waiting > 0) {
            turn = self
                .freed
                .wait(turn)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if urgent {
            turn.urgent_waiting -= 1;
        }
        turn.waiting -= 1;
        turn.busy = true;
        drop(turn);
        // Uncontended: only the holder of the turn locks it. A panic while running can't
        // leave the session half-updated in a way later runs see.
        let value = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        GateGuard {
            value: Some(value),
            gate: self,
        }
    }
}

impl<T> std::ops::Deref for GateGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value.as_deref().expect("held until drop")
    }
}

impl<T> std::ops::DerefMut for GateGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_deref_mut().expect("held until drop")
    }
}

impl<T> Drop for GateGuard<'_, T> {
    fn drop(&mut self) {
        self.value.take();
        let mut turn = self
            .gate
            .turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        turn.busy = false;
        drop(turn);
        self.gate.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn waiting<T>(gate: &Gate<T>) -> usize {
        gate.turn.lock().unwrap().waiting
    }

    /// Starts a thread that locks `gate` with `priority` and records `name`; returns once it
    /// waits in the queue.
    fn queue(
        gate: &Arc<Gate<Vec<&'static str>>>,
        name: &'static str,
        priority: Priority,
    ) -> std::thread::JoinHandle<()> {
        let before = waiting(gate);
        let g = gate.clone();
        let t = std::thread::spawn(move || g.lock(priority).push(name));
        while waiting(gate) == before {
            std::thread::yield_now();
        }
        t
    }

    #[test]
    fn urgent_callers_overtake_waiting_background_work() {
        let gate = Arc::new(Gate::new(Vec::new()));
        let held = gate.lock(Priority::Background);
        // The background caller queues first, the urgent one after it.
        let background = queue(&gate, "background", Priority::Background);
        let urgent = queue(&gate, "urgent", Priority::Urgent);
        drop(held);
        background.join().unwrap();
        urgent.join().unwrap();
        assert_eq!(*gate.lock(Priority::Urgent), vec!["urgent", "background"]);
    }

    #[test]
    fn one_holder_at_a_time() {
        let gate = Arc::new(Gate::new(0u32));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let g = gate.clone();
                std::thread::spawn(move || {
                    let priority = match i % 2 {
                        0 => Priority::Urgent,
                        _ => Priority::Background,
                    };
                    for _ in 0..200 {
                        let mut v = g.lock(priority);
                        let before = *v;
                        std::thread::yield_now();
                        *v = before + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*gate.lock(Priority::Urgent), 1600);
    }
}
