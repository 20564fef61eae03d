//! `memd ui`: opens the dashboard in the user's browser.
//!
//! Owns asking the daemon for a one-time login link and handing it to the browser (or printing
//! it with `--print-url`). Must never print or pass the API token, nor put the link on a
//! command line: another user can read a process's arguments (`/proc/PID/cmdline`) and could
//! spend the code first. The browser gets the address of a file only this user can read
//! (`ui-login.html` in the 0700 data dir), which moves on to the link.

use crate::query::connect;
use anyhow::{Context, Result};
use proto::{UiLoginLinkRequest, UiLoginLinkResponse};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

pub fn run_ui(print_url: bool) -> Result<ExitCode> {
    let cfg = memd_engine::config::Config::load(None)?;
    let client = connect()?;
    let link: UiLoginLinkResponse = client.post("/api/ui/login-link", &UiLoginLinkRequest {})?;
    if print_url {
        println!("{}", link.url);
        eprintln!(
            "(the link logs one browser in, within {} s)",
            link.expires_in_secs
        );
        return Ok(ExitCode::SUCCESS);
    }
    let page = write_login_page(&cfg.data_dir, &link.url)?;
    match open_in_browser(&format!("file://{}", page.display())) {
        Ok(how) => println!(
            "opened the dashboard with {how}; if no browser appeared, run `memd ui --print-url` \
             and open the link within {} s",
            link.expires_in_secs
        ),
        Err(why) => {
            println!(
                "could not open a browser ({why}); open this link within {} s:",
                link.expires_in_secs
            );
            println!("{}", link.url);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes (0600) the page that sends the browser on to `url`; returns its path.
fn write_login_page(data_dir: &Path, url: &str) -> Result<PathBuf> {
    let path = data_dir.join("ui-login.html");
    // The URL is ours (`http://127.0.0.1:PORT/ui/login?code=<hex>`): nothing in it needs
    // escaping in an attribute, and it is checked rather than trusted.
    anyhow::ensure!(
        url.chars()
            .all(|c| c.is_ascii_alphanumeric() || ":/.?=_-[]".contains(c)),
        "unexpected login link from the daemon"
    );
    let page = format!(
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; url={url}\">\
         <title>memd</title><p><a href=\"{url}\">Open the memd dashboard</a></p>\n"
    );
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(page.as_bytes())?;
    Ok(path)
}

/// Starts the user's browser on `url` without waiting for it; names the program used.
fn open_in_browser(url: &str) -> Result<String, String> {
    let mut candidates: Vec<String> = std::env::var("BROWSER")
        .map(|b| b.split(':').map(str::to_string).collect())
        .unwrap_or_default();
    candidates.push(
        if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        }
        .to_string(),
    );
    let mut tried = Vec::new();
    for program in candidates.into_iter().filter(|p| !p.trim().is_empty()) {
        let spawned = Command::new(&program)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(_) => return Ok(program),
            Err(e) => tried.push(format!("{program}: {e}")),
        }
    }
    Err(tried.join("; "))
}
