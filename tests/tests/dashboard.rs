//! The dashboard in a real browser: headless Chromium over WebDriver against a real daemon.
//!
//! One journey logs in through `memd ui --print-url`, searches, opens a memory, edits and
//! archives it (checked through the HTTP API), reads the conversation and health pages, uploads
//! and removes a book, and checks keyboard reach and 200 % zoom; screenshots of every page go to
//! `target/ui-screens/`. The refusals: a forged cross-site POST (from another local page, and
//! by hand without the token or with a foreign Origin), a reused and an expired login link.
//! Needs `install/fetch-chromium.sh` (the test command runs it). Must never pass when a page
//! or a check is missing: each step asserts what the user would see, and changes are read back
//! through the HTTP API, not the page.

use proto::MemoryView;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;
use tests::browser::{Browser, key};
use tests::{Daemon, Spec};

const WAIT: Duration = Duration::from_secs(20);
const FACT: &str = "The staging database listens on port 5433, not the default 5432";
const EDITED: &str = "The staging database listens on port 6543 since the November migration";

/// `path` on the dashboard's own host name (`memd-<mac>.localhost`, which Chromium resolves to
/// loopback) and the daemon's port.
fn ui(d: &Daemon, path: &str) -> String {
    format!(
        "http://{}:{}{path}",
        memd_client::proof::dashboard_host(&d.token),
        d.port
    )
}

fn browser() -> Browser {
    Browser::start().unwrap_or_else(|e| panic!("{e}"))
}

fn screens() -> PathBuf {
    tests::bin_dir()
        .parent()
        .expect("target dir")
        .join("ui-screens")
}

/// `memd ui --print-url`, run as the user would, against `d`.
fn login_link(d: &Daemon) -> String {
    let out = std::process::Command::new(tests::bin("memd"))
        .args(["ui", "--print-url"])
        .envs(d.env())
        .output()
        .expect("run memd ui");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        url.starts_with(&ui(d, "/ui/login?code=")),
        "a one-time link on the dashboard's own host name and the daemon's port: {url}"
    );
    url
}

/// `memd ui` with `$BROWSER` set to a script that records what it was asked to open: the
/// address of a private file that moves on to the login link (never the link itself: a
/// command line is readable by other users). Returns that address and the link in the file.
fn opened_by_memd_ui(d: &Daemon) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("opened");
    let script = dir.path().join("browser.sh");
    std::fs::write(
        &script,
        // Written whole, then renamed: the test never reads a half-written file.
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > '{0}.tmp' && mv '{0}.tmp' '{0}'\n",
            seen.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(tests::bin("memd"))
        .arg("ui")
        .envs(d.env())
        .env("BROWSER", &script)
        .output()
        .expect("run memd ui");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said.contains("code="),
        "the link is handed over, not printed: {said}"
    );
    tests::eventually("the browser script ran", || seen.exists());
    let opened = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !opened.contains("code="),
        "no code on a command line: {opened}"
    );
    let file = opened.strip_prefix("file://").expect("a file address");
    assert!(file.starts_with(d.data_dir().to_str().unwrap()), "{file}");
    let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "only the user reads the file holding the code");
    let page = std::fs::read_to_string(file).unwrap();
    let start = page
        .find(&ui(d, "/ui/login?code="))
        .expect("the link in the page");
    let link: String = page[start..].chars().take_while(|c| *c != '"').collect();
    (opened, link)
}

fn add_fact(d: &Daemon, content: &str, tags: &[&str]) -> String {
    let r: Value = d.post(
        "/api/memory-bank/add",
        &json!({"content": content, "tags": tags}),
    );
    r["doc_id"].as_str().expect("doc_id").to_string()
}

