//! A small W3C WebDriver client for the end-to-end browser tests: a headless Chromium driven
//! through chromedriver, both from install/fetch-chromium.sh.
//!
//! Owns the browser's whole lifetime: finding the two binaries, chromedriver on an ephemeral
//! loopback port in a process group of its own, a fresh temporary profile, the session, and on
//! drop the session's deletion, the group's SIGKILL and the profile's removal. Must never use the
//! user's Chromium profile, never leave chromedriver or Chromium running, never skip a test
//! because the browser is missing (the error says what to install) and never synchronise with a
//! bare sleep (every wait polls a condition under a deadline).
//!
//! Why not fantoccini: its dependency tree measured 309 lines of `cargo tree`, two generations of
//! ICU among them, for tests that need about ten WebDriver commands. Those are plain JSON over
//! HTTP, so this is a thin layer over `ureq` and `serde_json`, already dependencies here.
//!
//! # Layout
//!
//! - [`Browser`]: the session: navigation, finding elements, scripts, screenshots, cookies.
//! - [`Element`]: a found element: click, type, read text, attributes and properties.
//! - [`key`]: the WebDriver codes of special keys, for [`Element::send_keys`].

mod element;

pub use element::Element;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The key under which WebDriver returns (and accepts) an element's id: the W3C spec's "web
/// element identifier", which chromedriver uses.
pub(super) const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long to wait for chromedriver to answer `ready: true` on `/status`.
const DRIVER_START: Duration = Duration::from_secs(20);

/// Every WebDriver call's bound (a page load or an async script included).
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// What to do when a binary is missing.
const INSTALL_HINT: &str = "run install/fetch-chromium.sh (it installs /usr/bin/chromium and \
                            /usr/bin/chromedriver), or point MEMD_CHROMIUM and MEMD_CHROMEDRIVER \
                            at them";

/// Chromium's flags: headless, no sandbox (the tests run as root), nothing that reaches for the
/// network on its own. `--user-data-dir` is added per browser.
const CHROMIUM_ARGS: [&str; 10] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    "--disable-dev-shm-usage",
];

/// The WebDriver codes of special keys, to put inside the text of [`Element::send_keys`].
pub mod key {
    pub const ENTER: &str = "\u{E007}";
    pub const TAB: &str = "\u{E004}";
    pub const ESCAPE: &str = "\u{E00C}";
    pub const BACKSPACE: &str = "\u{E003}";
    pub const ARROW_LEFT: &str = "\u{E012}";
    pub const ARROW_UP: &str = "\u{E013}";
    pub const ARROW_RIGHT: &str = "\u{E014}";
    pub const ARROW_DOWN: &str = "\u{E015}";
}

