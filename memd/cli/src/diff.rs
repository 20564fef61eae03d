//! Unified diffs for `--dry-run` output, three lines of context, by the `similar` crate.
//!
//! Owns only how a config file's change is shown (labels, `/dev/null` for a file that does not
//! exist on one side): the caller decides what to show and masks secrets first.

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// A unified diff of `old` → `new` (empty string when identical). `None` for `old` means the
/// file does not exist yet; `None` for `new`, that it will be removed.
pub fn unified(label: &str, old: Option<&str>, new: Option<&str>) -> String {
    let (a, b) = (old.unwrap_or(""), new.unwrap_or(""));
    if a == b && old.is_some() == new.is_some() {
        return String::new();
    }
    let side = |present: bool| if present { label } else { "/dev/null" };
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(CONTEXT)
        .header(side(old.is_some()), side(new.is_some()))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_is_empty() {
        assert_eq!(unified("f", Some("a\nb\n"), Some("a\nb\n")), "");
    }

    #[test]
    fn insertion_in_the_middle_has_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\n5\nX\n6\n7\n8\n9\n";
        let d = unified("f", Some(old), Some(new));
        assert_eq!(
            d,
            "--- f\n+++ f\n@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+X\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn new_and_deleted_files() {
        // GNU `diff -u` ranges: a one-line range is written without its length.
        assert_eq!(
            unified("f", None, Some("a\n")),
            "--- /dev/null\n+++ f\n@@ -0,0 +1 @@\n+a\n"
        );
        assert_eq!(
            unified("f", Some("a\n"), None),
            "--- f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
        );
    }

    #[test]
    fn replacement_and_distant_changes_make_two_hunks() {
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new: String = (0..20)
            .filter(|i| *i != 17)
            .map(|i| {
                if i == 2 {
                    "two\n".to_string()
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        let d = unified("f", Some(&old), Some(&new));
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("-2\n+two\n"), "{d}");
        assert!(d.contains("-17\n"), "{d}");
    }
}
