//! The concurrent phase's floor: what the daemon's CPU work per turn allows at best.
//!
//! Owns the arithmetic. In a closed loop without think time, N sessions each wait for their
//! own turn before starting the next, so (Little's law) the mean turn takes N / throughput;
//! the throughput can't exceed C cores / CPU per turn. The mean turn therefore takes at least
//! N × (CPU per turn) / C, and a get-context, served beside the others' work, about
//! N × (its own CPU) / C. Must never measure anything: the phases pass the CPU times in.

use super::load::Mixed;
use super::report::{Figure, Samples};
use std::time::Duration;

fn mean(s: &Samples) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    s.0.iter().sum::<f64>() / s.len() as f64
}

/// `mixed.cpu_per_turn`, `mixed.turn_floor` beside the measured mean turn, and
/// `mixed.get_context_floor` when the single-session CPU per get-context is known.
pub fn figures(label: &str, m: &Mixed, cpu: Duration, gc_cpu_ms: Option<f64>) -> Vec<Figure> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let n = m.sessions as f64;
    let per_turn = cpu.as_secs_f64() * 1000.0 / m.turns.max(1) as f64;
    let turn = mean(&m.get_context) + mean(&m.stop) + mean(&m.record_outcome);
    let mut out = vec![
        Figure::value(&format!("mixed.cpu_per_turn.{label}"), "ms", per_turn).with_note(format!(
            "the daemon's CPU time (all threads, background work included) per turn; {:.0}% of {cores} cores busy with it",
            100.0 * cpu.as_secs_f64() / (m.elapsed.as_secs_f64() * cores)
        )),
        Figure::value(&format!("mixed.turn_floor.{label}"), "ms", n * per_turn / cores)
            .with_note(format!(
                "{n} sessions × CPU per turn / {cores} cores: the shortest mean turn the CPU allows; measured mean turn {turn:.0} ms"
            )),
    ];
    if let Some(g) = gc_cpu_ms {
        out.push(
            Figure::value(&format!("mixed.get_context_floor.{label}"), "ms", n * g / cores)
                .with_note(format!(
                    "{n} sessions × single-session CPU per get-context ({g:.1} ms) / {cores} cores; measured mean {:.0} ms",
                    mean(&m.get_context)
                )),
        );
    }
    out
}
