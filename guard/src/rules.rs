//! Applies the static rules to an [`Action`] and picks the [`Verdict`]. Owns the walk over a
//! command line: every simple command at every level of nesting (`$(…)`, backticks, `<(…)`,
//! `sh -c`, `eval`, `ssh host …`, here-documents and `echo … |` fed to a shell, commands inside
//! interpreter one-liners), with what the rules need to know about its surroundings (the
//! pipeline so far, the directory an earlier `cd` moved to, variables set earlier).
//!
//! Must never do I/O, never panic, and never follow nesting past `MAX_DEPTH` or a fixed work
//! budget. The rules themselves live in `local` (this machine's files), `disk` (block devices
//! and volumes), `damage` (permissions, system files, `.git`), `remote` (git remotes,
//! databases), `infra` (infrastructure, object storage, volumes, key-value stores), `download`
//! (downloads that get run), `exfil` (secrets leaving the machine) and `code` (interpreter
//! one-liners); `paths` holds the path reasoning they share and `vars` what earlier commands
//! of the line set up. Nesting past `MAX_DEPTH` or the budget is itself a finding
//! (`too_nested`): what the guard cannot read it cannot vouch for.

mod code;
mod damage;
mod disk;
mod download;
mod exfil;
mod infra;
mod local;
mod paths;
mod remote;
mod vars;

use crate::Action;
use crate::policy::{Level, Policy};
use crate::shell::{self, Command, MAX_DEPTH, MAX_INPUT, lex};
pub(crate) use vars::LineState;

/// The answer for one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub level: Level,
    /// The rule that decided, `None` when nothing applied.
    pub rule: Option<&'static str>,
    /// One plain sentence for the user naming what was matched; empty when nothing applied.
    pub reason: String,
}

impl Verdict {
    pub fn allow() -> Verdict {
        Verdict {
            level: Level::Allow,
            rule: None,
            reason: String::new(),
        }
    }
}

/// Which rule, if any, `action` falls under, at the level `policy` gives that rule. When several
/// apply the strictest wins; a rule the policy switched off is skipped.
pub fn assess(action: &Action, policy: &Policy) -> Verdict {
    let mut found = Found::default();
    match *action {
        Action::Shell { command } => {
            let mut scan = Scan {
                found: &mut found,
                // Real nesting re-reads a small part of the input; only a hostile one runs
                // out, and then the rest of the nesting is skipped rather than the deadline.
                budget: 4 * MAX_INPUT,
                exfil: exfil::Exfil::default(),
                downloads: Vec::new(),
            };
            scan.line(shell::bounded(command), 0, false);
            exfil::finish(&mut scan);
        }
        Action::ReadFile { path } => {
            let path = shell::bounded(path);
            if let Some(what) = paths::secret_file(path) {
                found.add(
                    "secret_read",
                    format!("reads {what} (`{}`) into the agent's context", clip(path)),
                );
            }
        }
        Action::Mcp { server, tool } => {
            let server = server.trim();
            if !server.is_empty() && !policy.is_mcp_server_approved(server) {
                found.add(
                    "mcp_unapproved",
                    format!(
                        "uses the MCP server `{}`, which is not on the approved list (tool `{}`)",
                        clip(server),
                        clip(tool)
                    ),
                );
            }
        }
    }
    found.verdict(policy)
}

