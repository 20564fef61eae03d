//! Repositories and project-aware clients for the per-project tests: a directory that is a git
//! repository with an `origin` (the files git itself writes, so memd reads what it would read in
//! a real clone), hooks run in it, the CLI and the `memd mcp` bridge started in it.

use crate::{Daemon, bin, run_hook};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// `<parent>/<name>`, a repository whose `origin` is `origin` (none: a repository without
/// remotes, identified by its path).
pub fn make_repo(parent: &Path, name: &str, origin: Option<&str>) -> PathBuf {
    let root = parent.join(name);
    let git = root.join(".git");
    std::fs::create_dir_all(git.join("refs/heads")).expect("create .git");
    std::fs::create_dir_all(root.join("src")).expect("create src");
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    let mut config = String::from("[core]\n\trepositoryformatversion = 0\n\tbare = false\n");
    if let Some(url) = origin {
        config.push_str(&format!(
            "[remote \"origin\"]\n\turl = {url}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        ));
    }
    std::fs::write(git.join("config"), config).expect("git config");
    root
}

/// Runs Claude Code's prompt hook in `dir`; the context it printed ("" for none).
pub fn prompt_in(d: &Daemon, dir: &Path, conv: &str, text: &str) -> String {
    let stdin = json!({"session_id": conv, "transcript_path": "/nonexistent", "cwd": dir,
        "hook_event_name": "UserPromptSubmit", "prompt": text});
    let (code, out, _, _) = run_hook("hook-prompt", &[], stdin.to_string().as_bytes(), &d.env());
    assert_eq!(code, 0);
    if out.is_empty() {
        return out;
    }
    let v: Value = serde_json::from_str(&out).expect("hook JSON");
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Runs Claude Code's stop hook in `dir` with the assistant's answer.
pub fn stop_in(d: &Daemon, dir: &Path, conv: &str, answer: &str) {
    let stdin = json!({"session_id": conv, "transcript_path": "/nonexistent", "cwd": dir,
        "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": answer});
    let (code, out, _, _) = run_hook("hook-stop", &[], stdin.to_string().as_bytes(), &d.env());
    assert_eq!((code, out.as_str()), (0, ""));
}

/// The workspace's `memd` CLI with this daemon's environment, run in `dir`.
pub fn memd_in(d: &Daemon, dir: &Path) -> Command {
    let mut cmd = Command::new(bin("memd"));
    for k in memd_testkit::SCRUBBED_ENV {
        cmd.env_remove(k);
    }
    for (k, v) in d.env() {
        cmd.env(k, v);
    }
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

/// A `memd mcp` stdio bridge, initialized, speaking JSON-RPC lines.
pub struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Bridge {
    /// Starts the bridge in `dir` (so its tools work in that directory's project).
    pub fn start_in(d: &Daemon, dir: &Path) -> Bridge {
        let mut child = memd_in(d, dir)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("memd mcp");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut bridge = Bridge {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        let init = bridge.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "memd-tests", "version": "1"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        bridge.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        bridge
    }

    fn send(&mut self, msg: Value) {
        let stdin = self.stdin.as_mut().expect("bridge stdin");
        writeln!(stdin, "{msg}").expect("write to the bridge");
    }

    /// One JSON-RPC request; its answer.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let line = self
            .lines
            .next()
            .expect("an answer")
            .expect("read the bridge");
        serde_json::from_str(&line).expect("JSON-RPC answer")
    }

    /// Calls a tool; the text of its result.
    pub fn tool(&mut self, name: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no tool text in {answer}"))
            .to_string()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
