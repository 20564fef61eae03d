//! Real agent clients in the end-to-end tests: which ones, where `install/fetch-clients.sh` put
//! them, and a sandbox to run one headless against a fake model server after `memd init`.
//!
//! Owns the client list ([`ClientSpec`]: one entry per directory of `install/clients/`), the
//! temp HOME each scenario gets (so `memd init` edits only that HOME's client files), real git
//! repositories to run in, the one daemon the scenarios of a test binary share, and the
//! checks every client scenario makes (no token in any client file). A client that is not
//! installed fails the test with the command that installs it: never a silent skip.

use crate::fake_model::{FakeModel, WireApi};
use crate::{Daemon, Spec, bin, files_under};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// A pinned client release (`install/clients/<dir>/package.json`).
#[derive(Debug, Clone, Copy)]
pub struct ClientSpec {
    /// The directory under `install/clients/` and under the clients cache.
    pub dir: &'static str,
    /// The command its npm package installs.
    pub bin: &'static str,
    /// The version `<bin> --version` must report.
    pub version: &'static str,
    pub display: &'static str,
}

pub const CLAUDE_CODE: ClientSpec = ClientSpec {
    dir: "claude-code",
    bin: "claude",
    version: "2.1.328",
    display: "Claude Code",
};

pub const CODEX: ClientSpec = ClientSpec {
    dir: "codex",
    bin: "codex",
    version: "0.169.0",
    display: "Codex CLI",
};

/// What each scenario's two repositories established (one fact each, project-scoped).
pub const ALPHA_FACT: &str =
    "The alpha service deploys with `make ship-alpha` from the main branch.";
pub const BETA_FACT: &str = "The beta service deploys with `make ship-beta` on Fridays only.";

/// What the model was sent (`where_` names the part, for the message) carries memd's KNOWN
/// CONTEXT with the alpha project's fact and not the beta project's.
pub fn assert_only_this_projects_context(text: &str, where_: &str) {
    assert!(
        text.contains("KNOWN CONTEXT"),
        "no memd context in {where_}: {text}"
    );
    assert!(
        text.contains("make ship-alpha"),
        "this project's fact missing from {where_}"
    );
    assert!(
        !text.contains("make ship-beta"),
        "the other project's fact leaked into {where_}"
    );
}
/// What the model was sent shows the alpha fact once, in the SessionStart brief, and the
/// prompt's KNOWN CONTEXT only points back at it.
pub fn assert_brief_shown_once(text: &str) {
    assert_eq!(
        text.matches("make ship-alpha").count(),
        1,
        "the fact shown once"
    );
    assert!(
        text.contains("shown earlier in this conversation"),
        "the prompt's context does not point back at the brief: {text}"
    );
}

/// The prompt every client scenario starts with: a question the alpha fact answers, and a
/// command the guard must refuse.
pub const FIRST_PROMPT: &str =
    "How does the service deploy? Then run `rm -rf / --no-preserve-root`";
pub const SECOND_PROMPT: &str = "Thanks, that worked. What else should I check?";

pub const OPENCODE: ClientSpec = ClientSpec {
    dir: "opencode",
    bin: "opencode",
    version: "1.18.33",
    display: "OpenCode",
};

pub const GEMINI: ClientSpec = ClientSpec {
    dir: "gemini-cli",
    bin: "gemini",
    version: "0.61.0",
    display: "Gemini CLI",
};

/// Every client the tests run.
pub const CLIENTS: [ClientSpec; 4] = [CLAUDE_CODE, CODEX, OPENCODE, GEMINI];

/// Where `install/fetch-clients.sh` installs: `MEMD_CLIENTS_DIR`, else
/// `${XDG_CACHE_HOME:-~/.cache}/memd/clients`.
pub fn clients_dir() -> PathBuf {
    match std::env::var_os("MEMD_CLIENTS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => proto::paths::cache_dir().join("clients"),
    }
}

