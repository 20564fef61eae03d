//! The sidecar question of `memd init` and the `[sidecar]` section of `config.toml`.
//!
//! Owns asking (or taking from flags) where outcome scoring may run when the agent did not
//! score: local models only, or the user's own OpenAI-compatible endpoint. Edits
//! `config.toml` line by line so the user's comments and other sections stay as they were.
//! Must never ask for, read or store the API key itself: only the path of a 0600 key file.

use anyhow::{Context, Result, bail};
use memd_engine::config::SidecarConfig;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

const SECTION: &str = "sidecar";

/// Where outcome scoring may run.
#[derive(Debug, Clone, PartialEq)]
pub enum SidecarChoice {
    /// Leave config.toml alone.
    Keep,
    /// Loopback models only (Ollama, LM Studio); nothing leaves the machine.
    Local,
    Remote {
        url: String,
        models: Vec<String>,
        key_file: PathBuf,
    },
}

/// Flags that answer the question without asking.
#[derive(Debug, Clone, Default)]
pub struct SidecarFlags {
    pub mode: Option<String>,
    pub url: Option<String>,
    pub models: Option<String>,
    pub key_file: Option<PathBuf>,
}

/// Decides from flags, else asks on stdin (unless `yes`: then config.toml is left alone).
pub fn choose(flags: &SidecarFlags, yes: bool) -> Result<SidecarChoice> {
    match flags.mode.as_deref() {
        Some("local") => Ok(SidecarChoice::Local),
        Some("remote") => {
            let url = flags
                .url
                .clone()
                .context("--sidecar remote needs --sidecar-url")?;
            let models = flags
                .models
                .as_deref()
                .context("--sidecar remote needs --sidecar-models")?;
            let key_file = flags
                .key_file
                .clone()
                .context("--sidecar remote needs --sidecar-key-file")?;
            remote_choice(&url, models, &key_file)
        }
        Some(other) => bail!("--sidecar must be local or remote (got {other:?})"),
        None if yes => Ok(SidecarChoice::Keep),
        None => ask(&mut std::io::stdin().lock(), &mut std::io::stderr()),
    }
}

fn remote_choice(url: &str, models: &str, key_file: &Path) -> Result<SidecarChoice> {
    let url = url.trim().trim_end_matches('/').to_string();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("the sidecar URL must start with http:// or https:// (got {url:?})");
    }
    let models: Vec<String> = models
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if models.is_empty() {
        bail!("name at least one model for the remote sidecar");
    }
    let key_file = absolute(key_file)?;
    super::files::check_private(&key_file)?;
    Ok(SidecarChoice::Remote {
        url,
        models,
        key_file,
    })
}