/// Two turns of a conversation through the hook API: the fact is injected in the first and
/// scored `worked` at the second prompt.
fn converse(d: &Daemon, conversation: &str) {
    let prompt = |q: &str| -> Value {
        d.post(
            "/api/hooks/get-context",
            &json!({"query": q, "conversation_id": conversation}),
        )
    };
    let stop = |user: &str| {
        let _: Value = d.post(
            "/api/hooks/stop",
            &json!({"conversation_id": conversation, "user_message": user,
                    "assistant_response": "Connected to staging on the configured port."}),
        );
    };
    let first = prompt("which port does the staging database listen on?");
    let injected: Vec<String> = first["relevant_memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| m["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!injected.is_empty(), "the fact is injected: {first}");
    stop("connect to the staging database");
    let second = prompt("now run the migration against staging");
    assert_eq!(second["scoring_required"], true, "{second}");
    let scores: serde_json::Map<String, Value> = injected
        .iter()
        .map(|id| (id.clone(), json!("worked")))
        .collect();
    let _: Value = d.post(
        "/api/record-outcome",
        &json!({"conversation_id": conversation, "outcome": "worked", "memory_scores": scores}),
    );
    stop("run the migration");
}

fn memory(d: &Daemon, id: &str) -> MemoryView {
    let r: proto::SearchResponse =
        d.post("/api/search", &json!({"id": id, "include_archived": true}));
    r.results.into_iter().next().expect("memory found by id")
}

fn text_of(b: &Browser, css: &str) -> String {
    b.wait_for(css, WAIT)
        .and_then(|e| e.text())
        .unwrap_or_else(|e| {
            let url = b.current_url().unwrap_or_default();
            let page = b.find("body").and_then(|p| p.text()).unwrap_or_default();
            panic!("{e}\nat {url}:\n{page:.2000}")
        })
}

