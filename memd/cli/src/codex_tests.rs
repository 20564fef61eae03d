use super::*;
use crate::json;

fn handler(command: &str, timeout: i64) -> Json {
    Json::object([
        ("type", Json::str("command")),
        ("command", Json::str(command)),
        ("timeout", Json::int(timeout)),
    ])
}

#[test]
fn the_trust_hash_is_the_one_codex_accepts() {
    // Codex 0.169.0 ran a UserPromptSubmit hook with exactly this command and timeout only once
    // config.toml held this hash for it (and skipped it with the hash changed by one digit).
    let h = handler("touch /tmp/cl19/explore/fired", 600);
    assert_eq!(
        trust_hash("user_prompt_submit", None, &h),
        "sha256:376b8c48de684aeb504ed71fe2990b7af486dba8cb17f1b60ef38749d459a0b3"
    );
    // An unset timeout is Codex's default, 600; a matcher changes the hash.
    let bare = Json::object([
        ("type", Json::str("command")),
        ("command", Json::str("touch /tmp/cl19/explore/fired")),
    ]);
    assert_eq!(
        trust_hash("user_prompt_submit", None, &bare),
        trust_hash("user_prompt_submit", None, &h)
    );
    assert_ne!(
        trust_hash("pre_tool_use", Some("Bash"), &h),
        trust_hash("pre_tool_use", None, &h)
    );
}

#[test]
fn event_labels_are_snake_case() {
    assert_eq!(event_label("UserPromptSubmit"), "user_prompt_submit");
    assert_eq!(event_label("PreToolUse"), "pre_tool_use");
    assert_eq!(event_label("Stop"), "stop");
}

#[test]
fn hooks_and_trust_entries_follow_the_users_own_hooks() {
    let mut doc = json::parse(
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}"#,
    )
    .unwrap();
    hooks_add(&mut doc, Path::new("/opt/memd/bin")).unwrap();
    let again = {
        let mut d = doc.clone();
        hooks_add(&mut d, Path::new("/opt/memd/bin")).unwrap();
        d
    };
    assert_eq!(doc, again, "adding twice changes nothing");
    let trust = trust_entries(Path::new("/h/.codex/hooks.json"), &doc);
    let keys: Vec<&str> = trust.iter().map(|t| t.key.as_str()).collect();
    assert!(keys.contains(&"/h/.codex/hooks.json:stop:1:0"), "{keys:?}");
    assert!(
        keys.contains(&"/h/.codex/hooks.json:pre_tool_use:0:0"),
        "{keys:?}"
    );
    assert!(
        keys.contains(&"/h/.codex/hooks.json:session_start:0:0"),
        "{keys:?}"
    );
    assert_eq!(
        trust.len(),
        CODEX_HOOKS.len(),
        "the user's own Stop hook is not memd's to trust"
    );
    let stop = doc
        .get("hooks")
        .unwrap()
        .get("Stop")
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(
        stop[1].get("hooks").unwrap().as_array().unwrap()[0]
            .get("command")
            .unwrap()
            .as_str(),
        Some("/opt/memd/bin/hook-stop --codex")
    );
}

#[test]
fn config_toml_keeps_the_users_text_and_loses_only_memds() {
    let path = Path::new("/h/.codex/config.toml");
    let user = "# my settings\nmodel = \"o4\"\n\n[mcp_servers.github]\ncommand = \"gh-mcp\"\n";
    let trust = vec![Trust {
        key: "/h/.codex/hooks.json:stop:0:0".into(),
        hash: "sha256:abc".into(),
    }];
    let after = config_add(path, Some(user), Path::new("/bin/memd"), &[], &trust)
        .unwrap()
        .expect("a change");
    assert!(after.starts_with(user), "{after}");
    assert_eq!(
        mcp_registered(&after),
        Some((
            "/bin/memd".to_string(),
            SERVER_ARGS.iter().map(|a| a.to_string()).collect()
        ))
    );
    assert_eq!(
        trusted_hash(&after, "/h/.codex/hooks.json:stop:0:0").as_deref(),
        Some("sha256:abc")
    );
    assert_eq!(
        config_add(path, Some(&after), Path::new("/bin/memd"), &trust, &trust).unwrap(),
        None,
        "a second init changes nothing"
    );
    let removed = config_remove(path, Some(&after), &trust)
        .unwrap()
        .expect("a change");
    assert_eq!(removed.trim_end(), user.trim_end());
    assert!(parse_toml(path, Some("mcp_servers = 3\n")).is_ok());
    assert!(config_add(path, Some("mcp_servers = 3\n"), Path::new("/m"), &[], &[]).is_err());
    assert!(config_add(path, Some("[oops\n"), Path::new("/m"), &[], &[]).is_err());
}