/// The first finding of each rule, in the order found.
#[derive(Default)]
struct Found(Vec<(&'static str, String)>);

impl Found {
    fn add(&mut self, rule: &'static str, reason: String) {
        if !self.0.iter().any(|(r, _)| *r == rule) {
            self.0.push((rule, reason));
        }
    }

    fn verdict(self, policy: &Policy) -> Verdict {
        let mut best = Verdict::allow();
        for (rule, reason) in self.0 {
            let level = policy.level(rule);
            if level > best.level {
                best = Verdict {
                    level,
                    rule: Some(rule),
                    reason,
                };
            }
        }
        best
    }
}

/// At most 80 characters of `s` on one line, for quoting in a reason.
pub(crate) fn clip(s: &str) -> String {
    // Only the head is looked at: reasons are built for every finding, inputs can be 64 KiB.
    let head: String = s
        .trim_start()
        .chars()
        .take(81)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if head.chars().count() <= 80 {
        return head.trim_end().to_string();
    }
    let cut: String = head.chars().take(77).collect();
    format!("{}…", cut.trim_end())
}

/// The walk over one shell action, carrying what spans the whole command line.
pub(crate) struct Scan<'f> {
    found: &'f mut Found,
    /// Bytes that may still be tokenized; nesting stops when it runs out.
    budget: usize,
    pub(crate) exfil: exfil::Exfil,
    /// Files a downloader wrote (base name, downloader), so that running them is recognised.
    pub(crate) downloads: Vec<(String, String)>,
}

/// What the rules see of one simple command.
pub(crate) struct Ctx<'a> {
    pub simple: &'a lex::Simple,
    /// The whole pipeline this command is part of, as written (for quoting in a reason).
    pub pipeline: &'a str,
    pub cmd: &'a Command,
    pub pipe: &'a Pipe,
    pub line: &'a LineState,
    /// Inside `ssh host …`: it runs on another machine.
    pub remote: bool,
}

impl Ctx<'_> {
    /// The simple command as written, for quoting in a reason.
    pub fn snippet(&self) -> String {
        clip(&render(self.simple))
    }

    /// The whole pipeline, when the finding depends on what flows through it.
    pub fn pipeline_snippet(&self) -> String {
        clip(self.pipeline)
    }
}

/// `w` as one shell word.
fn quote(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,~".contains(&b))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// A simple command written back out: quotes where a word needs them, its redirections.
fn render(simple: &lex::Simple) -> String {
    let mut out = String::new();
    let quoted = |w: &lex::Word| {
        let w = w.text.as_str();
        if w.is_empty() || (w.contains(char::is_whitespace) && !w.contains(['`', '('])) {
            format!("\"{}\"", w.replace('"', "\\\""))
        } else {
            w.to_string()
        }
    };
    // Leading keywords (`then rm -rf /`) are syntax, not part of the command.
    let skip = simple
        .words
        .iter()
        .take_while(|w| {
            matches!(
                w.text.as_str(),
                "then" | "do" | "else" | "{" | "!" | "if" | "while" | "until" | "elif"
            )
        })
        .count();
    for w in &simple.words[skip..] {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quoted(w));
    }
    for r in &simple.redirects {
        let op = match r.op {
            lex::RedirOp::Read => "<",
            lex::RedirOp::Write => ">",
            lex::RedirOp::Append => ">>",
            lex::RedirOp::ReadWrite => "<>",
            lex::RedirOp::Dup => ">&",
            lex::RedirOp::HereString => "<<<",
            lex::RedirOp::HereDoc => "<<EOF",
        };
        out.push(' ');
        out.push_str(op);
        if r.op != lex::RedirOp::HereDoc {
            out.push(' ');
            out.push_str(&quoted(&r.target));
        }
    }
    out
}

/// What the earlier stages of the current pipeline contribute to a later one.
#[derive(Default)]
pub(crate) struct Pipe {
    /// A catastrophic path printed earlier (`echo / | xargs rm -rf`): (what, literal).
    pub rootish: Option<(String, String)>,
    pub download: Option<String>,
    /// What earlier stages print for a later one to read: `echo`/`printf` arguments and
    /// here-documents (`echo "DROP DATABASE x" | psql`, `echo "rm -rf /" | sh`).
    pub fed: String,
    /// How much of `fed` a shell later in the pipeline has already been checked for: a chain
    /// of `| sh | sh | …` must not re-read it once per stage.
    fed_checked: std::cell::Cell<usize>,
}

const MAX_FED: usize = 8 * 1024;

