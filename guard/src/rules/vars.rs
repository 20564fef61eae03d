//! What earlier commands of one command line established, for the rules reading a later one:
//! variables (`X=/`, `for d in / ~`, `printf -v`, `read … <<<`, `set --`, function arguments),
//! parameter-expansion defaults (`${X:-/}`), aliases and git aliases defined earlier, and the
//! directory a `cd` moved to.
//!
//! Must never grow without bound (values, variables and alternatives are capped), never run
//! anything, and never guess a value it was not shown: an unknown variable stays unknown.

use super::paths;
use crate::shell::{self, Command, expand_braces};

/// What earlier commands of the same command line established.
#[derive(Default, Clone)]
pub(crate) struct LineState {
    /// Set by `cd`/`pushd` to a place the rules can name; `None` when unknown.
    pub cwd: Option<Vec<String>>,
    /// Variables assigned earlier (`X=/`, `for d in / ~`), newest last, at most `MAX_VARS`.
    vars: Vec<(String, Vec<String>)>,
    /// `alias NAME=TEXT` defined earlier: a command starting with NAME runs TEXT.
    aliases: Vec<(String, String)>,
    /// `git config alias.NAME VALUE` run earlier: `git NAME` runs `git VALUE`.
    pub git_aliases: Vec<(String, String)>,
    /// `NAME() { BODY; }` defined in the line: calling NAME runs BODY with its arguments.
    pub functions: Vec<(String, String)>,
}

const MAX_VARS: usize = 64;
/// Longest variable value kept (a path or a command word is far shorter).
const MAX_VALUE: usize = 4096;
const MAX_EXPANSIONS: usize = 16;
/// Aliases, git aliases and functions kept per line.
const MAX_DEFS: usize = 16;

impl LineState {
    /// `word` with known variables substituted, parameter defaults applied (`${X:-/}` is `/`
    /// when `X` is not known) and braces expanded; a few alternatives at most.
    pub fn expand(&self, word: &str) -> Vec<String> {
        let mut out = vec![word.to_string()];
        if word.contains('$') {
            for (name, values) in self.vars.iter().rev() {
                let mut next = Vec::new();
                for w in &out {
                    for v in values {
                        match substitute(w, name, v) {
                            Some(s) if next.len() < MAX_EXPANSIONS => next.push(s),
                            Some(_) => {}
                            None => {
                                next.push(w.clone());
                                break;
                            }
                        }
                    }
                }
                out = next;
            }
            for w in &mut out {
                if let Some(d) = self.defaults(w) {
                    *w = d;
                }
            }
        }
        let mut expanded = Vec::new();
        for w in out {
            for e in expand_braces(&w, MAX_EXPANSIONS) {
                if expanded.len() < MAX_EXPANSIONS {
                    expanded.push(e);
                }
            }
        }
        expanded
    }

