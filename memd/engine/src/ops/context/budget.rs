//! The token budget of one injection: which memories get a full line, clipped how far, and
//! which only a reference.
//!
//! Owns the accounting. The budget covers everything the hook hands the model: the scoring
//! request, the preamble and frame, and every character of every line (ids and tags included);
//! before issue 12 it covered memory text only and the median injection ran 6 % over. Must never
//! reorder memories (ranking decided that) nor drop the scoring request (it is not optional).

use super::format::{self, Line};
use proto::MemoryView;

/// A memory line is never cut below this many characters of text (a stub helps nobody).
const MIN_LINE_CHARS: usize = 80;

/// What is left for memory lines out of `total_chars` once the scoring request and the frame
/// (long preamble on a conversation's first context, a one-liner after) are paid for.
pub fn for_lines(total_chars: usize, scoring_prompt: &str, first_context: bool) -> usize {
    let scoring = match scoring_prompt.chars().count() {
        0 => 0,
        n => n + 2, // the blank line between the two blocks
    };
    total_chars.saturating_sub(scoring + format::frame_chars(first_context))
}

/// Lines for `views` in order within `budget_chars`. `seen[i]`: the id views[i] was shown
/// under in full earlier in this conversation (it gets a reference line). Returns `(index into
/// views, Some(text) | None for a reference)` and the ids newly shown in full.
pub fn lay_out(
    views: &[MemoryView],
    seen: &[Option<String>],
    budget_chars: usize,
) -> (Vec<(usize, Option<String>)>, Vec<String>) {
    let mut left = budget_chars;
    let mut lines = Vec::new();
    let mut shown = Vec::new();
    for (i, m) in views.iter().enumerate() {
        if let Some(seen_as) = seen.get(i).and_then(Option::as_deref) {
            let cost = Line::Repeat { m, seen_as }.render().chars().count();
            if cost <= left {
                left -= cost;
                lines.push((i, None));
            }
            continue;
        }
        let overhead = format::full_line(m, "").chars().count();
        if left < overhead + MIN_LINE_CHARS {
            continue;
        }
        let text = format::clip(&m.content, left - overhead);
        left -= overhead + text.chars().count();
        shown.push(m.id.clone());
        lines.push((i, Some(text)));
    }
    (lines, shown)
}

/// The laid-out lines as the formatter takes them.
pub fn lines<'a>(
    views: &'a [MemoryView],
    seen: &'a [Option<String>],
    laid: &[(usize, Option<String>)],
) -> Vec<Line<'a>> {
    laid.iter()
        .map(|(i, text)| match text {
            Some(t) => Line::Full {
                m: &views[*i],
                text: t.clone(),
            },
            None => Line::Repeat {
                m: &views[*i],
                seen_as: seen[*i].as_deref().unwrap_or(&views[*i].id),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: &str, content: &str) -> MemoryView {
        MemoryView {
            id: id.into(),
            collection: "working".into(),
            content: content.into(),
            age: "2d".into(),
            ..MemoryView::default()
        }
    }

    /// Everything the hook hands over fits the budget: scoring request, frame and lines.
    #[test]
    fn the_whole_injection_fits_the_budget() {
        let views: Vec<MemoryView> = (0..5)
            .map(|i| view(&format!("working_{i:012}"), &"deploy notes ".repeat(40)))
            .collect();
        let scoring = format::scoring_prompt(&["working_000000000001".to_string()]);
        for first in [true, false] {
            let total = 400 * super::super::CHARS_PER_TOKEN;
            let seen = vec![None; 5];
            let (lines, _) = lay_out(&views, &seen, for_lines(total, &scoring, first));
            let context = format::known_context(&super::lines(&views, &seen, &lines), first);
            let injection = format!("{scoring}\n\n{context}");
            assert!(!lines.is_empty());
            assert!(
                injection.chars().count() <= total,
                "{} chars over a {total} budget (first: {first})",
                injection.chars().count()
            );
        }
    }

    #[test]
    fn references_cost_their_line_and_nothing_is_cut_to_a_stub() {
        let views = vec![
            view("working_a", &"x".repeat(500)),
            view("working_b", "short"),
        ];
        let (lines, shown) = lay_out(&views, &[Some("working_a".into()), None], 10_000);
        assert_eq!(lines[0], (0, None));
        assert_eq!(shown, vec!["working_b"]);
        let (lines, _) = lay_out(&views, &[None, None], 60);
        assert!(
            lines.is_empty(),
            "60 chars cannot hold a useful line: {lines:?}"
        );
    }
}
