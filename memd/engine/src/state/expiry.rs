//! Expiry by age as a recoverable step: an expired memory is first archived with the time it
//! expired (`metadata.expired_at`), restored if a later pass finds it is not expired after all
//! (the clock had jumped ahead and came back), and deleted only after `EXPIRED_KEEP_MS`; the
//! decisions are `learn::lifecycle::expiry_step`.
//!
//! Owns applying `Op::SetExpired` and `Op::CleanupClock` (the time the last cleanup went by,
//! kept so the clock guard holds across restarts). Must never read the clock (the ops carry
//! the time) and never touch a memory that was archived for another reason.

use super::MemState;
use super::ops::Output;
use crate::learn::lifecycle::EXPIRED_AT_KEY;
use proto::Value;

impl MemState {
    /// `at: Some(t)` archives `id` as expired at `t`; `None` restores an expired one.
    pub(super) fn apply_set_expired(&mut self, id: &str, at: Option<i64>) -> Output {
        let key = match self.editable_key(id) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        let changed = self.edit(key, |r| {
            let was_expired = r.metadata.contains_key(EXPIRED_AT_KEY);
            match at {
                Some(t) if !r.archived => {
                    r.archived = true;
                    r.metadata
                        .insert(EXPIRED_AT_KEY.into(), Value::from(t as f64));
                }
                None if was_expired => {
                    r.archived = false;
                    r.metadata.remove(EXPIRED_AT_KEY);
                }
                _ => return None,
            }
            Some(r.id.clone())
        });
        let id = match changed {
            None => return Output::NotFound { id: id.into() },
            Some(None) => return Output::Rejected(format!("{id}: no expiry change to make")),
            Some(Some(id)) => id,
        };
        self.changes.note(key);
        self.touch(key);
        Output::Updated { id }
    }

    pub(super) fn apply_cleanup_clock(&mut self, t: crate::clock::Trusted) -> Output {
        self.cleanup_clock = Some(t);
        Output::Done
    }
}
