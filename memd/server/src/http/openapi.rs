//! `GET /openapi.json`: the OpenAPI 3.1 description of every `/api` route.
//!
//! Owns serving the document (`memd/openapi.json`, written by hand against the `proto` types)
//! and the tests that keep it truthful: every request example decodes into its `proto` type,
//! and every `proto` request and answer, fully populated or left at its defaults, validates
//! against its schema with no undeclared field. Must never describe a field the daemon does not
//! read or send, and never be served without the token (it is harmless, but the rule that only
//! `/api/health` is public stays simple).

use axum::response::Response;

/// The document, compiled into the binary.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

/// The answer to `GET /openapi.json`.
pub async fn response() -> Response {
    super::body::typed_response(200, "application/json", DOCUMENT.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::DOCUMENT;
    use proto::*;
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};
    use std::collections::BTreeMap;

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).expect("openapi.json is JSON")
    }

    /// A small JSON Schema checker for the keywords the document uses. `strict` also refuses
    /// object keys the schema does not declare (unless it sets `additionalProperties`): the
    /// daemon's answers must not carry undocumented fields.
    fn check(doc: &Value, schema: &Value, v: &Value, strict: bool, at: &str) -> Result<(), String> {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/components/schemas/");
            let target = &doc["components"]["schemas"][name];
            if target.is_null() {
                return Err(format!("{at}: dangling $ref {r}"));
            }
            return check(doc, target, v, strict, at);
        }
        if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
            let mut ok = false;
            let mut errors = Vec::new();
            for s in any {
                // Branches only add constraints; undeclared keys are judged by the parent.
                match check(doc, s, v, false, at) {
                    Ok(()) => ok = true,
                    Err(e) => errors.push(e),
                }
            }
            if !ok {
                return Err(format!("{at}: no anyOf branch matches: {errors:?}"));
            }
        }
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            check(doc, part, v, false, at)?;
        }
        if let Some(not) = schema.get("not")
            && check(doc, not, v, false, at).is_ok()
        {
            return Err(format!("{at}: matches the excluded shape {not}"));
        }
        if let Some(t) = schema.get("type") {
            let types: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => return Err(format!("{at}: bad type keyword")),
            };
            let actual = match v {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            let fits =
                types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
            if !fits {
                return Err(format!("{at}: {actual} where the schema says {types:?}"));
            }
        }
        if let Some(e) = schema.get("enum").and_then(Value::as_array)
            && !e.contains(v)
        {
            return Err(format!("{at}: {v} is not one of {e:?}"));
        }
        match v {
            Value::Object(map) => check_object(doc, schema, map, strict, at),
            Value::Array(items) => {
                if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                    && items.len() as u64 > max
                {
                    return Err(format!("{at}: more than {max} items"));
                }
                match schema.get("items") {
                    Some(s) => items
                        .iter()
                        .enumerate()
                        .try_for_each(|(i, x)| check(doc, s, x, strict, &format!("{at}[{i}]"))),
                    None => Ok(()),
                }
            }
            Value::String(s) => {
                let n = s.chars().count() as u64;
                let max = schema.get("maxLength").and_then(Value::as_u64);
                let min = schema.get("minLength").and_then(Value::as_u64);
                if max.is_some_and(|m| n > m) || min.is_some_and(|m| n < m) {
                    return Err(format!("{at}: length {n} outside {min:?}..{max:?}"));
                }
                Ok(())
            }
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(0.0);
                let lo = schema.get("minimum").and_then(Value::as_f64);
                let hi = schema.get("maximum").and_then(Value::as_f64);
                if lo.is_some_and(|m| x < m) || hi.is_some_and(|m| x > m) {
                    return Err(format!("{at}: {x} outside {lo:?}..{hi:?}"));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn check_object(
        doc: &Value,
        schema: &Value,
        map: &serde_json::Map<String, Value>,
        strict: bool,
        at: &str,
    ) -> Result<(), String> {
        let props = schema.get("properties").and_then(Value::as_object);
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !map.contains_key(req) {
                return Err(format!("{at}: required `{req}` missing"));
            }
        }
        for (k, x) in map {
            let path = format!("{at}.{k}");
            match (
                props.and_then(|p| p.get(k)),
                schema.get("additionalProperties"),
            ) {
                (Some(s), _) => check(doc, s, x, strict, &path)?,
                (None, Some(Value::Bool(true))) => {}
                (None, Some(Value::Bool(false))) => return Err(format!("{path}: not allowed")),
                (None, Some(s)) => check(doc, s, x, strict, &path)?,
                (None, None) if strict && props.is_some() => {
                    return Err(format!("{path}: not declared in the schema"));
                }
                (None, None) => {}
            }
        }
        Ok(())
    }

    fn schema(name: &str) -> Value {
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    fn assert_valid<T: Serialize>(name: &str, value: &T) {
        let d = doc();
        let v = serde_json::to_value(value).unwrap();
        if let Err(e) = check(&d, &schema(name), &v, true, name) {
            panic!("{name} does not match its schema: {e}\nvalue: {v}");
        }
    }

    fn assert_example_decodes<T: DeserializeOwned + Serialize>(name: &str) {
        let d = doc();
        let example = d["components"]["schemas"][name]["example"].clone();
        assert!(!example.is_null(), "{name} has an example");
        let parsed: T = serde_json::from_value(example.clone())
            .unwrap_or_else(|e| panic!("{name}'s example is not a {name}: {e}"));
        assert_valid(name, &parsed);
        check(&d, &schema(name), &example, true, name).unwrap();
    }

    fn memory() -> MemoryView {
        let mut metadata = Metadata::new();
        metadata.insert("memory_type".into(), Value2::from("exchange"));
        metadata.insert("n".into(), Value2::Number(3.0));
        MemoryView {
            id: "working_3fa9c2e1b07d".into(),
            collection: "working".into(),
            content: "User: hi\nAssistant: hello".into(),
            created_at: "2026-01-02T03:04:05Z".into(),
            age: "5m".into(),
            score: 0.5,
            wilson_score: 0.2,
            uses: 2,
            success_count: 1.5,
            learned_score: 0.6,
            last_outcome: "worked".into(),
            outcome_history: "[Y~]".into(),
            tags: vec!["x".into()],
            importance: Some(0.7),
            confidence: Some(0.7),
            embedding_similarity: Some(0.81),
            final_rank_score: Some(0.9),
            metadata,
        }
    }

    use proto::Value as Value2;

    fn attempt() -> SidecarAttempt {
        SidecarAttempt {
            at: "2026-01-02T03:04:05Z".into(),
            target: "ollama".into(),
            model: "qwen".into(),
            status: 200,
            latency_ms: 5,
            result: "ok:worked".into(),
        }
    }

    #[test]
    fn document_is_openapi_3_1_with_resolvable_refs_and_this_version() {
        let d = doc();
        assert!(d["openapi"].as_str().unwrap().starts_with("3.1."));
        assert_eq!(d["info"]["version"], env!("CARGO_PKG_VERSION"));
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                        out.push(r.to_string());
                    }
                    m.values().for_each(|x| refs(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&d, &mut all);
        assert!(all.len() > 50);
        for r in all {
            let name = r.strip_prefix("#/components/schemas/").expect("local ref");
            assert!(d["components"]["schemas"][name].is_object(), "dangling {r}");
        }
    }

    #[test]
    fn every_route_is_described_with_auth_and_error_answers() {
        let d = doc();
        let paths = d["paths"].as_object().unwrap();
        let mut posts = 0;
        for (path, item) in paths {
            for (method, op) in item.as_object().unwrap() {
                assert!(op["responses"]["200"].is_object(), "{method} {path}");
                let public = op.get("security") == Some(&json!([]));
                assert_eq!(public, path == "/api/health", "only health is public");
                if !public {
                    assert!(op["responses"]["401"].is_object(), "{method} {path}");
                }
                if method == "post" {
                    posts += 1;
                    for code in ["400", "413", "503", "507"] {
                        assert!(op["responses"][code].is_object(), "{path} {code}");
                    }
                    let json_body = op["requestBody"]["content"]["application/json"].is_object();
                    assert_eq!(json_body, op["responses"]["422"].is_object(), "{path} 422");
                }
            }
        }
        assert_eq!(paths.len(), 17);
        assert_eq!(posts, 12);
    }

    #[test]
    fn request_examples_decode_into_the_proto_types() {
        assert_example_decodes::<SearchRequest>("SearchRequest");
        assert_example_decodes::<MemoryBankAdd>("MemoryBankAdd");
        assert_example_decodes::<MemoryBankUpdate>("MemoryBankUpdate");
        assert_example_decodes::<MemoryBankArchive>("MemoryBankArchive");
        assert_example_decodes::<IngestRequest>("IngestRequest");
        assert_example_decodes::<RemoveBookRequest>("RemoveBookRequest");
        assert_example_decodes::<GetContextRequest>("GetContextRequest");
        assert_example_decodes::<StopRequest>("StopRequest");
        assert_example_decodes::<RecordOutcomeRequest>("RecordOutcomeRequest");
        assert_example_decodes::<RecordResponseRequest>("RecordResponseRequest");
        assert_example_decodes::<SidecarReport>("SidecarReport");
    }

    #[test]
    fn full_requests_match_their_schemas() {
        let mut filters = BTreeMap::new();
        filters.insert("memory_type".to_string(), Value2::from("exchange"));
        assert_valid(
            "SearchRequest",
            &SearchRequest {
                query: Some("q".into()),
                days_back: Some(7),
                id: Some("working_1".into()),
                conversation_id: Some("c".into()),
                collections: Some(vec!["working".into()]),
                limit: Some(5),
                metadata_filters: Some(filters),
                sort_by: Some(SortBy::Recency),
                include_archived: Some(true),
            },
        );
        let mut meta = Metadata::new();
        meta.insert(
            "k".into(),
            Value2::List(vec![Value2::Null, Value2::Bool(true)]),
        );
        assert_valid(
            "MemoryBankAdd",
            &MemoryBankAdd {
                content: "fact".into(),
                tags: vec!["t".into()],
                importance: Some(0.5),
                confidence: Some(0.5),
                metadata: Some(meta),
            },
        );
        assert_valid(
            "MemoryBankUpdate",
            &MemoryBankUpdate {
                id: "memory_bank_1".into(),
                content: Some("new".into()),
                tags: Some(vec!["t".into()]),
                importance: Some(1.0),
                confidence: Some(0.0),
            },
        );
        assert_valid(
            "MemoryBankArchive",
            &MemoryBankArchive {
                id: Some("memory_bank_1".into()),
                content: Some("fact".into()),
            },
        );
        assert_valid(
            "IngestRequest",
            &IngestRequest {
                title: "t".into(),
                content: "c".into(),
                source: Some("s".into()),
            },
        );
        assert_valid(
            "GetContextRequest",
            &GetContextRequest {
                query: "q".into(),
                conversation_id: "c".into(),
                cwd: Some("/p".into()),
                client: Some(Client::Mcp),
                session_start: true,
            },
        );
        assert_valid(
            "StopRequest",
            &StopRequest {
                conversation_id: "c".into(),
                user_message: "u".into(),
                assistant_response: "a".into(),
                client: Some(Client::Cursor),
            },
        );
        let mut scores = BTreeMap::new();
        scores.insert("working_1".to_string(), "failed".to_string());
        assert_valid(
            "RecordOutcomeRequest",
            &RecordOutcomeRequest {
                conversation_id: "c".into(),
                outcome: "worked".into(),
                memory_scores: Some(scores),
                related: Some(vec!["working_1".into()]),
                exchange_summary: Some("s".into()),
                source: Some("agent".into()),
            },
        );
        assert_valid(
            "RecordResponseRequest",
            &RecordResponseRequest {
                key_takeaway: "k".into(),
                initial_score: Some("worked".into()),
                conversation_id: Some("c".into()),
            },
        );
        assert_valid(
            "SidecarReport",
            &SidecarReport {
                conversation_id: "c".into(),
                attempts: vec![attempt()],
                scored: true,
            },
        );
    }

    #[test]
    fn answers_full_and_default_match_their_schemas() {
        assert_valid(
            "ErrorBody",
            &ErrorBody {
                error: "e".into(),
                field: Some("f".into()),
            },
        );
        assert_valid(
            "SearchResponse",
            &SearchResponse {
                results: vec![memory()],
                count: 1,
            },
        );
        assert_valid("SearchResponse", &SearchResponse::default());
        assert_valid("MemoryBankResponse", &MemoryBankResponse::default());
        assert_valid("IngestResponse", &IngestResponse::default());
        assert_valid(
            "BooksResponse",
            &BooksResponse {
                books: vec![BookInfo {
                    title: "t".into(),
                    chunks: 2,
                    created_at: "2026-01-02T03:04:05Z".into(),
                    source: Some("s".into()),
                }],
            },
        );
        assert_valid("RemoveBookResponse", &RemoveBookResponse::default());
        let mut counts = BTreeMap::new();
        counts.insert("working".to_string(), 3usize);
        assert_valid(
            "HealthResponse",
            &HealthResponse {
                status: "ok".into(),
                version: "0.1.0".into(),
                model_loaded: false,
                model_error: Some("run memd init".into()),
                counts,
                pid: 1,
                port: 47111,
            },
        );
        assert_valid("HealthResponse", &HealthResponse::default());
        let mut collections = BTreeMap::new();
        collections.insert("working".to_string(), CollectionStats::default());
        let mut counters = BTreeMap::new();
        counters.insert("promoted".to_string(), 1u64);
        let mut graph = BTreeMap::new();
        graph.insert("routing".to_string(), 1usize);
        assert_valid(
            "StatsResponse",
            &StatsResponse {
                version: "0.1.0".into(),
                collections,
                disk_bytes: 10,
                index: IndexStats::default(),
                lifecycle: counters,
                conversations: 2,
                knowledge_graph: graph,
                recent_hooks: vec![HookCall {
                    at: "2026-01-02T03:04:05Z".into(),
                    endpoint: "/api/hooks/stop".into(),
                    micros: 5,
                    status: 200,
                }],
                sidecar: SidecarStatus {
                    remote_enabled: true,
                    calls_today: 1,
                    daily_cap: 50,
                    attempts: vec![attempt()],
                    cooling: vec![CoolingEntry {
                        key: "zen/big-pickle".into(),
                        until: "2026-01-02T03:04:05Z".into(),
                        reason: "refused".into(),
                    }],
                },
            },
        );
        assert_valid("StatsResponse", &StatsResponse::default());
        assert_valid(
            "GetContextResponse",
            &GetContextResponse {
                formatted_injection: "KNOWN CONTEXT".into(),
                relevant_memories: vec![memory()],
                scoring_required: true,
                scoring_prompt: "<memd-score-required>".into(),
                scoring_memories: vec![ScoringMemory {
                    id: "working_1".into(),
                    content_hint: "hint".into(),
                }],
            },
        );
        assert_valid("GetContextResponse", &GetContextResponse::default());
        assert_valid(
            "StopResponse",
            &StopResponse {
                stored: true,
                doc_id: "working_1".into(),
                scoring_complete: false,
                should_block: false,
                block_message: Some("m".into()),
                needs_sidecar: true,
                sidecar_data: Some(SidecarData {
                    conversation_id: "c".into(),
                    exchange: ExchangeText::default(),
                    memories: vec![SidecarMemory::default()],
                    current_user_message: "u".into(),
                    targets: vec![SidecarTarget {
                        name: "zen".into(),
                        kind: TargetKind::Zen,
                        base_url: "https://example.invalid/v1".into(),
                        models: vec!["m".into()],
                        api_key: Some("k".into()),
                        discover_models: true,
                    }],
                    per_model_ms: 6000,
                    total_ms: 15000,
                    skip: vec!["zen/m".into()],
                }),
            },
        );
        assert_valid("StopResponse", &StopResponse::default());
        assert_valid(
            "RecordOutcomeResponse",
            &RecordOutcomeResponse {
                unknown_ids: vec!["working_x".into()],
                ..RecordOutcomeResponse::default()
            },
        );
        assert_valid("RecordResponseResponse", &RecordResponseResponse::default());
        assert_valid("SuccessResponse", &json!({"success": true}));
        assert_valid(
            "ImportResponse",
            &memd_engine::export::ImportResponse {
                rejected: 1,
                errors: vec![memd_engine::export::RejectedLine {
                    line: 3,
                    reason: "not a memd record".into(),
                }],
                ..Default::default()
            },
        );
        let mut record = memd_engine::record::Record {
            key: 7,
            id: "history_3fa9c2e1b07d".into(),
            collection: Collection::History,
            content: "c".into(),
            created_at: 1,
            updated_at: 2,
            score: 0.5,
            uses: 1,
            success_count: 1.0,
            outcome_history: vec![memd_engine::record::OutcomeEntry {
                outcome: Outcome::Worked,
                at: 2,
            }],
            last_outcome: Some(Outcome::Worked),
            last_used: Some(2),
            tags: vec!["t".into()],
            importance: Some(0.5),
            confidence: Some(0.5),
            archived: false,
            former_ids: vec!["working_3fa9c2e1b07d".into()],
            metadata: memory().metadata,
        };
        assert_valid("Record", &record);
        (
            record.last_outcome,
            record.last_used,
            record.importance,
            record.confidence,
        ) = (None, None, None, None);
        assert_valid("Record", &record);
        let line = serde_json::to_value(&record).unwrap();
        let back: memd_engine::record::Record = serde_json::from_value(line).unwrap();
        assert_eq!(back, record, "export lines import as the same record");
    }

    #[test]
    fn the_checker_rejects_what_it_should() {
        let d = doc();
        let bad = [
            (
                "MemoryBankResponse",
                json!({"success": true, "doc_id": "x"}),
            ),
            (
                "MemoryBankResponse",
                json!({"success": 1, "doc_id": "x", "duplicate": false}),
            ),
            ("SearchRequest", json!({"limit": 0})),
            ("SearchRequest", json!({"collections": ["nope"]})),
            ("MemoryBankAdd", json!({"content": "x".repeat(601)})),
            ("MemoryBankUpdate", json!({"content": "x"})),
            ("MemoryBankUpdate", json!({"id": "a", "doc_id": "b"})),
            (
                "RecordOutcomeRequest",
                json!({"outcome": "worked", "exchange_outcome": "failed"}),
            ),
            ("RecordOutcomeRequest", json!({"outcome": "great"})),
            ("SearchRequest", json!({"limit": 5})),
            (
                "SidecarReport",
                json!({"conversation_id": "c", "attempts": [], "scored": false, "x": 1}),
            ),
        ];
        for (name, v) in bad {
            assert!(
                check(&d, &schema(name), &v, true, name).is_err(),
                "{name} {v}"
            );
        }
    }

    #[tokio::test]
    async fn served_document_is_the_file() {
        let resp = super::response().await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/json");
    }
}