/// A headless Chromium session. Dropping it ends the session and kills chromedriver and Chromium.
pub struct Browser {
    http: ureq::Agent,
    /// `http://127.0.0.1:<port>/session/<id>`.
    session_url: String,
    driver: Child,
    log: PathBuf,
    /// Holds the chromedriver log and the Chromium profile; removed after the processes are dead.
    _dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session; the error says what went wrong, with
    /// the tail of chromedriver's log, or what to install.
    pub fn start() -> Result<Browser, String> {
        let driver_bin = find_chromedriver()?;
        let chromium = find_chromium()?;
        let dir = tempfile::Builder::new()
            .prefix("memd-browser-")
            .tempdir()
            .map_err(|e| format!("create a temp dir for the browser: {e}"))?;
        let log = dir.path().join("chromedriver.log");
        let profile = dir.path().join("profile");
        std::fs::create_dir(&profile).map_err(|e| format!("create {}: {e}", profile.display()))?;
        let out = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("dup {}: {e}", log.display()))?;
        let port = free_port()?;
        let driver = {
            use std::os::unix::process::CommandExt;
            let mut command = Command::new(&driver_bin);
            command
                .arg(format!("--port={port}"))
                // Chromium's own stderr into the log: why it failed to start, crashes.
                .arg("--enable-chrome-logs")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .process_group(0);
            // If the test dies without dropping the browser (killed, timed out), the kernel
            // kills chromedriver when the spawning thread ends; Chromium quits with it. (The
            // signal follows the thread, so a Browser must stay on the thread that made it.)
            // SAFETY: the closure only calls prctl, which is async-signal-safe, between fork
            // and exec.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            command
                .spawn()
                .map_err(|e| format!("start {}: {e} ({INSTALL_HINT})", driver_bin.display()))?
        };
        let http = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(HTTP_TIMEOUT))
                .proxy(None)
                .build(),
        );
        // From here on, dropping `browser` kills chromedriver: every early return cleans up.
        let mut browser = Browser {
            http,
            session_url: format!("http://127.0.0.1:{port}"),
            driver,
            log,
            _dir: dir,
        };
        browser.wait_ready(&driver_bin)?;

        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let url = format!("{}/session", browser.session_url);
        let value = browser
            .request("POST", &url, Some(caps))
            .map_err(|e| browser.with_log(&format!("create a session: {e}")))?;
        let id = value["sessionId"].as_str().ok_or_else(|| {
            browser.with_log(&format!("create a session: no sessionId in {value}"))
        })?;
        browser.session_url = format!("{url}/{id}");
        Ok(browser)
    }

    /// Polls `/status` until chromedriver says it is ready, or exits, or the deadline passes.
    fn wait_ready(&mut self, bin: &Path) -> Result<(), String> {
        let url = format!("{}/status", self.session_url);
        let start = Instant::now();
        loop {
            let last = match self.request("GET", &url, None) {
                Ok(v) if v["ready"] == json!(true) => return Ok(()),
                Ok(v) => format!("not ready: {v}"),
                Err(e) => e,
            };
            if let Ok(Some(status)) = self.driver.try_wait() {
                return Err(self.with_log(&format!("{} exited: {status}", bin.display())));
            }
            if start.elapsed() > DRIVER_START {
                return Err(self.with_log(&format!(
                    "{} not ready after {DRIVER_START:?}: {last}",
                    bin.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `message`, then the tail of chromedriver's log.
    fn with_log(&self, message: &str) -> String {
        format!(
            "{message}\n--- chromedriver log ({}), tail ---\n{}",
            self.log.display(),
            log_tail(&self.log)
        )
    }

    /// One WebDriver call; its `value`, or an error naming the call and WebDriver's
    /// `error`/`message`.
    fn request(&self, method: &str, url: &str, body: Option<Value>) -> Result<Value, String> {
        let what = format!("{method} {url}");
        let sent = match (method, body) {
            ("GET", _) => self.http.get(url).call(),
            ("DELETE", _) => self.http.delete(url).call(),
            (_, Some(body)) => self.http.post(url).send_json(body),
            (_, None) => self.http.post(url).send_json(json!({})),
        };
        let mut response = sent.map_err(|e| format!("{what}: {e}"))?;
        let status = response.status();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_vec()
            .map_err(|e| format!("{what}: read the body: {e}"))?;
        let parsed: Value = serde_json::from_slice(&bytes).map_err(|e| {
            let text = String::from_utf8_lossy(&bytes);
            format!("{what}: HTTP {status}, not JSON ({e}): {:.500}", text)
        })?;
        let value = parsed.get("value").cloned().unwrap_or(Value::Null);
        if !status.is_success() || value.get("error").is_some_and(|e| e.is_string()) {
            return Err(format!(
                "{what}: HTTP {status}: {}: {}",
                value["error"].as_str().unwrap_or("(no error)"),
                value["message"].as_str().unwrap_or("(no message)")
            ));
        }
        Ok(value)
    }

    /// A call on this session: `path` is relative to `/session/<id>`.
    pub(super) fn cmd(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        self.request(method, &format!("{}{path}", self.session_url), body)
    }

    pub(super) fn element(&self, value: &Value, selector: String) -> Result<Element<'_>, String> {
        let id = value[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| format!("{selector}: not an element reference: {value}"))?;
        Ok(Element {
            browser: self,
            id: id.to_string(),
            selector,
        })
    }

    pub(super) fn elements(
        &self,
        value: &Value,
        selector: &str,
    ) -> Result<Vec<Element<'_>>, String> {
        value
            .as_array()
            .ok_or_else(|| format!("{selector}: not a list of elements: {value}"))?
            .iter()
            .map(|v| self.element(v, selector.to_string()))
            .collect()
    }

    /// Navigates to `url` and waits for the page to load.
    pub fn goto(&self, url: &str) -> Result<(), String> {
        self.cmd("POST", "/url", Some(json!({"url": url})))
            .map(drop)
            .map_err(|e| format!("go to {url}: {e}"))
    }

    /// Resizes the window (its CSS viewport follows): 640 wide is a 1280-wide window at 200 %.
    pub fn set_window_size(&self, width: u32, height: u32) -> Result<(), String> {
        self.cmd(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .map(drop)
        .map_err(|e| format!("resize to {width}x{height}: {e}"))
    }

    pub fn current_url(&self) -> Result<String, String> {
        string(self.cmd("GET", "/url", None)?, "current URL")
    }

    pub fn title(&self) -> Result<String, String> {
        string(self.cmd("GET", "/title", None)?, "title")
    }

    pub fn page_source(&self) -> Result<String, String> {
        string(self.cmd("GET", "/source", None)?, "page source")
    }

    /// The first element matching the CSS selector `css`; an error if there is none.
    pub fn find(&self, css: &str) -> Result<Element<'_>, String> {
        let v = self
            .cmd("POST", "/element", Some(by_css(css)))
            .map_err(|e| format!("find {css:?}: {e}"))?;
        self.element(&v, css.to_string())
    }

    /// Every element matching the CSS selector `css` (none: empty).
    pub fn find_all(&self, css: &str) -> Result<Vec<Element<'_>>, String> {
        let v = self
            .cmd("POST", "/elements", Some(by_css(css)))
            .map_err(|e| format!("find all {css:?}: {e}"))?;
        self.elements(&v, css)
    }

    /// Polls [`find`](Self::find) until `css` matches or `timeout` passes; the error has the
    /// last failure.
    pub fn wait_for(&self, css: &str, timeout: Duration) -> Result<Element<'_>, String> {
        let start = Instant::now();
        loop {
            match self.find(css) {
                Ok(e) => return Ok(e),
                Err(e) if start.elapsed() > timeout => {
                    return Err(format!("{css:?} did not appear within {timeout:?}: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The focused element (`document.activeElement`).
    pub fn active(&self) -> Result<Element<'_>, String> {
        let v = self
            .cmd("GET", "/element/active", None)
            .map_err(|e| format!("the active element: {e}"))?;
        self.element(&v, "(active element)".to_string())
    }

    /// Types `text` (which may contain [`key`] codes) into the focused element.
    pub fn send_keys_to_active(&self, text: &str) -> Result<(), String> {
        self.active()?.send_keys(text)
    }

    /// Runs `script` as a function body with `arguments` = `args` (an [`Element::to_json`] is
    /// an element); what it `return`s.
    pub fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value, String> {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .map_err(|e| format!("execute {script:.200?}: {e}"))
    }

    /// Like [`execute`](Self::execute), but the result is what the script passes to the callback
    /// given as its last argument (`arguments[arguments.length - 1]`); WebDriver's script
    /// timeout (30 s by default) bounds it.
    pub fn execute_async(&self, script: &str, args: Vec<Value>) -> Result<Value, String> {
        self.cmd(
            "POST",
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
        .map_err(|e| format!("execute async {script:.200?}: {e}"))
    }

    /// Writes a PNG of the viewport to `path`, creating its parent directories.
    pub fn screenshot(&self, path: &Path) -> Result<(), String> {
        let b64 = string(self.cmd("GET", "/screenshot", None)?, "screenshot")?;
        let png = base64_decode(&b64).map_err(|e| format!("screenshot: {e}"))?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        std::fs::write(path, png).map_err(|e| format!("write {}: {e}", path.display()))
    }

    /// The current page's cookies, as WebDriver describes them (`name`, `value`, `path`,
    /// `httpOnly`, ...).
    pub fn cookies(&self) -> Result<Vec<Value>, String> {
        match self.cmd("GET", "/cookie", None)? {
            Value::Array(a) => Ok(a),
            other => Err(format!("cookies: not a list: {other}")),
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Only a created session has an id in its URL; Chromium quits when it ends.
        if self.session_url.contains("/session/") {
            let _ = self.request("DELETE", &self.session_url.clone(), None);
        }
        // chromedriver leads its own group, and Chromium's processes are in it.
        let pgid = self.driver.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.driver.wait();
    }
}

pub(super) fn by_css(css: &str) -> Value {
    json!({"using": "css selector", "value": css})
}

pub(super) fn string(v: Value, what: &str) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(format!("{what}: not a string: {other:.200}")),
    }
}

/// chromedriver: `MEMD_CHROMEDRIVER`, else /usr/bin/chromedriver, else `chromedriver` on PATH.
fn find_chromedriver() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("MEMD_CHROMEDRIVER") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "MEMD_CHROMEDRIVER={}: no such file; {INSTALL_HINT}",
                p.display()
            ))
        };
    }
    let usr = PathBuf::from("/usr/bin/chromedriver");
    if usr.is_file() {
        return Ok(usr);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("chromedriver"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("chromedriver not found (MEMD_CHROMEDRIVER, /usr/bin, PATH); {INSTALL_HINT}")
        })
}

/// Chromium: `MEMD_CHROMIUM`, else /usr/bin/chromium.
fn find_chromium() -> Result<PathBuf, String> {
    let p = std::env::var_os("MEMD_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "Chromium not found at {} (MEMD_CHROMIUM); {INSTALL_HINT}",
            p.display()
        ))
    }
}

