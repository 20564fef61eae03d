use super::*;
use crate::json::{parse, to_pretty};

const USER_SETTINGS: &str = r#"{
  "model": "opus",
  "hooks": {
    "UserPromptSubmit": [
      { "hooks": [ { "type": "command", "command": "/usr/local/bin/lint-prompt", "timeout": 5 } ] }
    ],
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "~/bin/guard.sh" } ] }
    ]
  },
  "permissions": { "allow": ["Bash(git status)"], "deny": ["Read(./.env)"] },
  "statusLine": { "type": "command", "command": "echo hi" }
}"#;

fn bin() -> &'static Path {
    Path::new("/opt/memd bin")
}

fn added(text: &str) -> Json {
    let mut doc = parse(text).unwrap();
    claude_settings_add(&mut doc, bin()).unwrap();
    doc
}

#[test]
fn command_program_unquotes_the_first_word() {
    assert_eq!(command_program("/a/hook-prompt --cursor"), "/a/hook-prompt");
    assert_eq!(
        command_program("'/opt/memd bin/hook-stop' --cursor"),
        "/opt/memd bin/hook-stop"
    );
    assert_eq!(command_program("  \"/x y/hook-stop\""), "/x y/hook-stop");
    assert!(is_memd_command("'/opt/memd bin/hook-stop' --cursor"));
    assert!(is_memd_command("hook-prompt"));
    assert!(!is_memd_command("/usr/bin/my-hook-prompt"));
    assert!(!is_memd_command("echo hook-prompt"));
    // The Windows renderings: PowerShell's call operator, Git Bash's forward slashes, `.exe`.
    assert!(is_memd_command(
        r"& 'C:\Program Files\memd\hook-stop.exe' --cursor"
    ));
    assert!(is_memd_command(r"C:\Users\dev\bin\hook-prompt.exe --codex"));
    assert!(is_memd_command("'C:/Program Files/memd/hook-prompt.exe'"));
    assert!(!is_memd_command(r"& 'C:\tools\my-hook-stop.exe'"));
}

#[test]
fn claude_add_keeps_user_entries_and_order() {
    let doc = added(USER_SETTINGS);
    let keys: Vec<&str> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["model", "hooks", "permissions", "statusLine"]);
    let ups = doc
        .get("hooks")
        .unwrap()
        .get("UserPromptSubmit")
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(ups.len(), 2, "user group kept, ours appended");
    assert_eq!(
        ups[0],
        parse(USER_SETTINGS)
            .unwrap()
            .get("hooks")
            .unwrap()
            .get("UserPromptSubmit")
            .unwrap()
            .as_array()
            .unwrap()[0]
    );
    let ours = &ups[1].get("hooks").unwrap().as_array().unwrap()[0];
    assert_eq!(
        ours.get("command").unwrap().as_str(),
        Some("'/opt/memd bin/hook-prompt'")
    );
    assert_eq!(ours.get("timeout"), Some(&Json::int(10)));
    let stop = &doc
        .get("hooks")
        .unwrap()
        .get("Stop")
        .unwrap()
        .as_array()
        .unwrap()[0];
    assert_eq!(
        stop.get("hooks").unwrap().as_array().unwrap()[0].get("timeout"),
        Some(&Json::int(30))
    );
    assert!(doc.get("hooks").unwrap().get("PreToolUse").is_some());
    let allow = doc
        .get("permissions")
        .unwrap()
        .get("allow")
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(allow[0].as_str(), Some("Bash(git status)"));
    assert_eq!(
        allow.len(),
        2 + CLAUDE_TOOL_PERMISSIONS.len(),
        "memd's tools, memd-score's and the user's"
    );
    assert!(doc.get("permissions").unwrap().get("deny").is_some());
}

