//! The part of `config.toml` a client needs: the top-level `data_dir` and `port` keys.
//!
//! The daemon parses the whole file with the `toml` crate and rejects unknown keys; the hooks
//! link this crate statically and must stay small, so they read only these two keys, which sit
//! before the first `[table]` (every other key of memd's config lives in a table). A value this
//! reader does not understand is an error, never a silent default: a hook that guessed the
//! wrong data dir would start a second daemon. The daemon's tests check that both readers agree.

use std::path::PathBuf;

/// The client-relevant top-level keys of `config.toml`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settings {
    pub data_dir: Option<PathBuf>,
    pub port: Option<u16>,
}

/// Reads `data_dir` and `port` from the text of a config file.
pub fn parse(text: &str) -> Result<Settings, String> {
    let mut settings = Settings::default();
    // Editors on some systems start the file with a byte-order mark; TOML parsers skip it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            // The first table header ends the top-level keys.
            break;
        }
        let Some((key, value)) = split_key_value(line) else {
            continue;
        };
        let at = |e: String| format!("line {}: {e}", index + 1);
        match key.as_str() {
            "data_dir" => {
                let path = parse_string(value).map_err(at)?;
                settings.data_dir = Some(PathBuf::from(path));
            }
            "port" => settings.port = Some(parse_port(value).map_err(at)?),
            _ => {}
        }
    }
    Ok(settings)
}

/// `key = value` with a bare or quoted key; `None` for lines that are not a top-level pair.
fn split_key_value(line: &str) -> Option<(String, &str)> {
    let (key, rest) = if let Some(quoted) = line.strip_prefix('"') {
        let end = quoted.find('"')?;
        (quoted[..end].to_string(), &quoted[end + 1..])
    } else if let Some(quoted) = line.strip_prefix('\'') {
        let end = quoted.find('\'')?;
        (quoted[..end].to_string(), &quoted[end + 1..])
    } else {
        let end = line.find(|c: char| c == '=' || c.is_whitespace())?;
        (line[..end].to_string(), &line[end..])
    };
    let value = rest.trim_start().strip_prefix('=')?.trim();
    Some((key, value))
}

/// A one-line TOML string (basic `"…"` with escapes, or literal `'…'`), then an optional comment.
fn parse_string(value: &str) -> Result<String, String> {
    if value.starts_with("\"\"\"") || value.starts_with("'''") {
        return Err("data_dir: multi-line strings are not supported; use a one-line string".into());
    }
    if let Some(body) = value.strip_prefix('\'') {
        let end = body.find('\'').ok_or("data_dir: unterminated string")?;
        expect_end(&body[end + 1..])?;
        return Ok(body[..end].to_string());
    }
    let body = value
        .strip_prefix('"')
        .ok_or("data_dir must be a string, e.g. data_dir = \"/path/to/memd\"")?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                expect_end(&body[i + 1..])?;
                return Ok(out);
            }
            '\\' => {
                let (_, e) = chars.next().ok_or("data_dir: unterminated string")?;
                match e {
                    'b' => out.push('\u{8}'),
                    't' => out.push('\t'),
                    'n' => out.push('\n'),
                    'f' => out.push('\u{c}'),
                    'r' => out.push('\r'),
                    'e' => out.push('\u{1b}'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'u' | 'U' => {
                        let width = if e == 'u' { 4 } else { 8 };
                        let hex: String = chars.by_ref().take(width).map(|(_, h)| h).collect();
                        let code = u32::from_str_radix(&hex, 16)
                            .ok()
                            .filter(|_| hex.len() == width)
                            .and_then(char::from_u32)
                            .ok_or("data_dir: invalid unicode escape")?;
                        out.push(code);
                    }
                    other => return Err(format!("data_dir: invalid escape \\{other}")),
                }
            }
            c => out.push(c),
        }
    }
    Err("data_dir: unterminated string".into())
}

fn parse_port(value: &str) -> Result<u16, String> {
    let digits = value.split('#').next().unwrap_or("").trim();
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    let valid = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_')
        && !digits.starts_with('_')
        && !digits.ends_with('_');
    digits
        .replace('_', "")
        .parse::<u16>()
        .ok()
        .filter(|_| valid)
        .ok_or_else(|| format!("port must be a TCP port number 0-65535 (got {digits:?})"))
}

/// After a string value only whitespace and a comment may follow.
fn expect_end(rest: &str) -> Result<(), String> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err(format!(
            "data_dir: unexpected text after the string: {rest:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(text: &str) -> Option<PathBuf> {
        parse(text).unwrap().data_dir
    }

    #[test]
    fn reads_top_level_keys_and_stops_at_the_first_table() {
        let s = parse("# memd\nport = 47_200 # mine\ndata_dir = \"/srv/memd\"\n[context]\ndata_dir = \"/nope\"\n")
            .unwrap();
        assert_eq!(s.data_dir, Some(PathBuf::from("/srv/memd")));
        assert_eq!(s.port, Some(47200));
        assert_eq!(parse("[sidecar]\nport = 1\n").unwrap(), Settings::default());
    }

    #[test]
    fn strings_follow_toml() {
        assert_eq!(
            dir(r"data_dir = 'C:\memd' "),
            Some(PathBuf::from(r"C:\memd"))
        );
        assert_eq!(
            dir(r#"data_dir="a\tb\\c\"d\u00e9""#),
            Some(PathBuf::from("a\tb\\c\"d\u{e9}"))
        );
        assert_eq!(
            dir(r#""data_dir" = "/x" # note"#),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(dir("data_directory = \"/x\""), None);
        assert_eq!(
            dir("\u{feff}data_dir = \"/bom\""),
            Some(PathBuf::from("/bom"))
        );
    }

    #[test]
    fn what_it_cannot_read_is_an_error() {
        for bad in [
            "data_dir = /x",
            "data_dir = \"/x",
            "data_dir = \"/x\" junk",
            "data_dir = \"\"\"/x\"\"\"",
            "data_dir = \"\\q\"",
            "port = 70000",
            "port = \"47111\"",
            "port = 1__",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