    /// The single known value of `name`.
    fn single(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| (v.len() == 1).then(|| v[0].as_str()))
    }

    /// `word` with every `${NAME:-WORD}` / `${NAME-WORD}` / `${NAME:=WORD}` / `${NAME=WORD}`
    /// replaced by NAME's known value, or by WORD when NAME is not known (a variable the
    /// guard cannot see is as likely unset as set: the default is what the line falls back
    /// to). `None` when the word has no such form.
    fn defaults(&self, word: &str) -> Option<String> {
        let mut out = String::new();
        let mut rest = word;
        let mut hit = false;
        while let Some(pos) = rest.find("${") {
            out.push_str(&rest[..pos]);
            let inner_start = pos + 2;
            let close = shell::scan::brace_end(rest.as_bytes(), inner_start);
            let inner = &rest[inner_start..close.min(rest.len())];
            let name_len = inner
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            let (name, op) = inner.split_at(name_len);
            let default = [":-", ":=", "-", "="]
                .iter()
                .find_map(|p| op.strip_prefix(p));
            match default {
                Some(d) if !name.is_empty() => {
                    let known = self.single(name).filter(|v| !v.is_empty());
                    out.push_str(known.unwrap_or(d));
                    hit = true;
                }
                _ => out.push_str(&rest[pos..(close + 1).min(rest.len())]),
            }
            rest = &rest[(close + 1).min(rest.len())..];
        }
        out.push_str(rest);
        (hit && out.len() <= MAX_VALUE).then_some(out)
    }

    /// `word` with the variables that have a single known value substituted (`a=rm; $a -rf /`);
    /// loop variables with several values are left for [`LineState::expand`].
    pub(super) fn substitute_single(&self, word: &str) -> String {
        let mut w = word.to_string();
        if !w.contains('$') {
            return w;
        }
        for (name, values) in self.vars.iter().rev() {
            if let [value] = values.as_slice()
                && let Some(s) = substitute(&w, name, value)
            {
                w = s;
            }
        }
        if w.contains("${")
            && let Some(d) = self.defaults(&w)
        {
            w = d;
        }
        w
    }

    /// Records assignments, `for NAME in …`, `printf -v NAME …`, `set -- …`, `alias` and
    /// `git config alias.…`; true when the command does nothing else.
    pub(super) fn note(&mut self, words: &[String]) -> bool {
        let first = words.first().map(String::as_str);
        let assigns = match first {
            Some("export" | "local" | "declare" | "readonly" | "typeset") => &words[1..],
            Some("for") => {
                if let (Some(name), Some("in")) = (words.get(1), words.get(2).map(String::as_str)) {
                    let values = words[3..].iter().take(MAX_EXPANSIONS).cloned().collect();
                    self.set(name.clone(), values);
                }
                return true;
            }
            Some("printf") => return self.printf_v(&words[1..]),
            Some("set") if words.get(1).is_some_and(|w| w == "--") => {
                self.positional(&words[2..]);
                return true;
            }
            Some("alias") => {
                for w in &words[1..] {
                    if let Some((name, text)) = w.split_once('=')
                        && !name.is_empty()
                    {
                        push_def(&mut self.aliases, name, text);
                    }
                }
                return true;
            }
            Some(_) if shell::program_name(&words[0]) == "git" => {
                self.git_config_alias(&words[1..]);
                return false;
            }
            _ => words,
        };
        if assigns.is_empty()
            || !assigns
                .iter()
                .all(|w| shell::is_assignment(w) || w.starts_with('-'))
        {
            return first.is_some_and(|f| {
                matches!(f, "export" | "local" | "declare" | "readonly" | "typeset")
            });
        }
        for w in assigns.iter().filter(|w| shell::is_assignment(w)) {
            if let Some((name, value)) = w.split_once('=') {
                self.set(
                    name.trim_end_matches('+').to_string(),
                    vec![value.to_string()],
                );
            }
        }
        true
    }

    /// `printf -v NAME FORMAT ARGS…` stores the formatted text in NAME (`%s` takes the next
    /// argument; other conversions are left as written).
    fn printf_v(&mut self, args: &[String]) -> bool {
        let (Some(flag), Some(name), Some(format)) = (args.first(), args.get(1), args.get(2))
        else {
            return false;
        };
        if flag != "-v" {
            return false;
        }
        let mut rest = args[3..].iter();
        let mut value = String::new();
        let mut parts = format.split("%s");
        value.push_str(parts.next().unwrap_or(""));
        for part in parts {
            value.push_str(rest.next().map_or("", String::as_str));
            value.push_str(part);
        }
        self.set(name.clone(), vec![shell::lex::decode_escapes(&value)]);
        true
    }

    /// `set -- a b` (or a function called with `a b`): `$1`, `$2`, and `$@` / `$*` as each.
    pub(super) fn positional(&mut self, args: &[String]) {
        for (i, a) in args.iter().take(9).enumerate() {
            self.set((i + 1).to_string(), vec![a.clone()]);
        }
        let all: Vec<String> = args.iter().take(MAX_EXPANSIONS).cloned().collect();
        self.set("@".into(), all.clone());
        self.set("*".into(), all);
    }

    /// `read [-r] NAME… <<< TEXT`: the words of TEXT go to the names, the last one takes
    /// the rest.
    pub(super) fn read_here(&mut self, cmd: &Command, here: &str) {
        let names: Vec<&String> = cmd.args.iter().filter(|a| !a.starts_with('-')).collect();
        let words: Vec<&str> = here.split_whitespace().collect();
        for (i, name) in names.iter().enumerate() {
            let value = if i + 1 == names.len() {
                words.get(i..).map(|w| w.join(" ")).unwrap_or_default()
            } else {
                words.get(i).map(|w| w.to_string()).unwrap_or_default()
            };
            self.set(name.to_string(), vec![value]);
        }
    }

    /// `git [-C dir] config [--global …] alias.NAME VALUE`.
    fn git_config_alias(&mut self, args: &[String]) {
        let Some(pos) = args.iter().position(|a| a == "config") else {
            return;
        };
        let rest: Vec<&String> = args[pos + 1..]
            .iter()
            .filter(|a| !a.starts_with('-'))
            .collect();
        if let [key, value, ..] = rest.as_slice()
            && let Some(name) = key.strip_prefix("alias.")
        {
            push_def(&mut self.git_aliases, name, value);
        }
    }

    /// The alias text `program` stands for.
    pub(super) fn alias(&self, program: &str) -> Option<&str> {
        self.aliases
            .iter()
            .rev()
            .find(|(n, _)| n == program)
            .map(|(_, t)| t.as_str())
    }

    pub(super) fn set(&mut self, name: String, values: Vec<String>) {
        self.vars.retain(|(n, _)| *n != name);
        // A value built by doubling (`a=$a$a` over and over) would grow exponentially: past
        // MAX_VALUE the variable is treated as unknown, as a value only known at run time is.
        if values.iter().any(|v| v.len() > MAX_VALUE) {
            return;
        }
        if self.vars.len() >= MAX_VARS {
            self.vars.remove(0);
        }
        self.vars.push((name, values));
    }

    pub(super) fn after(&mut self, cmd: &Command) {
        if !matches!(cmd.program.as_str(), "cd" | "pushd" | "chdir") {
            return;
        }
        let target = cmd.args.iter().find(|a| !a.starts_with('-') || *a == "-");
        self.cwd = match target {
            None => paths::resolve("~", None),
            Some(t) if t == "-" => None,
            Some(t) => {
                let t = self.expand(t).into_iter().next().unwrap_or_default();
                paths::resolve(&t, self.cwd.as_deref())
            }
        };
    }
}