#[test]
fn claude_add_is_idempotent_and_replaces_stale_paths_in_place() {
    let once = added(USER_SETTINGS);
    let mut twice = once.clone();
    claude_settings_add(&mut twice, bin()).unwrap();
    assert_eq!(once, twice);

    // An older install elsewhere: replaced where it was, duplicates dropped, user hooks kept.
    let stale = r#"{"hooks":{"Stop":[
        {"hooks":[{"type":"command","command":"/old/hook-stop","timeout":5},{"type":"command","command":"notify-send done"}]},
        {"hooks":[{"type":"command","command":"/older/hook-stop"}]}
    ]}}"#;
    let doc = added(stale);
    let groups = doc
        .get("hooks")
        .unwrap()
        .get("Stop")
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(
        groups.len(),
        1,
        "the group holding only a stale memd hook is gone: {groups:?}"
    );
    let handlers = groups[0].get("hooks").unwrap().as_array().unwrap();
    assert_eq!(handlers.len(), 2);
    assert_eq!(
        handlers[0].get("command").unwrap().as_str(),
        Some("'/opt/memd bin/hook-stop'")
    );
    assert_eq!(
        handlers[1].get("command").unwrap().as_str(),
        Some("notify-send done")
    );
}

#[test]
fn claude_remove_restores_the_user_document() {
    let original = parse(USER_SETTINGS).unwrap();
    let mut doc = added(USER_SETTINGS);
    assert!(claude_settings_remove(&mut doc).unwrap());
    assert_eq!(doc, original);
    assert!(
        !claude_settings_remove(&mut doc).unwrap(),
        "nothing left to remove"
    );

    let mut fresh = parse("{}").unwrap();
    claude_settings_add(&mut fresh, bin()).unwrap();
    claude_settings_remove(&mut fresh).unwrap();
    assert_eq!(to_pretty(&fresh, "  "), "{}\n");
}