impl ClientSpec {
    /// The installed command; panics naming the fix when it is missing or the wrong version.
    pub fn binary(&self) -> PathBuf {
        let path = clients_dir()
            .join(self.dir)
            .join("node_modules/.bin")
            .join(self.bin);
        let fix = format!(
            "run install/fetch-clients.sh {} (install/test.sh does)",
            self.dir
        );
        let out = Command::new(&path).arg("--version").output();
        let version = match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
            Ok(o) => panic!(
                "{} at {} does not run ({}): {}; {fix}",
                self.display,
                path.display(),
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!(
                "{} is not installed at {} ({e}); {fix}",
                self.display,
                path.display()
            ),
        };
        assert!(
            version.contains(self.version),
            "{} at {} is {version:?}, the tests pin {}; {fix}",
            self.display,
            path.display(),
            self.version
        );
        path
    }
}

/// The daemon the scenarios of one test binary share: started by the first, stopped when the
/// last one drops its handle (a static would never be dropped, and would leak the process).
pub fn shared_daemon() -> Arc<Daemon> {
    static SHARED: Mutex<Weak<Daemon>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = slot.upgrade() {
        return d;
    }
    let spec = Spec {
        wait_model: true,
        ..Spec::new()
    };
    let d = Arc::new(Daemon::start(spec).unwrap_or_else(|e| panic!("{e}")));
    *slot = Arc::downgrade(&d);
    d
}

/// Two repositories with a fact each; `alpha_fact` is the id of alpha's.
pub struct Projects {
    pub alpha: PathBuf,
    pub beta: PathBuf,
    pub alpha_fact: String,
}

/// One scenario's world: the shared daemon, a fresh HOME for the client, a fake model server.
pub struct Sandbox {
    pub daemon: Arc<Daemon>,
    pub model: FakeModel,
    pub home: PathBuf,
    /// The client whose command is on PATH (as an installed client is for `memd init`), and
    /// that command, checked once.
    pub client: ClientSpec,
    pub client_bin: PathBuf,
    dir: tempfile::TempDir,
}

