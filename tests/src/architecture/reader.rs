//! One file's items: the modules it declares and the paths it names.
//!
//! Owns walking the tokens item by item: `mod x;` (with `#[path]`) and inline `mod x { … }`,
//! `#[cfg(test)]` items skipped whole, and every `crate::`, `self::` and `super::` path (use
//! trees with nested groups included) resolved to an absolute module path. Must never guess
//! what a bare name refers to: only those three roots are followed.

use super::tokens::Tok;
use super::{Import, ModPath, workspace_root};
use std::path::{Path, PathBuf};

pub struct Reader<'a> {
    pub tokens: &'a [(Tok, usize)],
    pub i: usize,
    pub file: String,
    /// Declared `mod x;`: module path, file, whether that file owns its folder.
    pub modules: Vec<(ModPath, PathBuf, bool)>,
    pub imports: Vec<Import>,
}

impl Reader<'_> {
    fn peek(&self, k: usize) -> Option<&Tok> {
        self.tokens.get(self.i + k).map(|t| &t.0)
    }

    fn ident(&self, k: usize) -> Option<&str> {
        match self.peek(k) {
            Some(Tok::Ident(w)) => Some(w),
            _ => None,
        }
    }

    /// Reads items of module `path` until the `}` closing depth `depth` (or the end).
    pub fn items(&mut self, path: &ModPath, child_dir: &Path, file_dir: &Path, depth: usize) {
        let mut test_only = false;
        let mut path_attr: Option<String> = None;
        while let Some(tok) = self.peek(0).cloned() {
            match tok {
                Tok::Punct('#') => {
                    let (is_test, p) = self.attribute();
                    test_only |= is_test;
                    path_attr = p.or(path_attr);
                    continue;
                }
                Tok::Punct('}') if depth > 0 => {
                    self.i += 1;
                    return;
                }
                _ => {}
            }
            if test_only {
                self.skip_item();
            } else if let Some(name) = self.module_decl() {
                let mut child = path.clone();
                child.push(name.clone());
                if self.peek(0) == Some(&Tok::Punct('{')) {
                    self.i += 1;
                    self.items(&child, &child_dir.join(&name), file_dir, depth + 1);
                } else {
                    let (file, owns) = match path_attr.take() {
                        Some(p) => (file_dir.join(p), true),
                        None if child_dir.join(format!("{name}.rs")).is_file() => {
                            (child_dir.join(format!("{name}.rs")), false)
                        }
                        None => (child_dir.join(&name).join("mod.rs"), true),
                    };
                    self.modules.push((child, file, owns));
                }
            } else {
                let before = self.i;
                self.item(path);
                if self.i == before {
                    // A stray closer at the file's top level.
                    self.i += 1;
                }
            }
            test_only = false;
            path_attr = None;
        }
    }

    /// At `#[…]` or `#![…]`: skips it; whether it is a `cfg` that needs `test`, and a `path`.
    fn attribute(&mut self) -> (bool, Option<String>) {
        self.i += 1;
        if self.peek(0) == Some(&Tok::Punct('!')) {
            self.i += 1;
        }
        let start = self.i;
        self.skip_balanced();
        let body = &self.tokens[start..self.i];
        let has = |w: &str| body.iter().any(|t| t.0 == Tok::Ident(w.into()));
        let inner = self.tokens.get(start + 1).map(|t| &t.0);
        let is_cfg = inner == Some(&Tok::Ident("cfg".into()));
        let is_test = is_cfg && has("test") && !has("not");
        // `#[path = "x.rs"]`: the literal was dropped by the tokenizer, so read the source.
        let path = (inner == Some(&Tok::Ident("path".into()))).then(|| self.path_literal(start));
        (is_test, path.flatten())
    }

    /// The string of a `#[path = "…"]` attribute, from the source line it is on.
    fn path_literal(&self, start: usize) -> Option<String> {
        let line = self.tokens.get(start)?.1;
        let text = std::fs::read_to_string(workspace_root().join(&self.file)).ok()?;
        let l = text.lines().nth(line - 1)?;
        let (_, rest) = l.split_once('"')?;
        Some(rest.split_once('"')?.0.to_string())
    }

    /// Skips one bracketed group starting at the current token (`[…]`, `(…)`, `{…}`).
    fn skip_balanced(&mut self) {
        let mut depth = 0i32;
        while let Some(t) = self.peek(0).cloned() {
            self.i += 1;
            match t {
                Tok::Punct('[' | '(' | '{') => depth += 1,
                Tok::Punct(']' | ')' | '}') => depth -= 1,
                _ => {}
            }
            if depth <= 0 {
                return;
            }
        }
    }

    /// Skips a whole item: up to its `;` or its first top-level `{…}` (and a `;` after it).
    fn skip_item(&mut self) {
        while let Some(t) = self.peek(0).cloned() {
            match t {
                Tok::Punct(';') => {
                    self.i += 1;
                    return;
                }
                Tok::Punct('{') => {
                    self.skip_balanced();
                    if self.peek(0) == Some(&Tok::Punct(';')) {
                        self.i += 1;
                    }
                    return;
                }
                Tok::Punct('(' | '[') => self.skip_balanced(),
                _ => self.i += 1,
            }
        }
    }

    /// At `[pub[(…)]] mod name`: consumes it up to the `;` or `{` and returns the name.
    fn module_decl(&mut self) -> Option<String> {
        let mut k = 0;
        if self.ident(0) == Some("pub") {
            k = 1;
            if self.peek(1) == Some(&Tok::Punct('(')) {
                let save = self.i;
                self.i += 1;
                self.skip_balanced();
                k = self.i - save;
                self.i = save;
            }
        }
        if self.ident(k) != Some("mod") {
            return None;
        }
        let name = self.ident(k + 1)?.to_string();
        self.i += k + 2;
        if self.peek(0) == Some(&Tok::Punct(';')) {
            self.i += 1;
        }
        Some(name)
    }

    /// One item (or stray token) of module `path`: records the paths in it, including those in
    /// nested blocks, with nested `#[cfg(test)]` items skipped.
    fn item(&mut self, path: &ModPath) {
        let mut depth = 0i32;
        while let Some(t) = self.peek(0).cloned() {
            match t {
                Tok::Punct('#') => {
                    if self.attribute().0 {
                        self.skip_item();
                    }
                    continue;
                }
                Tok::Ident(w) if matches!(w.as_str(), "crate" | "self" | "super") => {
                    self.path_at(path);
                    continue;
                }
                Tok::Punct('{' | '(' | '[') => depth += 1,
                Tok::Punct('}' | ')' | ']') => {
                    if depth == 0 {
                        // The enclosing module's `}`: leave it for `items`.
                        return;
                    }
                    depth -= 1;
                    if depth == 0 && t == Tok::Punct('}') {
                        self.i += 1;
                        if self.peek(0) == Some(&Tok::Punct(';')) {
                            self.i += 1;
                        }
                        return;
                    }
                }
                Tok::Punct(';') if depth == 0 => {
                    self.i += 1;
                    return;
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// At `crate`, `self` or `super`: records every path of the (use) tree starting here.
    fn path_at(&mut self, path: &ModPath) {
        let line = self.tokens[self.i].1;
        let mut base: ModPath = Vec::new();
        // `self`/`super` as a lone word (a method's receiver) names no module.
        match self.ident(0) {
            Some("crate") if self.peek(1) == Some(&Tok::Path) => {}
            Some("self") if self.peek(1) == Some(&Tok::Path) => base = path.clone(),
            Some("super") if self.peek(1) == Some(&Tok::Path) => {
                base = path.clone();
                base.pop();
            }
            _ => {
                self.i += 1;
                return;
            }
        }
        self.i += 2;
        while self.ident(0) == Some("super") && self.peek(1) == Some(&Tok::Path) {
            base.pop();
            self.i += 2;
        }
        let mut found = Vec::new();
        self.tree(base, &mut found);
        for to in found {
            self.imports.push(Import {
                from: path.clone(),
                to,
                at: format!("{}:{line}", self.file),
            });
        }
    }

    /// Reads `a::b::{c, d::e}` after a `::`, pushing each full path.
    fn tree(&mut self, mut prefix: ModPath, found: &mut Vec<ModPath>) {
        loop {
            match self.peek(0).cloned() {
                Some(Tok::Ident(w)) if w != "self" => {
                    prefix.push(w);
                    self.i += 1;
                }
                Some(Tok::Ident(_)) => self.i += 1,
                Some(Tok::Punct('{')) => {
                    self.i += 1;
                    while let Some(t) = self.peek(0).cloned() {
                        match t {
                            Tok::Punct('}') => {
                                self.i += 1;
                                break;
                            }
                            Tok::Punct(',') => self.i += 1,
                            _ => {
                                let before = self.i;
                                self.tree(prefix.clone(), found);
                                if self.i == before {
                                    self.i += 1;
                                }
                            }
                        }
                    }
                    return;
                }
                _ => break,
            }
            if self.peek(0) == Some(&Tok::Path) {
                self.i += 1;
            } else {
                break;
            }
        }
        found.push(prefix);
    }
}
