//! The tokenizer: a command line becomes simple commands (words, redirections, the
//! substitutions inside the words) tagged with the pipeline they belong to. Owns quote removal
//! (`'…'`, `"…"`, `$'…'`, backslashes) and where a here-document ends; where a substitution
//! ends is `scan`'s.
//!
//! Must never expand variables or globs, never recurse (nesting is an explicit stack), never
//! fail: an unterminated quote or substitution simply runs to the end of the input.

use std::collections::VecDeque;

use super::scan;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubKind {
    /// `$(…)` or backticks: the output becomes part of the word.
    Command,
    /// `<(…)` or `>(…)`: the word becomes a path to the command's output or input.
    Process,
}

#[derive(Debug, Clone)]
pub(crate) struct Sub {
    pub kind: SubKind,
    pub body: String,
}

/// A word after quote removal. Substitutions stay in `text` verbatim (their output is unknown
/// here) and are listed in `subs` so that their bodies can be analysed as command lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct Word {
    pub text: String,
    pub subs: Vec<Sub>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirOp {
    Read,
    Write,
    Append,
    ReadWrite,
    Dup,
    HereString,
    /// The target's text is the body of the here-document, not its delimiter.
    HereDoc,
}

#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    pub op: RedirOp,
    pub target: Word,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Simple {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Commands joined by `|` share a pipeline number; `stage` is the position in it.
    pub pipeline: usize,
    pub stage: usize,
}

/// Every simple command of `src`, in order.
pub(crate) fn parse(src: &str) -> Vec<Simple> {
    Lexer::new(src, true).run()
}

/// `src` split into words as one simple command: operators are ordinary characters.
pub(crate) fn split_plain(src: &str) -> Vec<String> {
    let mut lx = Lexer::new(src, false);
    let mut out = Vec::new();
    loop {
        lx.skip_blanks(true);
        if lx.i >= lx.s.len() {
            break;
        }
        let start = lx.i;
        let w = lx.word();
        if lx.i == start {
            lx.i += 1;
        }
        if !w.text.is_empty() || !w.subs.is_empty() {
            out.push(w.text);
        }
    }
    out
}

/// `s` with backslash escapes decoded as `$'…'` does; `printf` and `echo -e` decode the same
/// ones (`printf '\x72m -rf /' | sh` runs `rm`).
pub(crate) fn decode_escapes(s: &str) -> String {
    let mut quoted = Vec::with_capacity(s.len() + 3);
    quoted.extend_from_slice(b"$'");
    for &b in s.as_bytes() {
        if b == b'\'' {
            quoted.extend_from_slice(b"\\'");
        } else {
            quoted.push(b);
        }
    }
    quoted.push(b'\'');
    let src = lossy(quoted);
    let mut lx = Lexer::new(&src, false);
    let mut buf = Vec::new();
    lx.ansi_c(&mut buf);
    lossy(buf)
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
    /// Whether `;&|()<>` are operators (a command line) or plain characters (one command).
    ops: bool,
    pending_heredocs: VecDeque<(String, bool)>,
    heredoc_bodies: Vec<String>,
}

fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str, ops: bool) -> Self {
        Lexer {
            s: src.as_bytes(),
            i: 0,
            ops,
            pending_heredocs: VecDeque::new(),
            heredoc_bodies: Vec::new(),
        }
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    fn slice(&self, a: usize, b: usize) -> String {
        let b = b.min(self.s.len());
        let a = a.min(b);
        String::from_utf8_lossy(&self.s[a..b]).into_owned()
    }

    fn skip_blanks(&mut self, newlines: bool) {
        while let Some(c) = self.at(0) {
            match c {
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'\n' if newlines => self.i += 1,
                b'\\' if self.at(1) == Some(b'\n') => self.i += 2,
                _ => break,
            }
        }
    }

    fn run(mut self) -> Vec<Simple> {
        let mut out: Vec<Simple> = Vec::new();
        let mut cur = Simple::default();
        let (mut pipeline, mut stage) = (0usize, 0usize);
        let finish = |out: &mut Vec<Simple>, cur: &mut Simple, pipeline: usize, stage: usize| {
            if !cur.words.is_empty() || !cur.redirects.is_empty() {
                let mut done = std::mem::take(cur);
                done.pipeline = pipeline;
                done.stage = stage;
                out.push(done);
            }
        };
        loop {
            self.skip_blanks(false);
            let Some(c) = self.at(0) else { break };
            let start = self.i;
            let next = self.at(1);
            match c {
                b'\n' => {
                    self.i += 1;
                    finish(&mut out, &mut cur, pipeline, stage);
                    (pipeline, stage) = (pipeline + 1, 0);
                    self.read_heredocs();
                }
                b'#' => {
                    while self.at(0).is_some_and(|b| b != b'\n') {
                        self.i += 1;
                    }
                }
                b';' => {
                    self.i += 1;
                    while matches!(self.at(0), Some(b';' | b'&')) {
                        self.i += 1;
                    }
                    finish(&mut out, &mut cur, pipeline, stage);
                    (pipeline, stage) = (pipeline + 1, 0);
                }
                b'&' if next == Some(b'>') => {
                    let r = self.redirect();
                    cur.redirects.push(r);
                }
                b'&' => {
                    self.i += if next == Some(b'&') { 2 } else { 1 };
                    finish(&mut out, &mut cur, pipeline, stage);
                    (pipeline, stage) = (pipeline + 1, 0);
                }
                b'|' => {
                    finish(&mut out, &mut cur, pipeline, stage);
                    if next == Some(b'|') {
                        self.i += 2;
                        (pipeline, stage) = (pipeline + 1, 0);
                    } else {
                        self.i += if next == Some(b'&') { 2 } else { 1 };
                        stage += 1;
                    }
                }
                b'(' | b')' => {
                    self.i += 1;
                    finish(&mut out, &mut cur, pipeline, stage);
                }
                b'<' | b'>' if next != Some(b'(') => {
                    let r = self.redirect();
                    cur.redirects.push(r);
                }
                b'0'..=b'9' if self.fd_redirect_ahead() => {
                    let r = self.redirect();
                    cur.redirects.push(r);
                }
                _ => {
                    let w = self.word();
                    if !w.text.is_empty() || !w.subs.is_empty() {
                        cur.words.push(w);
                    }
                }
            }
            if self.i == start {
                self.i += 1;
            }
        }
        finish(&mut out, &mut cur, pipeline, stage);
        self.read_heredocs();
        let mut bodies = std::mem::take(&mut self.heredoc_bodies).into_iter();
        for r in out.iter_mut().flat_map(|s| s.redirects.iter_mut()) {
            if r.op == RedirOp::HereDoc {
                r.target.text = bodies.next().unwrap_or_default();
            }
        }
        out
    }

    /// `2>`, `10<&`: digits glued to a redirection operator name a file descriptor.
    fn fd_redirect_ahead(&self) -> bool {
        let mut k = 0;
        while self.at(k).is_some_and(|b| b.is_ascii_digit()) {
            k += 1;
        }
        matches!(self.at(k), Some(b'<' | b'>')) && self.at(k + 1) != Some(b'(')
    }

    fn redirect(&mut self) -> Redirect {
        while self.at(0).is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        let ops: [(&[u8], RedirOp); 13] = [
            (b"&>>", RedirOp::Append),
            (b"&>", RedirOp::Write),
            (b"<<<", RedirOp::HereString),
            (b"<<-", RedirOp::HereDoc),
            (b"<<", RedirOp::HereDoc),
            (b"<>", RedirOp::ReadWrite),
            (b"<&", RedirOp::Dup),
            (b"<", RedirOp::Read),
            (b">>", RedirOp::Append),
            (b">|", RedirOp::Write),
            (b">&", RedirOp::Dup),
            (b">", RedirOp::Write),
            (b"", RedirOp::Write),
        ];
        let rest = &self.s[self.i..];
        let (tok, mut op) = ops
            .iter()
            .find(|(t, _)| rest.starts_with(t))
            .map(|&(t, op)| (t, op))
            .unwrap_or((b"", RedirOp::Write));
        let strip_tabs = tok == b"<<-";
        self.i += tok.len();
        self.skip_blanks(false);
        let target = match self.at(0) {
            None | Some(b'\n' | b';' | b'&' | b'|' | b'(' | b')') => Word::default(),
            _ => self.word(),
        };
        if op == RedirOp::Dup && !target.text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            // `>&file` sends both streams to a file.
            op = RedirOp::Write;
        }
        if op == RedirOp::HereDoc {
            self.pending_heredocs
                .push_back((target.text.clone(), strip_tabs));
        }
        Redirect { op, target }
    }

    /// Called just after a newline: the pending here-documents' bodies come next, in order.
    fn read_heredocs(&mut self) {
        while let Some((delim, strip_tabs)) = self.pending_heredocs.pop_front() {
            let mut body = String::new();
            while self.i < self.s.len() {
                let eol = self.s[self.i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.s.len(), |p| self.i + p);
                let line = self.slice(self.i, eol);
                self.i = (eol + 1).min(self.s.len());
                let cmp = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if cmp.trim_end_matches('\r') == delim {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            self.heredoc_bodies.push(body);
        }
    }

    fn word(&mut self) -> Word {
        let mut buf: Vec<u8> = Vec::new();
        let mut subs = Vec::new();
        if matches!(self.at(0), Some(b'<' | b'>')) && self.at(1) == Some(b'(') {
            let start = self.i;
            self.i += 2;
            let end = scan::balanced(self.s, self.i);
            subs.push(Sub {
                kind: SubKind::Process,
                body: self.slice(self.i, end),
            });
            self.i = (end + 1).min(self.s.len());
            buf.extend_from_slice(&self.s[start..self.i]);
        }
        while let Some(c) = self.at(0) {
            match c {
                b' ' | b'\t' | b'\r' | b'\n' => break,
                b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>' if self.ops => break,
                b'\\' => match self.at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(n) => {
                        buf.push(n);
                        self.i += 2;
                    }
                    None => {
                        buf.push(b'\\');
                        self.i += 1;
                    }
                },
                b'\'' => {
                    let start = self.i + 1;
                    let end = self.s[start..]
                        .iter()
                        .position(|&b| b == b'\'')
                        .map_or(self.s.len(), |p| start + p);
                    buf.extend_from_slice(&self.s[start..end]);
                    self.i = (end + 1).min(self.s.len());
                }
                b'"' => {
                    self.i += 1;
                    self.double_quoted(&mut buf, &mut subs);
                }
                b'`' => self.backtick(&mut buf, &mut subs),
                b'$' => {
                    if self.dollar(&mut buf, &mut subs, false)
                        && (!buf.is_empty() || !subs.is_empty())
                    {
                        break;
                    }
                }
                _ => {
                    buf.push(c);
                    self.i += 1;
                }
            }
        }
        Word {
            text: lossy(buf),
            subs,
        }
    }

    fn double_quoted(&mut self, buf: &mut Vec<u8>, subs: &mut Vec<Sub>) {
        while let Some(c) = self.at(0) {
            match c {
                b'"' => {
                    self.i += 1;
                    return;
                }
                b'\\' => match self.at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(n @ (b'$' | b'`' | b'"' | b'\\')) => {
                        buf.push(n);
                        self.i += 2;
                    }
                    _ => {
                        buf.push(b'\\');
                        self.i += 1;
                    }
                },
                b'`' => self.backtick(buf, subs),
                b'$' => {
                    self.dollar(buf, subs, true);
                }
                _ => {
                    buf.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// Handles a `$` at `self.i`. Returns true when it was an unquoted `$IFS`, which splits
    /// words the way a blank does (`rm${IFS}-rf${IFS}/`).
    fn dollar(&mut self, buf: &mut Vec<u8>, subs: &mut Vec<Sub>, quoted: bool) -> bool {
        match self.at(1) {
            Some(b'\'') if !quoted => self.ansi_c(buf),
            Some(b'"') if !quoted => {
                self.i += 2;
                self.double_quoted(buf, subs);
            }
            Some(b'(') => {
                let start = self.i;
                self.i += 2;
                let end = scan::balanced(self.s, self.i);
                subs.push(Sub {
                    kind: SubKind::Command,
                    body: self.slice(self.i, end),
                });
                self.i = (end + 1).min(self.s.len());
                buf.extend_from_slice(&self.s[start..self.i]);
            }
            Some(b'{') => {
                let start = self.i;
                let end = scan::brace_end(self.s, self.i + 2);
                self.i = (end + 1).min(self.s.len());
                let inner = &self.s[(start + 2).min(self.i)..end.min(self.s.len())];
                let ifs = inner.starts_with(b"IFS")
                    && inner.get(3).is_none_or(|b| matches!(b, b':' | b'%' | b'#'));
                if ifs && !quoted {
                    return true;
                }
                buf.extend_from_slice(&self.s[start..self.i]);
            }
            _ if !quoted
                && self.s[self.i + 1..].starts_with(b"IFS")
                && self.at(4).is_none_or(|b| !is_ident(b)) =>
            {
                self.i += 4;
                return true;
            }
            _ => {
                buf.push(b'$');
                self.i += 1;
            }
        }
        false
    }

    fn backtick(&mut self, buf: &mut Vec<u8>, subs: &mut Vec<Sub>) {
        let start = self.i;
        self.i += 1;
        let mut body = Vec::new();
        while let Some(c) = self.at(0) {
            match c {
                b'`' => {
                    self.i += 1;
                    break;
                }
                b'\\' if matches!(self.at(1), Some(b'`' | b'\\' | b'$')) => {
                    body.push(self.s[self.i + 1]);
                    self.i += 2;
                }
                _ => {
                    body.push(c);
                    self.i += 1;
                }
            }
        }
        subs.push(Sub {
            kind: SubKind::Command,
            body: lossy(body),
        });
        buf.extend_from_slice(&self.s[start..self.i]);
    }

    /// `$'…'`: the escapes are decoded because that is what the program receives
    /// (`$'\x72m'` is `rm`).
    fn ansi_c(&mut self, buf: &mut Vec<u8>) {
        self.i += 2;
        while let Some(c) = self.at(0) {
            self.i += 1;
            if c == b'\'' {
                return;
            }
            if c != b'\\' {
                buf.push(c);
                continue;
            }
            let Some(e) = self.at(0) else {
                buf.push(b'\\');
                return;
            };
            self.i += 1;
            match e {
                b'n' => buf.push(b'\n'),
                b't' => buf.push(b'\t'),
                b'r' => buf.push(b'\r'),
                b'a' => buf.push(7),
                b'b' => buf.push(8),
                b'e' | b'E' => buf.push(27),
                b'f' => buf.push(12),
                b'v' => buf.push(11),
                b'x' => {
                    let v = self.digits(16, 2);
                    buf.push(v as u8);
                }
                b'u' | b'U' => {
                    let v = self.digits(16, if e == b'u' { 4 } else { 8 });
                    let ch = char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER);
                    buf.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
                b'0'..=b'7' => {
                    self.i -= 1;
                    let v = self.digits(8, 3);
                    buf.push(v as u8);
                }
                b'c' => {
                    if let Some(b) = self.at(0) {
                        self.i += 1;
                        buf.push(b & 0x1f);
                    }
                }
                _ => {
                    if !matches!(e, b'\\' | b'\'' | b'"' | b'?') {
                        buf.push(b'\\');
                    }
                    buf.push(e);
                }
            }
        }
    }

    fn digits(&mut self, radix: u32, max: usize) -> u32 {
        let mut v: u32 = 0;
        for _ in 0..max {
            let Some(d) = self.at(0).and_then(|b| (b as char).to_digit(radix)) else {
                break;
            };
            v = v.wrapping_mul(radix).wrapping_add(d);
            self.i += 1;
        }
        v
    }
}