impl Pipe {
    fn absorb(&mut self, simple: &lex::Simple, cmd: Option<&Command>) {
        for r in &simple.redirects {
            if matches!(r.op, lex::RedirOp::HereDoc | lex::RedirOp::HereString) {
                self.feed(&r.target.text);
            }
        }
        let Some(cmd) = cmd else { return };
        match cmd.program.as_str() {
            "echo" => {
                let flags = cmd.args.iter().take_while(|a| is_echo_flag(a)).count();
                let text = cmd.args[flags..].join(" ");
                let escapes = cmd.args[..flags].iter().any(|f| f.contains('e'));
                self.feed(&if escapes {
                    lex::decode_escapes(&text)
                } else {
                    text
                });
            }
            "printf" => {
                for a in &cmd.args {
                    self.feed(&lex::decode_escapes(a));
                }
            }
            p if download::is_downloader(p) => {
                self.download.get_or_insert_with(|| p.to_string());
            }
            _ => {}
        }
        if self.rootish.is_none() && !local::narrowed_find(cmd) {
            self.rootish = cmd.args.iter().find_map(|a| {
                let comps = paths::resolve(a, None)?;
                paths::catastrophic(&comps).map(|what| (what, a.clone()))
            });
        }
    }

    fn feed(&mut self, text: &str) {
        if self.fed.len() + text.len() < MAX_FED {
            self.fed.push_str(text);
            self.fed.push('\n');
        }
    }
}

fn is_echo_flag(a: &str) -> bool {
    a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| matches!(b, b'n' | b'e' | b'E'))
}

