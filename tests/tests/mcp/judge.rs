//! Judging drive.py's reports: the tool catalog and the `full` scenario.

use serde_json::Value;

const TOOLS: [&str; 8] = [
    "get_context_insights",
    "search_memory",
    "add_to_memory_bank",
    "update_memory",
    "archive_memory",
    "delete_memory",
    "score_response",
    "record_response",
];

pub struct Report(pub Value);

impl Report {
    pub fn call(&self, label: &str) -> &Value {
        let c = &self.0["calls"][label];
        assert!(
            c.is_object(),
            "no call {label} in the report: {}",
            self.0["calls"]
        );
        c
    }

    pub fn ok(&self, label: &str) -> String {
        let c = self.call(label);
        assert!(
            c.get("protocol_error").is_none(),
            "{label}: protocol error {c}"
        );
        assert_eq!(c["is_error"], false, "{label} failed: {}", c["text"]);
        c["text"].as_str().unwrap_or_default().to_string()
    }

    /// A tool error (not a protocol error) whose text names every one of `needles`.
    pub fn tool_error(&self, label: &str, needles: &[&str]) {
        let c = self.call(label);
        assert!(
            c.get("protocol_error").is_none(),
            "{label}: a bad argument must be a tool result, got {c}"
        );
        assert_eq!(c["is_error"], true, "{label} should fail: {}", c["text"]);
        let text = c["text"].as_str().unwrap_or_default();
        for n in needles {
            assert!(text.contains(n), "{label}: error text lacks {n:?}: {text}");
        }
    }

