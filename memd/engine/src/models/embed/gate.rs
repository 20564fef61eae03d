//! The lock in front of a model's session, with the prompt path first in line.
//!
//! Owns the order in which waiting callers run a session: an urgent caller (a prompt's or a
//! search's query) goes before every background one (embedding new memories, their token
//! states) that is still waiting; callers of the same kind take turns in no set order. Across
//! models too: the models share the process's cores, so a background run of any model does
//! not start while urgent work is queued or running anywhere in the process (`urgent`: a
//! model's query, or a whole prompt being served), for at most `BACKGROUND_DEFER`. A prompt
//! therefore waits behind at most the one background run already going.
//! Must never hold its own bookkeeping lock while the model runs, nor starve urgent work:
//! background work waits as long as urgent work is waiting at its own model, and defers to
//! urgent work elsewhere only for a bounded time, so memories are still encoded under a
//! sustained load.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a background run waits for urgent work elsewhere in the process to end: under a
/// sustained load (prompts always in flight) background work still runs, one run per this.
pub const BACKGROUND_DEFER: Duration = Duration::from_secs(1);

/// Urgent work queued or running anywhere in the process, and how many background callers
/// are deferring to it.
struct Urgency {
    count: Mutex<(usize, usize)>,
    calm: Condvar,
}

static URGENCY: Urgency = Urgency {
    count: Mutex::new((0, 0)),
    calm: Condvar::new(),
};

/// Urgent work in progress: background runs of every model defer to it until it is dropped.
pub struct Urgent(());

/// Marks urgent work (a prompt being served, a query waiting for a model) until the returned
/// guard is dropped.
pub fn urgent() -> Urgent {
    lock_count().0 += 1;
    Urgent(())
}

impl Drop for Urgent {
    fn drop(&mut self) {
        let mut count = lock_count();
        count.0 -= 1;
        if count.0 == 0 {
            URGENCY.calm.notify_all();
        }
    }
}

fn lock_count() -> MutexGuard<'static, (usize, usize)> {
    URGENCY.count.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits until no urgent work is in progress, or `max` has passed.
fn defer_to_urgent(max: Duration) {
    let until = Instant::now() + max;
    let mut count = lock_count();
    count.1 += 1;
    while count.0 > 0 {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        count = URGENCY
            .calm
            .wait_timeout(count, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    count.1 -= 1;
}

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
    /// An urgent holder keeps background runs elsewhere from starting until it is done.
    _urgent: Option<Urgent>,
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
    /// caller is waiting either (and urgent work elsewhere is done, up to `BACKGROUND_DEFER`).
    pub fn lock(&self, priority: Priority) -> GateGuard<'_, T> {
        self.lock_deferring(priority, BACKGROUND_DEFER)
    }

    fn lock_deferring(&self, priority: Priority, defer: Duration) -> GateGuard<'_, T> {
        let urgent = priority == Priority::Urgent;
        let urgency = match urgent {
            true => Some(self::urgent()),
            false => {
                defer_to_urgent(defer);
                None
            }
        };
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
            _urgent: urgency,
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

    /// Background callers deferring to urgent work elsewhere (the tests' view).
    fn deferring() -> usize {
        lock_count().1
    }

    #[test]
    fn background_work_defers_to_urgent_work_at_another_model() {
        let other_model = Arc::new(Gate::new(Vec::new()));
        let prompt = urgent();
        let before = deferring();
        let g = other_model.clone();
        let background = std::thread::spawn(move || {
            g.lock_deferring(Priority::Background, Duration::from_secs(600))
                .push("background")
        });
        while deferring() == before {
            std::thread::yield_now();
        }
        // The model is free, yet the background caller waits for the prompt elsewhere.
        other_model.lock(Priority::Urgent).push("urgent");
        drop(prompt);
        background.join().unwrap();
        assert_eq!(
            *other_model.lock(Priority::Urgent),
            vec!["urgent", "background"]
        );
    }

    #[test]
    fn background_work_defers_only_so_long() {
        let gate = Gate::new(0u32);
        let _prompt = urgent();
        // Urgent work never ends here: the background run still goes after its bounded wait.
        *gate.lock_deferring(Priority::Background, Duration::from_millis(1)) += 1;
        assert_eq!(*gate.lock(Priority::Urgent), 1);
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