fn absolute(p: &Path) -> Result<PathBuf> {
    let p = match p.to_str().and_then(|s| s.strip_prefix("~/")) {
        Some(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .context("HOME is not set")?
            .join(rest),
        None => p.to_path_buf(),
    };
    Ok(if p.is_absolute() {
        p
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// The interactive question. End of input picks the default (local only).
pub fn ask(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<SidecarChoice> {
    writeln!(
        out,
        "\nWhen the agent does not score an answer itself, memd can ask a small model (the sidecar):"
    )?;
    writeln!(
        out,
        "  1) local only: Ollama or LM Studio on this machine; nothing leaves it (default)"
    )?;
    writeln!(
        out,
        "  2) a remote OpenAI-compatible endpoint you choose (your URL, models and key file)"
    )?;
    let answer = prompt(input, out, "Choice [1]: ")?;
    if !matches!(answer.as_str(), "2" | "remote") {
        return Ok(SidecarChoice::Local);
    }
    for _ in 0..3 {
        let url = prompt(input, out, "Base URL, ending in /v1: ")?;
        let models = prompt(input, out, "Model names, comma-separated, tried in order: ")?;
        let key = prompt(
            input,
            out,
            "Path of a file holding the API key (mode 0600; the key is never copied): ",
        )?;
        if url.is_empty() && models.is_empty() && key.is_empty() {
            break;
        }
        match remote_choice(&url, &models, Path::new(&key)) {
            Ok(choice) => return Ok(choice),
            Err(e) => writeln!(out, "  {e:#}; try again (empty answers keep local only)")?,
        }
    }
    writeln!(out, "Keeping local only.")?;
    Ok(SidecarChoice::Local)
}

fn prompt(input: &mut dyn BufRead, out: &mut dyn Write, question: &str) -> Result<String> {
    write!(out, "{question}")?;
    out.flush()?;
    let mut line = String::new();
    input.read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// The keys to set for a choice, as `(key, TOML value)`. `None` for [`SidecarChoice::Keep`].
fn settings(choice: &SidecarChoice) -> Option<Vec<(&'static str, String)>> {
    let s = |v: &str| toml::Value::String(v.to_string()).to_string();
    match choice {
        SidecarChoice::Keep => None,
        SidecarChoice::Local => Some(vec![("remote", "false".into()), ("local", "true".into())]),
        SidecarChoice::Remote {
            url,
            models,
            key_file,
        } => {
            let list = toml::Value::Array(
                models
                    .iter()
                    .map(|m| toml::Value::String(m.clone()))
                    .collect(),
            );
            Some(vec![
                ("remote", "true".into()),
                ("url", s(url)),
                ("models", list.to_string()),
                ("key_file", s(&key_file.to_string_lossy())),
            ])
        }
    }
}

/// The new config.toml text for a choice (`None`: leave the file as it is). Choosing local
/// when the file has no `[sidecar]` section changes nothing: local only is the default.
pub fn updated_config(existing: Option<&str>, choice: &SidecarChoice) -> Result<Option<String>> {
    let Some(keys) = settings(choice) else {
        return Ok(None);
    };
    let text = existing.unwrap_or("");
    if *choice == SidecarChoice::Local && find_section(text, SECTION).is_none() {
        return Ok(None);
    }
    let new = set_keys(text, SECTION, &keys);
    validate(&new)?;
    Ok((new != text).then_some(new))
}

/// Checks the edited file still parses and its `[sidecar]` is valid.
fn validate(text: &str) -> Result<()> {
    let table: toml::Table =
        toml::from_str(text).context("the edited config.toml does not parse")?;
    if let Some(section) = table.get(SECTION) {
        let _: SidecarConfig = section
            .clone()
            .try_into()
            .context("invalid [sidecar] section")?;
    }
    Ok(())
}

/// Line range `[header, end)` of `[name]` in `text`, if present.
fn find_section(text: &str, name: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| is_header(l, name))?;
    let end = lines[header + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |p| header + 1 + p);
    Some((header, end))
}

fn is_header(line: &str, name: &str) -> bool {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or("").trim();
    t.strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .is_some_and(|inner| inner.trim() == name)
}

fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') {
        return None;
    }
    let (k, _) = t.split_once('=')?;
    Some(k.trim())
}

/// Sets `keys` inside `[section]` (replacing their lines, multi-line arrays included),
/// appending what is missing; creates the section at the end when absent.
pub fn set_keys(text: &str, section: &str, keys: &[(&str, String)]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let Some((header, mut end)) = find_section(text, section) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if !out.trim().is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("[{section}]\n"));
        for (k, v) in keys {
            out.push_str(&format!("{k} = {v}\n"));
        }
        return out;
    };
    for (key, value) in keys {
        let found = (header + 1..end).find(|&i| key_of(&lines[i]) == Some(key));
        match found {
            Some(i) => {
                let span = value_span(&lines, i, end);
                lines.splice(i..i + span, [format!("{key} = {value}")]);
                end = end + 1 - span;
            }
            None => {
                let last = (header..end)
                    .rev()
                    .find(|&i| !lines[i].trim().is_empty())
                    .unwrap_or(header);
                lines.insert(last + 1, format!("{key} = {value}"));
                end += 1;
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// How many lines the value starting at line `i` spans (arrays may continue over lines).
fn value_span(lines: &[String], i: usize, end: usize) -> usize {
    let value = lines[i].split_once('=').map_or("", |(_, v)| v).trim();
    if !value.starts_with('[') {
        return 1;
    }
    let mut depth = 0i32;
    for (k, line) in lines[i..end].iter().enumerate() {
        let text = if k == 0 { value } else { line.as_str() };
        for c in text.split('#').next().unwrap_or("").chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
        }
        if depth <= 0 {
            return k + 1;
        }
    }
    end - i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_without_a_section_changes_nothing() {
        assert_eq!(updated_config(None, &SidecarChoice::Local).unwrap(), None);
        assert_eq!(
            updated_config(Some("port = 1\n"), &SidecarChoice::Local).unwrap(),
            None
        );
        assert_eq!(
            updated_config(Some("x"), &SidecarChoice::Keep).unwrap(),
            None
        );
    }

    #[test]
    fn remote_is_written_keeping_comments_and_other_keys() {
        let text = "# my config\nport = 47111\n\n[sidecar]\n# cap it\ndaily_cap = 50\nmodels = [\n  \"old\",\n]\n\n[context]\nmax_memories = 4\n";
        let choice = SidecarChoice::Remote {
            url: "https://llm.example/v1".into(),
            models: vec!["a".into(), "b".into()],
            key_file: PathBuf::from("/k/key"),
        };
        let new = updated_config(Some(text), &choice).unwrap().unwrap();
        assert!(
            new.starts_with("# my config\nport = 47111\n\n[sidecar]\n# cap it\ndaily_cap = 50\n"),
            "{new}"
        );
        assert!(new.contains("models = [\"a\", \"b\"]\n"), "{new}");
        assert!(!new.contains("old"), "{new}");
        assert!(
            new.contains(
                "remote = true\nurl = \"https://llm.example/v1\"\nkey_file = \"/k/key\"\n"
            ),
            "{new}"
        );
        assert!(new.ends_with("[context]\nmax_memories = 4\n"), "{new}");
        let table: toml::Table = toml::from_str(&new).unwrap();
        assert_eq!(table["sidecar"]["daily_cap"].as_integer(), Some(50));
        assert_eq!(
            updated_config(Some(&new), &choice).unwrap(),
            None,
            "idempotent"
        );

        let back = updated_config(Some(&new), &SidecarChoice::Local)
            .unwrap()
            .unwrap();
        let table: toml::Table = toml::from_str(&back).unwrap();
        assert_eq!(table["sidecar"]["remote"].as_bool(), Some(false));
    }

    #[test]
    fn a_new_section_is_appended() {
        let choice = SidecarChoice::Remote {
            url: "http://h/v1".into(),
            models: vec!["m".into()],
            key_file: "/k".into(),
        };
        let new = updated_config(Some("port = 1"), &choice).unwrap().unwrap();
        assert!(
            new.starts_with("port = 1\n\n[sidecar]\nremote = true\n"),
            "{new}"
        );
        let fresh = updated_config(None, &choice).unwrap().unwrap();
        assert!(fresh.starts_with("[sidecar]\n"), "{fresh}");
    }

    #[test]
    fn interactive_answers() {
        let mut out = Vec::new();
        let mut input: &[u8] = b"";
        assert_eq!(
            ask(&mut input, &mut out).unwrap(),
            SidecarChoice::Local,
            "EOF is the default"
        );
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key");
        std::fs::write(&key, "sk").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
            let script = format!("2\nhttps://x/v1\nm1, m2\n{}\n\n\n\n", key.display());
            let mut input = script.as_bytes();
            let mut out = Vec::new();
            assert_eq!(
                ask(&mut input, &mut out).unwrap(),
                SidecarChoice::Local,
                "a world-readable key file is refused"
            );
            assert!(String::from_utf8_lossy(&out).contains("chmod 600"));
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let script = format!(
            "2\nftp://x\nm\n{0}\nhttps://x/v1/\nm1, m2\n{0}\n",
            key.display()
        );
        let mut input = script.as_bytes();
        let choice = ask(&mut input, &mut out).unwrap();
        assert_eq!(
            choice,
            SidecarChoice::Remote {
                url: "https://x/v1".into(),
                models: vec!["m1".into(), "m2".into()],
                key_file: key
            }
        );
    }
}