#[test]
fn permissions_the_user_already_had_are_not_duplicated() {
    let doc = added(r#"{"permissions":{"allow":["mcp__memd__search_memory"]}}"#);
    let allow = doc
        .get("permissions")
        .unwrap()
        .get("allow")
        .unwrap()
        .as_array()
        .unwrap();
    let n = allow
        .iter()
        .filter(|e| e.as_str() == Some("mcp__memd__search_memory"))
        .count();
    assert_eq!(n, 1);
    assert_eq!(allow.len(), CLAUDE_TOOL_PERMISSIONS.len() + 1);
}

#[test]
fn wrong_shapes_are_errors_naming_the_key() {
    let mut doc = parse(r#"{"hooks": []}"#).unwrap();
    let e = claude_settings_add(&mut doc, bin()).unwrap_err();
    assert_eq!(e.at, "hooks");
    assert_eq!(e.found, "an array");
    let mut doc = parse(r#"{"hooks": {"Stop": {"x": 1}}}"#).unwrap();
    assert_eq!(
        claude_settings_add(&mut doc, bin()).unwrap_err().at,
        "hooks.Stop"
    );
    let mut doc = parse("[1]").unwrap();
    assert_eq!(
        claude_settings_add(&mut doc, bin()).unwrap_err().at,
        "(top level)"
    );
    let mut doc = parse(r#"{"mcpServers": "x"}"#).unwrap();
    assert_eq!(mcp_add(&mut doc, Json::Null).unwrap_err().at, "mcpServers");
}

#[test]
fn mcp_add_keeps_other_servers_and_position() {
    let text = r#"{"numStartups": 12, "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp"}, "memd": {"url": "old"}, "z": {}}, "projects": {}}"#;
    let mut doc = parse(text).unwrap();
    mcp_add(
        &mut doc,
        mcp_http_entry("http://127.0.0.1:47111/mcp", "tok", true),
    )
    .unwrap();
    let servers = doc.get("mcpServers").unwrap().as_object().unwrap();
    assert_eq!(servers.keys().collect::<Vec<_>>(), ["github", "memd", "z"]);
    assert_eq!(
        servers.get("memd").unwrap().get("type").unwrap().as_str(),
        Some("http")
    );
    assert_eq!(
        servers
            .get("memd")
            .unwrap()
            .get("headers")
            .unwrap()
            .get("Authorization")
            .unwrap()
            .as_str(),
        Some("Bearer tok")
    );
    assert!(mcp_remove(&mut doc).unwrap());
    assert_eq!(
        doc.get("mcpServers")
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["github", "z"]
    );

    let mut only = parse("{}").unwrap();
    mcp_add(&mut only, mcp_http_entry("u", "t", false)).unwrap();
    assert!(mcp_registered(&only).unwrap().get("type").is_none());
    mcp_remove(&mut only).unwrap();
    assert!(is_leftover_shell(&only));
}

#[test]
fn stdio_entries_run_memd_mcp_and_replace_an_http_entry() {
    let memd = Path::new("/opt/memd bin/memd");
    let mut doc = parse(r#"{"mcpServers": {"a": {}, "memd": {"type": "http", "url": "u", "headers": {"Authorization": "Bearer t"}}}}"#).unwrap();
    mcp_add(&mut doc, mcp_stdio_entry(memd, true)).unwrap();
    let entry = mcp_registered(&doc).unwrap();
    let expected = r#"{"type": "stdio", "command": "/opt/memd bin/memd", "args": ["mcp"]}"#;
    assert_eq!(entry, &parse(expected).unwrap());
    assert!(mcp_is_stdio(entry));
    assert!(!to_pretty(&doc, "").contains("Bearer"), "the token is gone");

    let cursor = mcp_stdio_entry(memd, false);
    assert!(cursor.get("type").is_none() && mcp_is_stdio(&cursor));
    assert!(!mcp_is_stdio(&mcp_http_entry("u", "t", true)));
    assert!(!mcp_is_stdio(&mcp_http_entry("u", "t", false)));
}

#[test]
fn cursor_hooks_merge_and_remove() {
    let text = r#"{"hooks": {"stop": [{"command": "./audit.sh"}], "afterFileEdit": [{"command": "fmt"}]}}"#;
    let mut doc = parse(text).unwrap();
    cursor_hooks_add(&mut doc, Path::new("/b")).unwrap();
    assert_eq!(
        doc.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["version", "hooks"]
    );
    let stop = doc
        .get("hooks")
        .unwrap()
        .get("stop")
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(stop[0].get("command").unwrap().as_str(), Some("./audit.sh"));
    assert_eq!(
        stop[1].get("command").unwrap().as_str(),
        Some("/b/hook-stop --cursor")
    );
    for event in cursor_events() {
        assert_eq!(cursor_hook_commands(&doc, event).len(), 1, "{event}");
    }
    let once = doc.clone();
    cursor_hooks_add(&mut doc, Path::new("/b")).unwrap();
    assert_eq!(doc, once, "idempotent");

    assert!(cursor_hooks_remove(&mut doc).unwrap());
    let hooks = doc.get("hooks").unwrap().as_object().unwrap();
    assert_eq!(hooks.keys().collect::<Vec<_>>(), ["stop", "afterFileEdit"]);
    assert_eq!(hooks.get("stop").unwrap().as_array().unwrap().len(), 1);

    let mut fresh = parse("").unwrap();
    cursor_hooks_add(&mut fresh, Path::new("/b")).unwrap();
    cursor_hooks_remove(&mut fresh).unwrap();
    assert!(is_leftover_shell(&fresh));
}

#[test]
fn doctor_sees_configured_commands() {
    let doc = added(USER_SETTINGS);
    assert_eq!(
        claude_hook_commands(&doc, "Stop"),
        ["'/opt/memd bin/hook-stop'"]
    );
    assert!(claude_hook_commands(&parse(USER_SETTINGS).unwrap(), "UserPromptSubmit").is_empty());
    // The tool events: the guard before every tool, the evidence after.
    assert_eq!(
        claude_hook_commands(&doc, "PreToolUse"),
        ["'/opt/memd bin/hook-prompt'"]
    );
    assert_eq!(
        claude_hook_commands(&doc, "PostToolUse"),
        ["'/opt/memd bin/hook-stop'"]
    );
    // Before a compaction, hook-stop digests the conversation (both triggers).
    assert_eq!(
        claude_hook_commands(&doc, "PreCompact"),
        ["'/opt/memd bin/hook-stop'"]
    );
    assert_eq!(
        doc.get("hooks")
            .and_then(|h| h.get("PreCompact"))
            .and_then(Json::as_array)
            .unwrap()[0]
            .get("matcher")
            .and_then(Json::as_str),
        Some("manual|auto")
    );
    assert!(
        claude_events().any(|e| e == "PreCompact"),
        "doctor checks it"
    );
    let mut removed = doc.clone();
    assert!(claude_settings_remove(&mut removed).unwrap());
    for event in claude_events() {
        assert!(claude_hook_commands(&removed, event).is_empty(), "{event}");
    }
}
