//! A small line diff for `--dry-run` output, in unified format with three lines of context.
//!
//! Owns only text comparison: the caller decides what to show (and masks secrets first).
//! Config files are small and edits local, so common prefix and suffix are trimmed and the rest
//! is compared with a plain LCS table; a pathological input falls back to "replace all" rather
//! than using unbounded memory.

const CONTEXT: usize = 3;
/// Above this many cells the LCS table is not built; the middle is shown as replaced whole.
const MAX_CELLS: usize = 4_000_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Edit {
    Keep,
    Del,
    Add,
}

/// A unified diff of `old` → `new` (empty string when identical). `None` for `old` means the
/// file does not exist yet.
pub fn unified(label: &str, old: Option<&str>, new: Option<&str>) -> String {
    let a: Vec<&str> = old.map(|t| t.lines().collect()).unwrap_or_default();
    let b: Vec<&str> = new.map(|t| t.lines().collect()).unwrap_or_default();
    if a == b && old.is_some() == new.is_some() {
        return String::new();
    }
    let script = edit_script(&a, &b);
    let mut out = format!(
        "--- {}\n+++ {}\n",
        if old.is_some() {
            label.to_string()
        } else {
            "/dev/null".into()
        },
        if new.is_some() {
            label.to_string()
        } else {
            "/dev/null".into()
        }
    );
    for hunk in hunks(&script) {
        render_hunk(&mut out, &script, hunk, &a, &b);
    }
    out
}

/// The edit script as (edit, index in a, index in b).
fn edit_script(a: &[&str], b: &[&str]) -> Vec<(Edit, usize, usize)> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut script: Vec<(Edit, usize, usize)> = (0..prefix).map(|i| (Edit::Keep, i, i)).collect();
    for (e, i, j) in middle_script(am, bm) {
        script.push((e, i + prefix, j + prefix));
    }
    let (sa, sb) = (a.len() - suffix, b.len() - suffix);
    script.extend((0..suffix).map(|k| (Edit::Keep, sa + k, sb + k)));
    script
}

fn middle_script(a: &[&str], b: &[&str]) -> Vec<(Edit, usize, usize)> {
    let (n, m) = (a.len(), b.len());
    if n.saturating_mul(m) > MAX_CELLS {
        let mut s: Vec<_> = (0..n).map(|i| (Edit::Del, i, 0)).collect();
        s.extend((0..m).map(|j| (Edit::Add, n, j)));
        return s;
    }
    // lcs[i][j] = LCS length of a[i..] and b[j..]
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if a[i] == b[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut s) = (0, 0, Vec::with_capacity(n + m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            s.push((Edit::Keep, i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            // Deletions first on ties: the conventional "-old +new" order.
            s.push((Edit::Del, i, j));
            i += 1;
        } else {
            s.push((Edit::Add, i, j));
            j += 1;
        }
    }
    s
}

/// Ranges of the script to print: each change with up to CONTEXT kept lines around it.
fn hunks(script: &[(Edit, usize, usize)]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (k, (e, _, _)) in script.iter().enumerate() {
        if *e == Edit::Keep {
            continue;
        }
        let start = k.saturating_sub(CONTEXT);
        let end = (k + CONTEXT + 1).min(script.len());
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

fn render_hunk(
    out: &mut String,
    script: &[(Edit, usize, usize)],
    (s, e): (usize, usize),
    a: &[&str],
    b: &[&str],
) {
    let part = &script[s..e];
    let a_len = part.iter().filter(|x| x.0 != Edit::Add).count();
    let b_len = part.iter().filter(|x| x.0 != Edit::Del).count();
    let (a0, b0) = (part[0].1, part[0].2);
    let start = |first: usize, len: usize| if len == 0 { first } else { first + 1 };
    out.push_str(&format!(
        "@@ -{},{a_len} +{},{b_len} @@\n",
        start(a0, a_len),
        start(b0, b_len)
    ));
    for (edit, i, j) in part {
        match edit {
            Edit::Keep => out.push_str(&format!(" {}\n", a[*i])),
            Edit::Del => out.push_str(&format!("-{}\n", a[*i])),
            Edit::Add => out.push_str(&format!("+{}\n", b[*j])),
        }
    }
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
        assert_eq!(
            unified("f", None, Some("a\n")),
            "--- /dev/null\n+++ f\n@@ -0,0 +1,1 @@\n+a\n"
        );
        assert_eq!(
            unified("f", Some("a\n"), None),
            "--- f\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-a\n"
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