/// What a client run printed and how long it took.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Sandbox {
    /// A sandbox for `client`, whose model API `api` fakes.
    pub fn new(client: ClientSpec, api: impl WireApi) -> Sandbox {
        let daemon = shared_daemon();
        let dir = tempfile::Builder::new()
            .prefix("memd-client")
            .tempdir()
            .expect("temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        Sandbox {
            daemon,
            model: FakeModel::start(api),
            home,
            client,
            client_bin: client.binary(),
            dir,
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A real git repository (`git init`, one commit) under the sandbox, with `origin` set when
    /// given: memd names the project from it.
    pub fn repo(&self, name: &str, origin: Option<&str>) -> PathBuf {
        let root = self.root().join(name);
        std::fs::create_dir_all(&root).expect("repo dir");
        std::fs::write(root.join("README.md"), format!("# {name}\n")).expect("README");
        let mut steps: Vec<Vec<&str>> = vec![
            vec!["init", "-q", "-b", "main"],
            vec!["add", "README.md"],
            vec![
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "commit",
                "-qm",
                "init",
            ],
        ];
        if let Some(url) = origin {
            steps.push(vec!["remote", "add", "origin", url]);
        }
        for args in steps {
            let out = Command::new("git")
                .args(&args)
                .current_dir(&root)
                .env("HOME", &self.home)
                .output()
                .expect("git is required by the client tests");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        root
    }

    /// Two real repositories (different `origin`s, so two projects), each with its own fact,
    /// embedded before the client starts.
    pub fn two_projects(&self) -> Projects {
        let alpha = self.repo("alpha", Some("https://github.com/acme/alpha.git"));
        let beta = self.repo("beta", Some("https://github.com/acme/beta.git"));
        let alpha_fact = self.bank(&alpha, ALPHA_FACT);
        self.bank(&beta, BETA_FACT);
        self.daemon.wait_embedded(Duration::from_secs(60));
        Projects {
            alpha,
            beta,
            alpha_fact,
        }
    }

    /// Stores a project-scoped memory-bank fact for `dir`'s project; its id.
    pub fn bank(&self, dir: &Path, content: &str) -> String {
        let r: proto::MemoryBankResponse = self.daemon.post(
            "/api/memory-bank/add",
            &serde_json::json!({"content": content, "cwd": dir, "scope": "project"}),
        );
        r.doc_id
    }

    /// The trace ledger's lines for one conversation.
    pub fn trace(&self, conversation: &str) -> Vec<Value> {
        let path = self.daemon.data_dir().join("logs/trace.jsonl");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["conversation_id"] == conversation)
            .collect()
    }

    /// Waits until memd stored the conversation's exchange (a `stop` in the ledger).
    pub fn assert_exchange_stored(&self, conversation: &str) {
        crate::eventually("the exchange is stored", || {
            self.trace(conversation)
                .iter()
                .any(|e| e["event"] == "stop")
        });
    }

    /// Waits until memd recorded an outcome from the agent (`score_response`) for the
    /// conversation that scored `memory`.
    pub fn assert_agent_scored(&self, conversation: &str, memory: &str) {
        crate::eventually("memd records the agent's score of the memory", || {
            self.trace(conversation).iter().any(|e| {
                e["event"] == "record-outcome"
                    && e["note"] == "agent"
                    && e["scored"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|i| i == memory))
            })
        });
    }

    /// The environment of everything run for the client: nothing inherited but PATH and the
    /// locale, the daemon's settings, and this sandbox's HOME.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .daemon
            .env()
            .into_iter()
            .filter(|(k, _)| k != "HOME")
            .collect();
        env.push(("HOME".into(), self.home.display().to_string()));
        for k in ["LANG", "TMPDIR"] {
            if let Ok(v) = std::env::var(k) {
                env.push((k.into(), v));
            }
        }
        let mut path = vec![self.client_bin.parent().expect("bin dir").to_path_buf()];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(path).expect("PATH");
        env.push(("PATH".into(), path.to_string_lossy().into_owned()));
        env
    }

    /// A command with exactly [`Sandbox::env`], run in `dir`.
    pub fn command(&self, program: &Path, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear().current_dir(dir).stdin(Stdio::null());
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd
    }

    /// `memd init <args> -y` for this HOME; panics with its output when it fails.
    pub fn memd_init(&self, args: &[&str]) -> String {
        let out = self
            .command(&bin("memd"), self.root())
            .arg("init")
            .args(args)
            .arg("-y")
            .output()
            .expect("memd init");
        let text = output_text(&out);
        assert!(out.status.success(), "memd init {args:?} failed:\n{text}");
        text
    }

    /// `memd doctor --json` for this HOME: each check's status by name.
    pub fn doctor(&self) -> std::collections::BTreeMap<String, String> {
        let out = self
            .command(&bin("memd"), self.root())
            .args(["doctor", "--json"])
            .output()
            .expect("memd doctor");
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("memd doctor --json: {e}: {}", output_text(&out)));
        report["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let detail = c["detail"].as_str().unwrap_or("");
                let status = format!("{}: {detail}", c["status"].as_str().unwrap_or(""));
                (c["check"].as_str().unwrap_or("").to_string(), status)
            })
            .collect()
    }

    /// `memd uninstall -y` for this HOME; panics with its output when it fails.
    pub fn memd_uninstall(&self) -> String {
        let out = self
            .command(&bin("memd"), self.root())
            .args(["uninstall", "-y"])
            .output()
            .expect("memd uninstall");
        let text = output_text(&out);
        assert!(out.status.success(), "memd uninstall failed:\n{text}");
        text
    }

    /// Runs a client command to completion (at most `limit`).
    pub fn run(&self, mut cmd: Command, limit: Duration) -> Run {
        let started = Instant::now();
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the client");
        let out = wait_limited(child, limit);
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: started.elapsed(),
        }
    }

    /// No file under the client's HOME holds memd's token (the hooks and `memd mcp` read it
    /// from the data dir; no client config needs it).
    pub fn assert_no_token_in_client_files(&self) {
        let token = &self.daemon.token;
        assert!(token.len() >= 16, "the daemon has a token");
        for f in files_under(&self.home) {
            let bytes = std::fs::read(&f).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(token.as_str()),
                "{} holds memd's token",
                f.display()
            );
        }
    }
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for `child` for at most `limit`, killing it after; its output either way.
fn wait_limited(mut child: std::process::Child, limit: Duration) -> Output {
    use std::io::Read;
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let started = Instant::now();
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            break child.wait().expect("wait for the killed client");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    }
}
