//! Issue 36, high 1: the dashboard's session cookie in a real browser (headless Chromium) while
//! another program serves pages on this machine. Browsers keep cookies per host, not per port:
//! a page another local user served on `127.0.0.1` (another port) that the user opened was sent
//! the `memd_ui_<port>` cookie, and with it a plain HTTP client read and changed every memory;
//! such a page could also set a cookie of that name and log the user out (cookie tossing).
//!
//! The attacker here is a server on an ephemeral loopback port that records every `Cookie` it is
//! sent and answers each page with cookies of the session's name (host-only on `127.0.0.1`, and
//! `Domain=localhost` from `evil.localhost`). Only the link `memd ui` prints is used to find the
//! dashboard, so the test reads the same before and after the fix.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::browser::Browser;

const WAIT: Duration = Duration::from_secs(20);

/// `memd ui --print-url`, as the user runs it.
fn login_link(d: &tests::Daemon) -> String {
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
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A page server on its own port: every request's `Cookie` header is kept; `/toss` sets
/// cookies named like memd's session (`memd_ui_<port>`), host-only and for `localhost`.
fn attacker(memd_port: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            // A thread each: the browser may open a connection and send nothing on it.
            std::thread::spawn(move || serve(stream, memd_port, &log));
        }
    });
    (port, seen)
}

/// One request: its `Cookie` header kept, the page and the cookies sent.
fn serve(stream: std::net::TcpStream, memd_port: u16, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream);
    let mut cookies = String::new();
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" {
            break;
        }
        if line.to_ascii_lowercase().starts_with("cookie:") {
            cookies.push_str(line.trim_end());
        }
        line.clear();
    }
    log.lock().unwrap().push(cookies);
    let page = "<!doctype html><title>a page on this machine</title><p>hello</p>";
    let name = format!("memd_ui_{memd_port}");
    // Only `/toss` sets cookies: the other pages show what the browser sends on its own.
    let toss = if first.contains("/toss") {
        format!(
            "set-cookie: {name}=tossed-host; Path=/ui; SameSite=Lax\r\n\
             set-cookie: {name}=tossed-domain; Domain=localhost; Path=/ui/memories; SameSite=Lax\r\n"
        )
    } else {
        String::new()
    };
    let _ = write!(
        reader.get_mut(),
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n{toss}\
         content-length: {}\r\nconnection: close\r\n\r\n{page}",
        page.len()
    );
}

/// `scheme://host:port` of `url`.
fn origin(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http link");
    format!("http://{}", rest.split('/').next().unwrap())
}

#[test]
fn another_local_page_is_never_sent_the_session_and_cannot_log_the_user_out() {
    let d = tests::start_daemon();
    let b = Browser::start().unwrap_or_else(|e| panic!("{e}"));
    let link = login_link(&d);
    let dashboard = origin(&link);
    b.goto(&link).unwrap();
    b.wait_for("form.filters", WAIT).unwrap();
    let session = b
        .cookies()
        .unwrap()
        .into_iter()
        .find(|c| c["name"] == format!("memd_ui_{}", d.port))
        .and_then(|c| c["value"].as_str().map(str::to_string))
        .expect("logged in: the session cookie");

    // The user opens pages another program serves: on 127.0.0.1 (memd's old address) and
    // under a `.localhost` name of its own, each on the attacker's port.
    let (port, seen) = attacker(d.port);
    for page in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://evil.localhost:{port}/"),
        format!("http://127.0.0.1:{port}/ui/memories"),
        format!("http://evil.localhost:{port}/ui/memories"),
    ] {
        b.goto(&page).unwrap();
        b.wait_for("p", WAIT).unwrap();
    }
    let received = seen.lock().unwrap().clone();
    assert!(
        received.len() >= 4,
        "every page was requested: {received:?}"
    );
    assert!(
        received.iter().all(|c| !c.contains(&session)),
        "another program's page was sent memd's session: {received:?}"
    );

    // Such a page sets cookies of the session's name: they do not replace the session, the
    // dashboard still knows the user.
    for page in [
        format!("http://127.0.0.1:{port}/toss"),
        format!("http://evil.localhost:{port}/toss"),
    ] {
        b.goto(&page).unwrap();
        b.wait_for("p", WAIT).unwrap();
    }
    b.goto(&format!("{dashboard}/ui/memories")).unwrap();
    b.wait_for("form.filters", WAIT)
        .expect("still logged in after the other page set cookies of the session's name");
    b.goto(&format!("{dashboard}/ui/health")).unwrap();
    b.wait_for("main", WAIT).unwrap();
    let text = b.find("main").unwrap().text().unwrap();
    assert!(!text.contains("Not logged in"), "{text}");
}

#[test]
fn a_login_link_is_only_spent_under_the_dashboards_own_name() {
    let d = tests::start_daemon();
    let link = login_link(&d);
    let path = &link[link.find("/ui/login").expect("a login link")..];
    // The code, taken to memd's plain loopback address, starts no session there: a cookie for
    // 127.0.0.1 would reach every program serving pages on it.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let r = agent.get(&d.url(path)).call().expect("an answer");
    assert!(
        r.headers().get("set-cookie").is_none(),
        "no session cookie for 127.0.0.1 ({})",
        r.status()
    );
    assert_ne!(r.status().as_u16(), 200);
    // And the code was not spent: the link still logs the browser in where it points.
    let b = Browser::start().unwrap_or_else(|e| panic!("{e}"));
    b.goto(&link).unwrap();
    b.wait_for("form.filters", WAIT).unwrap();
}