/// Adds a definition, replacing one of the same name; at most `MAX_DEFS`, short values only.
pub(super) fn push_def(defs: &mut Vec<(String, String)>, name: &str, text: &str) {
    if text.len() > MAX_VALUE {
        return;
    }
    defs.retain(|(n, _)| n != name);
    if defs.len() >= MAX_DEFS {
        defs.remove(0);
    }
    defs.push((name.to_string(), text.to_string()));
}

/// Shell functions defined in `text` (`name() { … }`, `name() ( … )`, `function name { … }`):
/// their names and bodies, found on the unquoted skeleton so quoted text defines nothing.
pub(super) fn functions(text: &str) -> Vec<(String, String)> {
    let sk = shell::scan::unquoted_skeleton(text);
    let b = sk.as_slice();
    // Where each `{` and `(` closes, found in one pass (hostile input full of openers must
    // not cost a scan to the end per opener).
    let mut close_of = vec![usize::MAX; b.len()];
    let (mut braces, mut parens) = (Vec::new(), Vec::new());
    for (k, &c) in b.iter().enumerate() {
        match c {
            b'{' => braces.push(k),
            b'(' => parens.push(k),
            b'}' => {
                if let Some(o) = braces.pop() {
                    close_of[o] = k;
                }
            }
            b')' => {
                if let Some(o) = parens.pop() {
                    close_of[o] = k;
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() && out.len() < MAX_DEFS {
        if !matches!(b[i], b'{' | b'(') {
            i += 1;
            continue;
        }
        let open = i;
        i += 1;
        let Some((name, body_open)) = definition_at(b, open) else {
            continue;
        };
        let close = close_of[body_open];
        if close == usize::MAX {
            continue;
        }
        out.push((name, text[body_open + 1..close].to_string()));
        i = close + 1;
    }
    out
}

/// When `b[at]` opens `NAME()`'s parentheses or `function NAME`'s body: NAME and where the
/// body opens.
fn definition_at(b: &[u8], at: usize) -> Option<(String, usize)> {
    let word_before = |end: usize| {
        let mut e = end;
        while e > 0 && matches!(b[e - 1], b' ' | b'\t') {
            e -= 1;
        }
        let mut s = e;
        while s > 0 && !(b[s - 1].is_ascii_whitespace() || b";&|(){}<>".contains(&b[s - 1])) {
            s -= 1;
        }
        (s, String::from_utf8_lossy(&b[s..e]).into_owned())
    };
    let skip = |mut j: usize| {
        while b.get(j).is_some_and(|c| c.is_ascii_whitespace()) {
            j += 1;
        }
        j
    };
    if b[at] == b'(' {
        let j = skip(at + 1);
        if b.get(j) != Some(&b')') {
            return None;
        }
        let body = skip(j + 1);
        if !matches!(b.get(body), Some(b'{' | b'(')) {
            return None;
        }
        let (_, name) = word_before(at);
        return (!name.is_empty() && name != "function").then_some((name, body));
    }
    let (start, name) = word_before(at);
    (word_before(start).1 == "function" && !name.is_empty()).then_some((name, at))
}

/// `word` with every `$name` / `${name}` replaced by `value`; `None` when it names no `name`.
fn substitute(word: &str, name: &str, value: &str) -> Option<String> {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    let mut hit = false;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let braced = after
            .strip_prefix('{')
            .and_then(|a| a.strip_prefix(name))
            .and_then(|a| a.strip_prefix('}'));
        let bare = after
            .strip_prefix(name)
            .filter(|a| !a.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
        match braced.or(bare) {
            Some(tail) => {
                // Never build a word past what the guard reads at all.
                if out.len() + value.len() > shell::MAX_INPUT {
                    return None;
                }
                out.push_str(value);
                rest = tail;
                hit = true;
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    hit.then_some(out)
}
