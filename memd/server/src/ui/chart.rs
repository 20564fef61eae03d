//! Small inline SVG charts: a memory's outcome timeline, daily bars, daily lines.
//!
//! Owns turning numbers into SVG (fixed viewBox, scaled by CSS, so it stays sharp at any
//! zoom). Must never be the only way to read a figure: every chart has an `aria-label` and the
//! pages print the same numbers as text beside it. Colours come from CSS classes.

use maud::{Markup, html};
use memd_engine::record::{MoveEntry, OutcomeEntry};

const W: f64 = 640.0;
const H: f64 = 160.0;
const PAD: f64 = 24.0;

/// Outcomes as dots over time (worked high, partial middle, failed low), promotions and
/// demotions as labelled vertical lines, between `from` and `to` (Unix milliseconds).
pub fn timeline(outcomes: &[OutcomeEntry], moves: &[MoveEntry], from: i64, to: i64) -> Markup {
    const LEFT: f64 = 4.0 * PAD;
    // `from` can be after `to` (a memory from a machine whose clock runs ahead).
    let end = (to - from).max(1);
    let x = |at: i64| LEFT + (at - from).clamp(0, end) as f64 / end as f64 * (W - LEFT - PAD);
    let label = format!(
        "Outcome timeline: {} outcomes, {} moves",
        outcomes.len(),
        moves.len()
    );
    html! {
        svg.chart viewBox=(format!("0 0 {W} {H}")) role="img" aria-label=(label) {
            title { (label) }
            line.axis x1=(LEFT) y1=(H - PAD) x2=(W - PAD) y2=(H - PAD) {}
            @for word in ["worked", "partial", "unknown", "failed"] {
                text.tick x=(LEFT - 8.0) y=(outcome_y(word) + 4.0) text-anchor="end" { (word) }
            }
            text.tick x=(LEFT) y=(H - 6.0) { (super::layout::when(from)) }
            text.tick x=(W - PAD) y=(H - 6.0) text-anchor="end" { (super::layout::when(to)) }
            @for m in moves {
                line.move x1=(x(m.at)) y1=(PAD - 8.0) x2=(x(m.at)) y2=(H - PAD) {}
                text.tick x=(x(m.at) + 3.0) y=(PAD - 10.0) { "→ " (m.to.as_str()) }
            }
            @for o in outcomes {
                @let word = o.outcome.as_str();
                circle class=(format!("dot {word}")) cx=(x(o.at)) cy=(outcome_y(word)) r="6" {
                    title { (word) " · " (super::layout::when(o.at)) }
                }
            }
        }
    }
}

fn outcome_y(word: &str) -> f64 {
    let band = (H - 2.0 * PAD) / 4.0;
    match word {
        "worked" => PAD + band * 0.5,
        "partial" => PAD + band * 1.5,
        "unknown" => PAD + band * 2.5,
        _ => PAD + band * 3.5,
    }
}

/// One bar per labelled value.
pub fn bars(label: &str, points: &[(String, usize)]) -> Markup {
    let max = points.iter().map(|p| p.1).max().unwrap_or(0).max(1) as f64;
    let slot = (W - 2.0 * PAD) / points.len().max(1) as f64;
    html! {
        svg.chart viewBox=(format!("0 0 {W} {H}")) role="img" aria-label=(label) {
            title { (label) }
            line.axis x1=(PAD) y1=(H - PAD) x2=(W - PAD) y2=(H - PAD) {}
            text.tick x=(PAD) y=(PAD - 8.0) { "max " (max as usize) }
            @for (i, (name, v)) in points.iter().enumerate() {
                @let h = *v as f64 / max * (H - 2.0 * PAD);
                rect.bar x=(PAD + i as f64 * slot + 1.0) y=(H - PAD - h)
                    width=((slot - 2.0).max(1.0)) height=(h) {
                    title { (name) ": " (v) }
                }
            }
            @if let (Some(first), Some(last)) = (points.first(), points.last()) {
                text.tick x=(PAD) y=(H - 6.0) { (first.0) }
                text.tick x=(W - PAD) y=(H - 6.0) text-anchor="end" { (last.0) }
            }
        }
    }
}

/// One line per series over the same days; `series` is (name, one value per day).
pub fn lines(label: &str, days: &[String], series: &[(String, Vec<usize>)]) -> Markup {
    let max = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let n = days.len().max(2) as f64 - 1.0;
    let x = |i: usize| PAD + i as f64 / n * (W - 2.0 * PAD);
    let y = |v: usize| H - PAD - v as f64 / max * (H - 2.0 * PAD);
    html! {
        svg.chart viewBox=(format!("0 0 {W} {H}")) role="img" aria-label=(label) {
            title { (label) }
            line.axis x1=(PAD) y1=(H - PAD) x2=(W - PAD) y2=(H - PAD) {}
            text.tick x=(PAD) y=(PAD - 8.0) { "max " (max as usize) }
            @for (k, (name, values)) in series.iter().enumerate() {
                @let pts = values.iter().enumerate()
                    .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
                    .collect::<Vec<_>>().join(" ");
                polyline class=(format!("series s{k}")) points=(pts) {
                    title { (name) }
                }
                @for (i, v) in values.iter().enumerate() {
                    circle class=(format!("point s{k}")) cx=(x(i)) cy=(y(*v)) r="3" {
                        title { (name) " " (days.get(i).map(String::as_str).unwrap_or("")) ": " (v) }
                    }
                }
            }
            @if let (Some(first), Some(last)) = (days.first(), days.last()) {
                text.tick x=(PAD) y=(H - 6.0) { (first) }
                text.tick x=(W - PAD) y=(H - 6.0) text-anchor="end" { (last) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{Collection, Outcome};

    #[test]
    fn a_timeline_draws_one_dot_per_outcome_and_one_line_per_move() {
        let outcomes = [
            OutcomeEntry {
                outcome: Outcome::Worked,
                at: 1_000,
            },
            OutcomeEntry {
                outcome: Outcome::Failed,
                at: 2_000,
            },
        ];
        let moves = [MoveEntry {
            from: Collection::Working,
            to: Collection::History,
            at: 1_500,
        }];
        let svg = timeline(&outcomes, &moves, 0, 3_000).into_string();
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("dot worked") && svg.contains("dot failed"));
        assert!(svg.contains("→ history"));
    }

    #[test]
    fn a_memory_created_after_now_still_draws() {
        let outcomes = [OutcomeEntry {
            outcome: Outcome::Worked,
            at: 5_000,
        }];
        let svg = timeline(&outcomes, &[], 9_000, 3_000).into_string();
        assert_eq!(svg.matches("<circle").count(), 1);
    }

    #[test]
    fn bars_scale_to_the_largest_value() {
        let svg = bars("x", &[("a".into(), 1), ("b".into(), 4)]).into_string();
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("max 4"));
    }
}