/// A loopback port nothing listens on now (bound, then released for chromedriver).
fn free_port() -> Result<u16, String> {
    let l =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

/// The last ~4 KiB of the log, from a line start.
fn log_tail(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return "(no log)".to_string();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let text = if len > 4096 {
        text.split_once('\n').map_or(&*text, |(_, rest)| rest)
    } else {
        &text
    };
    if text.trim().is_empty() {
        "(empty)".to_string()
    } else {
        text.to_string()
    }
}

/// Standard base64 (RFC 4648, `+/`, `=` padding, whitespace ignored), as WebDriver's screenshots.
fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in s.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return Err(format!("base64: bad byte {c:#04x} at {i}")),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_padded_and_unpadded() {
        assert_eq!(base64_decode("").unwrap(), b"");
        assert_eq!(base64_decode("Zg==").unwrap(), b"f");
        assert_eq!(base64_decode("Zm8=").unwrap(), b"fo");
        assert_eq!(base64_decode("Zm9v").unwrap(), b"foo");
        assert_eq!(base64_decode("Zm9vYmFy\n").unwrap(), b"foobar");
        assert_eq!(base64_decode("iVBORw0KGgo=").unwrap(), b"\x89PNG\r\n\x1a\n");
        assert!(base64_decode("Zm9v!").is_err());
    }

    /// Fails (never skips) without Chromium: the message says to run install/fetch-chromium.sh.
    #[test]
    fn browser_renders_a_data_page() {
        let started = Instant::now();
        let b = Browser::start().unwrap_or_else(|e| panic!("{e}"));
        eprintln!("browser started in {} ms", started.elapsed().as_millis());

        let page = "<title>t</title>\
            <p id=out>before</p>\
            <button id=go onclick=\"document.getElementById('out').textContent='after'\">go</button>\
            <input id=name>";
        b.goto(&format!("data:text/html,{}", percent_encode(page)))
            .unwrap();
        assert_eq!(b.title().unwrap(), "t");
        assert!(b.current_url().unwrap().starts_with("data:text/html,"));

        let out = b.find("#out").unwrap();
        assert_eq!(out.text().unwrap(), "before");
        b.find("#go").unwrap().click().unwrap();
        assert_eq!(out.text().unwrap(), "after");

        let input = b.wait_for("#name", Duration::from_secs(5)).unwrap();
        input.send_keys("hello").unwrap();
        assert_eq!(input.property("value").unwrap(), json!("hello"));
        assert_eq!(input.attr("id").unwrap().as_deref(), Some("name"));
        assert_eq!(input.attr("nope").unwrap(), None);
        input.clear().unwrap();
        assert_eq!(input.property("value").unwrap(), json!(""));
        input.click().unwrap();
        b.send_keys_to_active(&format!("hi{}", key::TAB)).unwrap();
        assert_eq!(input.property("value").unwrap(), json!("hi"));
        let done =
            "let cb = arguments[arguments.length - 1]; setTimeout(() => cb(arguments[0] * 2), 10)";
        assert_eq!(b.execute_async(done, vec![json!(21)]).unwrap(), json!(42));

        let e = b.find("#missing").err().expect("no #missing on the page");
        assert!(
            e.contains("#missing") && e.contains("no such element"),
            "{e}"
        );
        assert!(b.find_all("#missing").unwrap().is_empty());
        assert_eq!(
            b.execute(
                "return arguments[0].id + arguments[1]",
                vec![out.to_json(), json!(1)]
            )
            .unwrap(),
            json!("out1")
        );

        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("shots/page.png");
        b.screenshot(&png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "not a PNG: {png:?}"
        );
    }

    /// Enough percent-encoding for a `data:` URL of HTML.
    fn percent_encode(s: &str) -> String {
        s.bytes()
            .map(|c| match c {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (c as char).to_string()
                }
                _ => format!("%{c:02X}"),
            })
            .collect()
    }
}