    pub fn tool(&self, name: &str) -> &Value {
        self.0["tools"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == name))
            .unwrap_or_else(|| panic!("tool {name} not listed"))
    }

    pub fn description(&self, name: &str) -> String {
        self.tool(name)["description"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

pub fn check_catalog(r: &Report) {
    let mut names: Vec<&str> = r.0["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    let mut want = TOOLS.to_vec();
    want.sort_unstable();
    assert_eq!(names, want);
    let sections = [
        (
            "get_context_insights",
            &[
                "HOW MEMD WORKS",
                "READING A MEMORY",
                "SEARCHING",
                "WORKFLOW",
                "MEMORY HYGIENE",
                "w:0.68",
                "[YY~N]",
                "days_back=7",
                "search_memory(id=",
            ][..],
        ),
        (
            "search_memory",
            &[
                "WHEN TO SEARCH",
                "MODES",
                "READING RESULTS",
                "VERIFICATION USE",
                "days_back",
                "1–20",
            ][..],
        ),
        (
            "score_response",
            &[
                "<memd-score-required>",
                "FINDING THE MEMORIES",
                "PER-MEMORY SCORES",
                "ACTIVE MEMORY MANAGEMENT",
                "MISLED",
            ][..],
        ),
        (
            "add_to_memory_bank",
            &[
                "STORAGE DISCIPLINE",
                "confidence 0.5",
                "One fact per memory",
            ][..],
        ),
        ("update_memory", &["memory_bank"][..]),
        ("delete_memory", &["soft delete"][..]),
        ("record_response", &["initial_score"][..]),
    ];
    for (tool, needles) in sections {
        let d = r.description(tool);
        for n in needles {
            assert!(d.contains(n), "{tool} description lacks {n:?}");
        }
    }
    for t in TOOLS {
        let d = r.description(t).to_lowercase();
        assert!(
            !d.contains("roampal") && !d.contains("http"),
            "{t}: foreign name or link in the description"
        );
    }
    let schema = &r.tool("search_memory")["input_schema"];
    assert_eq!(schema["properties"]["limit"]["maximum"], 20);
    assert_eq!(schema["properties"]["days_back"]["maximum"], 365);
    assert!(
        schema
            .get("required")
            .is_none_or(|req| req.as_array().is_some_and(|a| a.is_empty())),
        "{schema}"
    );
    let score = &r.tool("score_response")["input_schema"];
    assert_eq!(score["required"], serde_json::json!(["outcome"]));
    // A client pinned to 2026-07-28 skips discovery and so never receives the instructions.
    if r.0["protocol_version"] != "2026-07-28" || r.0["instructions"].is_string() {
        let i = &r.0["instructions"];
        assert!(
            i.as_str()
                .is_some_and(|i| i.contains("get_context_insights")),
            "{i}"
        );
    }
}

/// Everything the `full` scenario of drive.py did, judged.
pub fn check_full(r: &Report) {
    check_catalog(r);
    let bank_id = r.0["extra"]["bank_id"]
        .as_str()
        .expect("bank id")
        .to_string();
    let tag = |id: &str| format!("[id:{id}]");

    assert!(
        r.ok("add_ok")
            .starts_with(&format!("Stored in memory_bank as {}", tag(&bank_id)))
    );
    r.tool_error(
        "add_bad_importance",
        &["importance", "between 0 and 1", "1.5"],
    );
    r.tool_error("add_missing_content", &["content"]);
    r.tool_error("add_wrong_type", &["importance"]);

    let found = r.ok("search_query");
    let line = found
        .lines()
        .find(|l| l.contains(&tag(&bank_id)))
        .unwrap_or_else(|| panic!("search lacks the fact: {found}"));
    assert!(
        line.contains("[memory_bank] (") && line.contains("imp:0.9, conf:0.8)"),
        "{line}"
    );
    assert!(
        line.split_once(". [")
            .is_some_and(|(n, _)| n.parse::<u32>().is_ok()),
        "numbered: {line}"
    );
    r.tool_error(
        "search_none",
        &["at least one of", "query", "days_back", "id"],
    );
    r.tool_error("search_limit_high", &["limit", "between 1 and 20", "50"]);
    r.tool_error("search_limit_type", &["limit"]);
    r.tool_error("search_days_bad", &["days_back", "between 1 and 365"]);
    assert!(r.ok("search_days").contains(&tag(&bank_id)));
    let full = r.ok("search_id");
    for n in [
        tag(&bank_id),
        "importance: 0.90".into(),
        "confidence: 0.80".into(),
        "tags: identity".into(),
        "created:".into(),
    ] {
        assert!(full.contains(&n), "id lookup lacks {n}: {full}");
    }
    assert!(r.ok("search_id_missing").contains("No memory has the id"));
    r.tool_error("search_sort_bad", &["sort_by", "recency"]);
    r.tool_error("search_collection_bad", &["collections", "memory_bank"]);
    r.tool_error("search_unknown_arg", &["days", "days_back"]);
    r.tool_error("search_metadata_bad", &["metadata", "$regex"]);

    assert_eq!(r.ok("update_ok"), format!("Updated {}.", tag(&bank_id)));
    r.tool_error("update_nothing", &["Nothing to update"]);
    r.tool_error("update_missing", &["no memory with id"]);
    r.tool_error("update_bad_confidence", &["confidence", "between 0 and 1"]);

    for i in 1..=5 {
        let ctx = r.ok(&format!("context_{i}"));
        assert!(
            ctx.contains("KNOWN CONTEXT") && ctx.contains(&tag(&bank_id)),
            "context_{i}: {ctx}"
        );
        // memd's self-audit trigger: every 5th context that shows memory_bank facts.
        assert_eq!(ctx.contains("SELF-AUDIT"), i == 5, "context_{i}: {ctx}");
    }

    let kept = r.ok("record_ok");
    assert!(
        kept.contains("[id:working_") && kept.contains("starting score 0.70"),
        "{kept}"
    );
    r.tool_error("record_bad", &["initial_score", "worked"]);
    r.tool_error("record_empty", &["key_takeaway"]);
    r.tool_error(
        "score_bad",
        &["outcome", "worked", "failed", "partial", "unknown"],
    );
    r.tool_error("score_bad_memory", &["memory_scores"]);

    r.tool_error("archive_none", &["Provide id or content"]);
    assert!(
        r.ok("delete_ok")
            .starts_with(&format!("Archived {}", tag(&bank_id)))
    );
    assert!(
        !r.ok("search_after_delete").contains(&tag(&bank_id)),
        "an archived fact still shows"
    );
    r.tool_error("delete_missing", &["no memory with id"]);
    let unknown = r.call("unknown_tool");
    assert!(
        unknown["protocol_error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown tool")),
        "{unknown}"
    );
}