fn click(b: &Browser, css: &str) {
    b.find(css)
        .and_then(|e| e.click())
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Waits until the browser has navigated to an address containing `part` (after a form post
/// the old page stays until the answer arrives).
fn wait_for_url(b: &Browser, part: &str) {
    let start = std::time::Instant::now();
    loop {
        let url = b.current_url().unwrap_or_default();
        if url.contains(part) {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "never reached {part}: still at {url}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every link and control of the page is reached by Tab alone.
fn assert_keyboard_reaches_everything(b: &Browser, page: &str) {
    let focusables = "a[href], button, input:not([type=hidden]), select, textarea";
    let total = b
        .execute(
            &format!("return document.querySelectorAll('{focusables}').length"),
            vec![],
        )
        .unwrap();
    let total = total.as_u64().unwrap() as usize;
    let mut seen = std::collections::BTreeSet::new();
    b.execute(
        "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)",
        vec![],
    )
    .unwrap();
    b.find("body").unwrap().send_keys("").ok();
    for _ in 0..total + 4 {
        b.send_keys_to_active(key::TAB).unwrap();
        let at = b
            .execute(
                &format!(
                    "return Array.from(document.querySelectorAll('{focusables}')).indexOf(document.activeElement)"
                ),
                vec![],
            )
            .unwrap();
        if let Some(i) = at.as_i64().filter(|i| *i >= 0) {
            seen.insert(i);
        }
    }
    assert_eq!(
        seen.len(),
        total,
        "{page}: Tab reaches {} of {total} controls",
        seen.len()
    );
}

/// At 200 % zoom (a 1280-wide window shows 640 CSS pixels) nothing needs sideways scrolling.
fn assert_reflows_at_200_percent(b: &Browser, page: &str) {
    b.set_window_size(640, 900).unwrap();
    let fits = b
        .execute(
            "return document.documentElement.scrollWidth <= window.innerWidth",
            vec![],
        )
        .unwrap();
    b.set_window_size(1280, 900).unwrap();
    assert_eq!(fits, json!(true), "{page} scrolls sideways at 200 %");
}

#[test]
fn log_in_search_open_edit_archive_and_every_page() {
    let d = Daemon::start(Spec {
        wait_model: true,
        ..Spec::new()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let fact = add_fact(&d, FACT, &["database", "staging"]);
    add_fact(
        &d,
        "Release builds are signed with the key in the team vault",
        &["release"],
    );
    add_fact(&d, "Run cargo fmt before every commit", &["style"]);
    converse(&d, "conv-staging-1");
    let b = browser();
    let shots = screens();

    // `memd ui` hands the browser a one-time link; it lands on the memories page and leaves no
    // code in the address bar.
    let (opened, link) = opened_by_memd_ui(&d);
    b.goto(&opened).unwrap();
    b.wait_for("form.filters", WAIT).unwrap();
    let here = b.current_url().unwrap();
    assert_eq!(here, ui(&d, "/ui/memories"), "redirected to a clean URL");
    let cookies = b.cookies().unwrap();
    let session = cookies
        .iter()
        .find(|c| c["name"] == format!("memd_ui_{}", d.port))
        .expect("session cookie, named for the daemon's port");
    assert_eq!(session["httpOnly"], true, "{session}");
    assert_eq!(session["sameSite"], "Strict", "{session}");

    // The link worked once.
    b.goto(&link).unwrap();
    assert!(
        text_of(&b, "p[role=alert]").contains("already used or has expired"),
        "a reused link is refused"
    );
    b.goto(&ui(&d, "/ui/memories")).unwrap();

    // Search with the agent's ranking, submitted from the keyboard.
    let q = b.wait_for("#q", WAIT).unwrap();
    q.send_keys(&format!("what port is staging on{}", key::ENTER))
        .unwrap();
    wait_for_url(&b, "q=what+port");
    b.screenshot(&shots.join("memories.png")).unwrap();
    let first = b.find("a.memory-link").unwrap();
    assert!(
        first.text().unwrap().contains("staging database"),
        "best hit first"
    );
    first.click().unwrap();

    // One memory: its history and the turn it was injected into.
    b.wait_for("blockquote.content", WAIT).unwrap();
    assert_eq!(text_of(&b, "blockquote.content"), FACT);
    assert!(
        b.find("svg.chart circle.dot.worked").is_ok(),
        "the worked outcome is on the timeline"
    );
    let injected = text_of(&b, "main");
    assert!(
        injected.contains("conv-staging-1"),
        "injected into the conversation"
    );
    b.set_window_size(1280, 1500).unwrap();
    b.screenshot(&shots.join("memory.png")).unwrap();
    b.set_window_size(1280, 900).unwrap();
    assert_keyboard_reaches_everything(&b, "memory");
    assert_reflows_at_200_percent(&b, "memory");

    // Edit through the form; the API sees the change.
    let content = b.find("#content").unwrap();
    content.clear().unwrap();
    content.send_keys(EDITED).unwrap();
    let tags = b.find("#tags").unwrap();
    tags.clear().unwrap();
    tags.send_keys("database, staging, migrated").unwrap();
    click(&b, "form.edit button[type=submit]");
    wait_for_url(&b, "done=edited");
    assert_eq!(text_of(&b, "p.flash"), "Saved.");
    let after = memory(&d, &fact);
    assert_eq!(after.content, EDITED);
    assert_eq!(after.tags, ["database", "staging", "migrated"]);

    // Archive; the API reports it archived and the default list no longer shows it.
    click(&b, "#archive");
    wait_for_url(&b, "done=archived");
    assert_eq!(text_of(&b, "p.flash"), "Archived.");
    assert!(memory(&d, &fact).archived, "archived through the dashboard");
    b.goto(&ui(&d, "/ui/memories")).unwrap();
    assert!(
        !text_of(&b, "main").contains("6543"),
        "archived memories are hidden by default"
    );
    b.goto(&ui(&d, "/ui/memories?archived=only")).unwrap();
    assert!(text_of(&b, "table.memories").contains("6543"));
    b.goto(&ui(&d, "/ui/memories?tag=release")).unwrap();
    let tagged = text_of(&b, "table.memories tbody");
    assert!(
        tagged.contains("signed with the key") && !tagged.contains("cargo fmt"),
        "the tag filter: {tagged}"
    );
    b.goto(&ui(&d, "/ui/memories?disputed=1")).unwrap();
    assert_eq!(
        text_of(&b, "p.count"),
        "0 memories",
        "nothing failed three times"
    );
    assert_reflows_at_200_percent(&b, "memories");

    // Conversations, turn by turn, with content from the store.
    b.goto(&ui(&d, "/ui/conversations")).unwrap();
    b.screenshot(&shots.join("conversations.png")).unwrap();
    click(&b, "a[href='/ui/conversations/conv-staging-1']");
    let turns: Vec<String> = b
        .find_all("li.turn")
        .unwrap()
        .iter()
        .map(|t| t.text().unwrap())
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(
        turns[0].contains("Outcome: worked"),
        "turn 1 scored: {}",
        turns[0]
    );
    assert!(
        turns[1].contains("Outcome: not scored"),
        "turn 2 not: {}",
        turns[1]
    );
    assert!(
        turns[0].contains("6543"),
        "the injected memory as the store has it now: {}",
        turns[0]
    );
    b.screenshot(&shots.join("conversation.png")).unwrap();

    // Delete from its page (after the confirmation the script asks for).
    let doomed = add_fact(
        &d,
        "Prefer rebase over merge for feature branches",
        &["git"],
    );
    b.goto(&ui(&d, &format!("/ui/memory/{doomed}"))).unwrap();
    b.wait_for("#delete", WAIT).unwrap();
    b.execute("window.confirm = () => true", vec![]).unwrap();
    click(&b, "#delete");
    wait_for_url(&b, "/ui/memories");
    assert!(
        tests::lookup(&d, &doomed).is_none(),
        "deleted through the dashboard"
    );

    // Health: the figures `memd status` prints.
    b.goto(&ui(&d, "/ui/health")).unwrap();
    let status = text_of(&b, "#status");
    assert!(
        status.contains("memory_bank") && status.contains("3 memories"),
        "{status}"
    );
    assert!(
        text_of(&b, "#hit-rate").contains("100 %"),
        "one scored turn, worked"
    );
    b.screenshot(&shots.join("health.png")).unwrap();
    assert_reflows_at_200_percent(&b, "health");

    // Books: upload with progress, then remove.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deploy-runbook.md");
    std::fs::write(
        &file,
        "# Deploy runbook\n\nStaging deploys run from the release branch.\n",
    )
    .unwrap();
    b.goto(&ui(&d, "/ui/books")).unwrap();
    b.wait_for("#file", WAIT)
        .unwrap()
        .send_keys(file.to_str().unwrap())
        .unwrap();
    click(&b, "#upload button[type=submit]");
    assert_eq!(text_of(&b, "#books td.book-title"), "deploy-runbook");
    let books: Value = d.get("/api/books");
    assert_eq!(books["books"][0]["title"], "deploy-runbook", "{books}");
    b.screenshot(&shots.join("books.png")).unwrap();
    b.execute("window.confirm = () => true", vec![]).unwrap();
    click(&b, "#books form.danger button");
    b.wait_for("#no-books", WAIT).unwrap();
    let books: Value = d.get("/api/books");
    assert_eq!(books["books"], json!([]), "removed through the dashboard");
}

/// A page on another local port (not the same origin as the dashboard; the same site only
/// when reached under the dashboard's own host name).
fn serve_forgery(target: String) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let page = format!(
            "<!doctype html><form id=f method=post action=\"{target}\">\
             <input type=hidden name=shared value=true></form>\
             <script>document.getElementById('f').submit()</script>"
        );
        for stream in listener.incoming().flatten() {
            // A thread each: the browser may open a connection and send nothing on it.
            let page = page.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
            });
        }
    });
    url
}

#[test]
fn an_expired_login_link_is_refused() {
    let d = Daemon::start(Spec {
        config_toml: Some("[ui]\nlink_ttl_secs = 1\n".into()),
        ..Spec::new()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let stale = login_link(&d);
    // The code's lifetime is the thing under test: wait it out.
    std::thread::sleep(Duration::from_millis(1_300));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    // To 127.0.0.1 naming the dashboard's host (the system resolver may not know `.localhost`).
    let path = &stale[stale.find("/ui/").expect("a /ui link")..];
    let host = ui(&d, "").trim_start_matches("http://").to_string();
    let mut r = agent
        .get(&d.url(path))
        .header("host", &host)
        .call()
        .expect("an answer");
    assert_eq!(r.status().as_u16(), 403);
    assert!(r.headers().get("set-cookie").is_none(), "no session");
    let page = r.body_mut().read_to_string().unwrap();
    assert!(page.contains("expired"), "{page}");
}

#[test]
fn forged_posts_and_pages_without_a_session_are_refused() {
    let d = tests::start_daemon();
    let victim = add_fact(&d, "Deploys need two approvals", &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let get = |path: &str| {
        agent
            .get(&d.url(path))
            .call()
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    };
    for page in [
        "/ui/memories",
        "/ui/health",
        "/ui/conversations",
        "/ui/books",
    ] {
        assert_eq!(get(page), 401, "{page} without a session");
    }
    assert_eq!(get(&format!("/ui/memory/{victim}")), 401);
    for sneaky in ["/ui/../api/stats", "/ui/%2e%2e/api/stats", "/ui//api/stats"] {
        let status = get(sneaky);
        assert!(status == 401 || status == 404, "{sneaky} → {status}");
    }

    let b = browser();
    b.goto(&login_link(&d)).unwrap();
    b.wait_for("form.filters", WAIT).unwrap();

    // A page on another loopback port posts a delete into the logged-in session: another
    // site now, so the browser does not even send the session.
    let delete = ui(&d, &format!("/ui/memory/{victim}/delete"));
    let forgery = serve_forgery(delete.clone());
    b.goto(&forgery).unwrap();
    assert!(
        text_of(&b, "p[role=alert]").starts_with("Not logged in"),
        "forged post from 127.0.0.1 carried no session"
    );
    // The same page under the dashboard's own name on another port (a program that somehow
    // knew the name): same site, the cookie goes along, the Origin check refuses.
    let port = forgery.trim_end_matches('/').rsplit(':').next().unwrap();
    let host = memd_client::proof::dashboard_host(&d.token);
    b.goto(&format!("http://{host}:{port}/")).unwrap();
    assert!(
        text_of(&b, "p[role=alert]").starts_with("Refused"),
        "forged post refused"
    );
    assert_eq!(memory(&d, &victim).content, "Deploys need two approvals");

    // The same by hand: each missing proof alone is refused; all of them pass.
    let cookie = b
        .cookies()
        .unwrap()
        .into_iter()
        .find(|c| c["name"] == format!("memd_ui_{}", d.port))
        .map(|c| {
            format!(
                "{}={}",
                c["name"].as_str().unwrap(),
                c["value"].as_str().unwrap()
            )
        })
        .expect("session cookie");
    b.goto(&ui(&d, "/ui/memories")).unwrap();
    let csrf = b
        .execute(
            "return document.querySelector('meta[name=csrf]').content",
            vec![],
        )
        .unwrap();
    let csrf = csrf.as_str().unwrap().to_string();
    let own_origin = ui(&d, "");
    // By hand, as a program on this machine would: to 127.0.0.1, naming the dashboard's host.
    let host = own_origin.trim_start_matches("http://").to_string();
    let post = |cookie: Option<&str>, origin: Option<&str>, body: &str| -> u16 {
        let mut req = agent
            .post(&d.url(&format!("/ui/memory/{victim}/archive")))
            .header("host", &host)
            .header("content-type", "application/x-www-form-urlencoded");
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send(body.as_bytes())
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    };
    let with_token = format!("csrf={csrf}");
    assert_eq!(
        post(Some(&cookie), Some(&own_origin), ""),
        403,
        "no CSRF token"
    );
    assert_eq!(
        post(Some(&cookie), Some(&own_origin), "csrf=0000"),
        403,
        "wrong token"
    );
    assert_eq!(post(Some(&cookie), None, &with_token), 403, "no Origin");
    assert_eq!(
        post(Some(&cookie), Some("http://127.0.0.1:1"), &with_token),
        403,
        "other port"
    );
    assert_eq!(
        post(None, Some(&own_origin), &with_token),
        401,
        "no session"
    );
    assert!(
        !memory(&d, &victim).archived,
        "nothing refused changed anything"
    );
    assert_eq!(
        post(Some(&cookie), Some(&own_origin), &with_token),
        303,
        "all proofs"
    );
    assert!(memory(&d, &victim).archived);
}
