//! Where quoted and nested regions of a command line end, found by scanning bytes: the end of
//! a `$(…)` or `${…}` body and the unquoted skeleton of a line. Used by the tokenizer and by
//! the textual rules (the fork bomb's shape).
//!
//! Must never recurse (nesting is an explicit stack) and never read past the input: an
//! unterminated region ends at the end of the input.

/// `src` with quoted text, escaped characters and comments blanked out, so that a textual
/// pattern found in the result is shell syntax rather than data (`echo ':(){ :|:& };:'`).
pub(crate) fn unquoted_skeleton(src: &str) -> Vec<u8> {
    let s = src.as_bytes();
    let mut out = s.to_vec();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' => {
                let end = (i + 2).min(s.len());
                out[i..end].fill(b' ');
                i = end;
            }
            q @ (b'\'' | b'"') => {
                let mut j = i + 1;
                while j < s.len() && s[j] != q {
                    j += if q == b'"' && s[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(s.len());
                out[i..end].fill(b' ');
                i = end;
            }
            b'#' if i == 0 || s[i - 1].is_ascii_whitespace() || s[i - 1] == b';' => {
                let mut j = i;
                while j < s.len() && s[j] != b'\n' {
                    j += 1;
                }
                out[i..j].fill(b' ');
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

/// The index of the `)` closing a substitution whose body starts at `from` (or the end of
/// the input). Quotes and nested substitutions are tracked with a stack, not recursion.
pub(crate) fn balanced(s: &[u8], from: usize) -> usize {
    #[derive(PartialEq, Clone, Copy)]
    enum Ctx {
        Paren,
        Brace,
        DQuote,
        Backtick,
    }
    let mut stack = vec![Ctx::Paren];
    let mut i = from;
    while i < s.len() {
        let c = s[i];
        let top = *stack.last().unwrap_or(&Ctx::Paren);
        match (top, c) {
            (_, b'\\') => i += 1,
            (Ctx::DQuote, b'"') | (Ctx::Backtick, b'`') | (Ctx::Brace, b'}') => {
                stack.pop();
            }
            (Ctx::Paren, b')') => {
                stack.pop();
                if stack.is_empty() {
                    return i;
                }
            }
            (Ctx::Backtick, _) => {}
            (_, b'$') if s.get(i + 1) == Some(&b'(') => {
                stack.push(Ctx::Paren);
                i += 1;
            }
            (_, b'$') if s.get(i + 1) == Some(&b'{') => {
                stack.push(Ctx::Brace);
                i += 1;
            }
            (_, b'`') => stack.push(Ctx::Backtick),
            (Ctx::DQuote, _) => {}
            (_, b'"') => stack.push(Ctx::DQuote),
            (_, b'\'') => {
                i += 1;
                while i < s.len() && s[i] != b'\'' {
                    i += 1;
                }
            }
            (Ctx::Paren, b'(') => stack.push(Ctx::Paren),
            (Ctx::Brace, b'{') => stack.push(Ctx::Brace),
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// The index of the `}` closing a `${` whose inside starts at `from`.
pub(crate) fn brace_end(s: &[u8], from: usize) -> usize {
    let mut i = from;
    let mut depth = 1usize;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            b'$' if s.get(i + 1) == Some(&b'(') => i = balanced(s, i + 2),
            _ => {}
        }
        i += 1;
    }
    s.len()
}
