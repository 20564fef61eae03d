//! What `/api/stats` reports: the core's counts plus the sidecar chain's state.
//!
//! Exists so that `core` never imports `context` (the sidecar state is the turn cycle's):
//! dependencies point one way. Must never block on the store's writer.

use crate::core::Core;
use proto::StatsResponse;

/// The full statistics answer.
pub fn stats(core: &Core) -> StatsResponse {
    let mut stats = core.stats_without_sidecar();
    stats.sidecar = crate::context::sidecar_status(core);
    stats.shared_store = core.shared.status().map(|mut s| {
        // Counted now, not at the worker's last pass.
        (s.backlog, s.mirrored) = core.store.read(|st| (st.backlog(), st.mirrored_len()));
        s
    });
    stats
}