impl Scan<'_> {
    /// An interpreter's program text: fork loops, and the shell commands it hands on.
    fn code(&mut self, ctx: &Ctx, src: &str, depth: usize) {
        if code::forks_forever(src) {
            self.add(
                "fork_bomb",
                format!(
                    "fork bomb: a `{}` program that forks in an endless loop (`{}`)",
                    ctx.cmd.program,
                    ctx.snippet()
                ),
            );
        }
        for text in code::shell_strings(src, &ctx.cmd.program) {
            self.line(&text, depth + 1, ctx.remote);
        }
    }

    pub(crate) fn add(&mut self, rule: &'static str, reason: String) {
        self.found.add(rule, reason);
    }

    /// Analyses `text` as a command line `depth` levels down.
    pub(crate) fn line(&mut self, text: &str, depth: usize, remote: bool) {
        self.line_in(text, depth, remote, LineState::default());
    }

    /// Analyses `text` with what an enclosing line established (a function's arguments).
    fn line_in(&mut self, text: &str, depth: usize, remote: bool, mut state: LineState) {
        if text.trim().is_empty() {
            return;
        }
        // What the guard cannot read to the end it cannot vouch for: ask, as for a command
        // longer than it reads.
        if depth > MAX_DEPTH || text.len() > self.budget {
            let why = if depth > MAX_DEPTH {
                format!("nested deeper than the {MAX_DEPTH} levels the guard follows")
            } else {
                "more nested command text than the guard reads".to_string()
            };
            self.add("too_nested", format!("{why} (`{}`)", clip(text)));
            return;
        }
        self.budget -= text.len();
        if let Some(reason) = local::fork_bomb(text) {
            self.add("fork_bomb", reason);
        }
        for (name, body) in vars::functions(text) {
            vars::push_def(&mut state.functions, &name, &body);
        }
        let simples = lex::parse(text);
        let rendered: Vec<String> = simples.iter().map(render).collect();
        let mut pipeline_text = String::new();
        let mut pipe = Pipe::default();
        let mut pipe_id = usize::MAX;
        for (k, simple) in simples.iter().enumerate() {
            if simple.pipeline != pipe_id {
                pipe = Pipe::default();
                pipe_id = simple.pipeline;
                let stages = simples[k..]
                    .iter()
                    .take_while(|s| s.pipeline == pipe_id)
                    .count();
                pipeline_text = rendered[k..k + stages].join(" | ");
            }
            for w in simple
                .words
                .iter()
                .chain(simple.redirects.iter().map(|r| &r.target))
            {
                for sub in &w.subs {
                    self.line(&sub.body, depth + 1, remote);
                }
            }
            let texts: Vec<String> = simple
                .words
                .iter()
                .map(|w| state.substitute_single(&w.text))
                .collect();
            if let Some(text) = texts.first().and_then(|w| state.alias(w)) {
                let rest: Vec<String> = texts[1..].iter().map(|w| quote(w)).collect();
                let expanded = format!("{text} {}", rest.join(" "));
                self.line(&expanded, depth + 1, remote);
            }
            let cmd = if state.note(&texts) {
                None
            } else {
                Command::from_words(&texts)
            };
            // `> /dev/sda` needs no command to do its damage.
            disk::redirects(simple, self);
            damage::redirects(simple, self);
            if let Some(cmd) = &cmd {
                let ctx = Ctx {
                    simple,
                    pipeline: &pipeline_text,
                    cmd,
                    pipe: &pipe,
                    line: &state,
                    remote,
                };
                self.command(&ctx, depth);
                self.call(&state, cmd, depth, remote);
                if cmd.program == "read"
                    && let Some(r) = simple
                        .redirects
                        .iter()
                        .find(|r| r.op == lex::RedirOp::HereString)
                {
                    state.read_here(cmd, &r.target.text);
                }
                state.after(cmd);
            }
            pipe.absorb(simple, cmd.as_ref());
        }
    }

    /// A call of a function defined in the line: its body, with the call's arguments as
    /// `$1`, `$@`… (a function does not follow a call of itself).
    fn call(&mut self, state: &LineState, cmd: &Command, depth: usize, remote: bool) {
        let Some((name, body)) = state
            .functions
            .iter()
            .find(|(n, _)| *n == cmd.program)
            .cloned()
        else {
            return;
        };
        let mut inner = state.clone();
        inner.functions.retain(|(n, _)| *n != name);
        inner.positional(&cmd.args);
        self.line_in(&body, depth + 1, remote, inner);
    }

    fn command(&mut self, ctx: &Ctx, depth: usize) {
        let cmd = ctx.cmd;
        if let Some((text, remote)) = cmd.nested() {
            self.line(&text, depth + 1, ctx.remote || remote);
            // `echo / | xargs -I{} sh -c "rm -rf {}"`: the fed word takes the placeholder's place.
            if let Some((_, literal)) = local::xargs_fed(ctx) {
                let placeholder = local::xargs_placeholder(ctx.simple);
                if text.contains(&placeholder) {
                    let filled = text.replace(&placeholder, &literal);
                    self.line(&filled, depth + 1, ctx.remote || remote);
                }
            }
        }
        for src in code::inline_code(cmd) {
            self.code(ctx, &src, depth);
        }
        let scheduler = shell::runs_stdin_as_commands(cmd);
        if download::reads_code_from_stdin(cmd) || scheduler {
            // An interpreter reading its program from a here-document or an `echo … |` runs
            // that text: as a command line for a shell, as a one-liner for the others.
            let mut stdin: Vec<&str> = ctx
                .simple
                .redirects
                .iter()
                .filter(|r| matches!(r.op, lex::RedirOp::HereDoc | lex::RedirOp::HereString))
                .map(|r| r.target.text.as_str())
                .collect();
            if ctx.simple.stage > 0 && ctx.pipe.fed.len() > ctx.pipe.fed_checked.get() {
                ctx.pipe.fed_checked.set(ctx.pipe.fed.len());
                stdin.push(&ctx.pipe.fed);
            }
            for text in stdin {
                if shell::is_shell(&cmd.program) || scheduler {
                    self.line(text, depth + 1, ctx.remote);
                } else {
                    self.code(ctx, text, depth);
                }
            }
        }
        local::check(ctx, self);
        disk::disk_wipe(ctx, self);
        damage::check(ctx, self);
        remote::check(ctx, self);
        infra::check(ctx, self);
        download::check(ctx, self);
        exfil::note(ctx, self);
    }
}
