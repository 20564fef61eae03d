//! `memd ui`: opens the dashboard in the user's browser.
//!
//! Owns asking the daemon for a one-time login link and handing it to the browser (or printing
//! it with `--print-url`). Must never print or pass the API token: the link carries a code that
//! works once, for a minute, and the browser is sent on to a clean address.

use crate::query::connect;
use anyhow::Result;
use proto::{UiLoginLinkRequest, UiLoginLinkResponse};
use std::process::{Command, ExitCode, Stdio};

pub fn run_ui(print_url: bool) -> Result<ExitCode> {
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
    match open_in_browser(&link.url) {
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
