//! Rust source as the module graph needs it: identifiers, `::` and punctuation, with line
//! numbers.
//!
//! Owns skipping what cannot hold a path: comments (nested block comments too), string, byte
//! and raw string literals, char literals and lifetimes. Must never need a parser crate: it
//! only has to find paths, not understand expressions.

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens with their line numbers; comments, string/char literals and lifetimes dropped.
pub fn tokenize(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    let skip_to = |i: &mut usize, line: &mut usize, end: usize| {
        *line += c[*i..end.min(c.len())]
            .iter()
            .filter(|&&x| x == '\n')
            .count();
        *i = end;
    };
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied().unwrap_or(' ');
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == '*' {
            let end = block_comment_end(&c, i);
            skip_to(&mut i, &mut line, end);
        } else if let Some(end) = raw_string_end(&c, i) {
            skip_to(&mut i, &mut line, end);
        } else if ch == '"' || (ch == 'b' && next == '"') {
            let end = string_end(&c, if ch == 'b' { i + 1 } else { i });
            skip_to(&mut i, &mut line, end);
        } else if ch == '\'' {
            i = char_or_lifetime_end(&c, i);
        } else if ch == ':' && next == ':' {
            out.push((Tok::Path, line));
            i += 2;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // `r#type` is the identifier `type`.
            if word == "r" && c.get(i) == Some(&'#') {
                i += 1;
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

fn block_comment_end(c: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// The end of a raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at `i`, if one does.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&x| x == '#').count();
    j += hashes;
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"'
            && c[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&x| x == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

fn string_end(c: &[char], mut i: usize) -> usize {
    i += 1;
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Skips `'x'`, `'\n'`, `'\u{..}'` or a lifetime `'a`.
fn char_or_lifetime_end(c: &[char], i: usize) -> usize {
    if c.get(i + 1) == Some(&'\\') {
        // The escape is at least two characters (`\'`, `\n`): the quote after it closes.
        let mut j = i + 3;
        while j < c.len() && c[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if c.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    // A lifetime: the identifier after it is not a path.
    let mut j = i + 1;
    while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') {
        j += 1;
    }
    j
}
