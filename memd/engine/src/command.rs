//! Command words: what a shell line runs, named the way a memory would name it (`cargo
//! clean`, `npm run db:reset`), and the words of a text for matching those names.
//!
//! Owns the signatures of a command line (parsed by `memd-guard`, wrappers and pipelines
//! included) and which programs are too common to mean anything alone. Pure: must never read
//! the store, the ledger or a setting; the guard (`tools`) and the tool evidence (`evidence`)
//! both build on it.

/// Programs too common to be guarded by name alone: a memory must name a subcommand too.
const UBIQUITOUS: [&str; 24] = [
    "cd", "ls", "cat", "echo", "git", "cargo", "npm", "pnpm", "yarn", "python", "python3", "node",
    "make", "go", "docker", "kubectl", "grep", "find", "rm", "cp", "mv", "sed", "bash", "sh",
];

/// Lower-cased words, split on anything but letters, digits and `-_:` (command names keep
/// their `db:reset`, a sentence's trailing comma goes).
pub fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || "-_:".contains(c)))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// A program too common to mean anything by name alone (`cd`, `git`).
pub fn is_ubiquitous(program: &str) -> bool {
    UBIQUITOUS.contains(&program)
}

/// The commands a shell line runs, as `program subcommand` (`cargo clean`, `git push`) or the
/// program alone: what a memory would name. Parsed by `memd-guard` (the guard's own reading of
/// the line: wrappers, `sh -c`, pipelines and subshells included).
pub fn signatures(command: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in memd_guard::commands(command) {
        let program = c.program.as_str();
        if program.is_empty() || !is_name(program) {
            continue;
        }
        let mut operands = c
            .args
            .iter()
            .map(String::as_str)
            .filter(|w| !w.starts_with('-'))
            .take_while(|w| is_name(w));
        let sig = match operands.next() {
            // `npm run build` and `npm run db:reset` are different commands: a script runner's
            // script is part of what the command is.
            Some(sub) if RUNNERS.contains(&(program, sub)) => match operands.next() {
                Some(script) => format!("{program} {sub} {script}"),
                None => format!("{program} {sub}"),
            },
            Some(sub) => format!("{program} {sub}"),
            None => program.to_string(),
        };
        if !out.contains(&sig) {
            out.push(sig);
        }
    }
    out
}

/// Program and verb pairs whose next word names what runs (a package script, a task).
const RUNNERS: [(&str, &str); 6] = [
    ("npm", "run"),
    ("pnpm", "run"),
    ("yarn", "run"),
    ("bun", "run"),
    ("npm", "exec"),
    ("cargo", "run"),
];

/// A word that can be a subcommand or a script name (`clean`, `db:reset`, `build.prod`).
fn is_name(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_:.".contains(c))
}
