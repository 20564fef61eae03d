//! `GET /openapi.json`: the OpenAPI 3.1 document, generated from the route table and the
//! `proto` types (JSON Schema by `schemars`), so it cannot drift from what the daemon reads and
//! sends.
//!
//! Owns the description of an operation ([`Operation`]) and turning a list of them into the
//! document. The list itself is `routes`', the same one the router is built from. Must never
//! describe a route that is not routed, and never be served without the token (it is harmless,
//! but the rule that only `/api/health` is public stays simple).

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// Makes the schema of one type (a `$ref` into `components/schemas`).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of `T`, registered in the document's components.
pub fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// What travels in a request or an answer.
#[derive(Clone, Copy)]
pub enum Payload {
    None,
    Json(SchemaFn),
    /// JSON Lines, one value of this schema per line.
    JsonLines(SchemaFn),
    /// Any JSON object (the document itself).
    AnyObject,
}

/// One routed operation, as documented.
#[derive(Clone, Copy)]
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    pub id: &'static str,
    pub summary: &'static str,
    pub request: Payload,
    pub response: Payload,
    /// Error statuses beyond the guard's 401/403 (all with an `ErrorBody`).
    pub errors: &'static [u16],
    /// Answered without the token.
    pub public: bool,
}

/// Statuses of a JSON POST route that decodes, validates and may write.
pub const WRITE_ERRORS: &[u16] = &[400, 413, 422, 500, 503, 507];
/// Statuses of a read-only GET route.
pub const READ_ERRORS: &[u16] = &[500];

fn error_description(status: u16) -> &'static str {
    match status {
        400 => "Malformed JSON, a wrong type, or an invalid value (`field` names it).",
        401 => "Missing or wrong bearer token.",
        403 => "Host or Origin is not loopback.",
        404 => "No such memory or book.",
        413 => "Body larger than the route's limit.",
        422 => "A text is longer than its limit; nothing was stored.",
        503 => {
            "The store refuses writes (read-only filesystem, or restart needed after a failed write)."
        }
        507 => "Out of disk space; nothing of this request was stored. Retry when space returns.",
        _ => "Unexpected internal error.",
    }
}

/// The whole document for `operations`.
pub fn document(operations: &[Operation]) -> Value {
    // OpenAPI 3.1 schemas are JSON Schema 2020-12; only the place of the definitions differs.
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator();
    let error_body = schema_of::<proto::ErrorBody>(&mut generator);
    let mut paths = Map::new();
    for op in operations {
        let entry = paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}));
        entry[op.method] = operation(op, &mut generator, &error_body);
    }
    let schemas = generator.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "memd",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "memd's loopback HTTP API. Every route but `/api/health` needs \
                `Authorization: Bearer <token>` (the `token` file in the data dir). Requests \
                from non-loopback Host or Origin headers are refused (403). Unknown request \
                fields are ignored. Generated from the daemon's route table and wire types.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The per-user token from the data dir's `token` file."
                }
            }
        }
    })
}

fn operation(op: &Operation, generator: &mut SchemaGenerator, error_body: &Schema) -> Value {
    let mut out = json!({"operationId": op.id, "summary": op.summary});
    if let Some(body) = content(op.request, generator) {
        out["requestBody"] = json!({"required": true, "content": body});
    }
    let mut responses = Map::new();
    let ok = match content(op.response, generator) {
        Some(body) => json!({"description": "OK", "content": body}),
        None => json!({"description": "OK"}),
    };
    responses.insert("200".into(), ok);
    let guard: &[u16] = if op.public { &[] } else { &[401, 403] };
    for status in guard.iter().chain(op.errors) {
        responses.insert(
            status.to_string(),
            json!({
                "description": error_description(*status),
                "content": {"application/json": {"schema": error_body}}
            }),
        );
    }
    out["responses"] = Value::Object(responses);
    if op.public {
        out["security"] = json!([]);
    }
    out
}

fn content(payload: Payload, generator: &mut SchemaGenerator) -> Option<Value> {
    match payload {
        Payload::None => None,
        Payload::Json(schema) => Some(json!({"application/json": {"schema": schema(generator)}})),
        Payload::JsonLines(schema) => Some(json!({
            "application/x-ndjson": {"schema": {"type": "string"}, "x-line-schema": schema(generator)}
        })),
        Payload::AnyObject => Some(json!({"application/json": {"schema": {"type": "object"}}})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        document(&super::super::routes::operations())
    }

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

    #[test]
    fn document_is_openapi_3_1_with_resolvable_refs_and_this_version() {
        let d = doc();
        assert_eq!(d["openapi"], "3.1.0");
        assert_eq!(d["info"]["version"], env!("CARGO_PKG_VERSION"));
        let mut all = Vec::new();
        refs(&d, &mut all);
        assert!(all.len() > 20, "{all:?}");
        for r in all {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("ref outside components: {r}"));
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
                let responses = &op["responses"];
                assert!(responses["200"].is_object(), "{method} {path}");
                if path == "/api/health" || path == "/api/hello" {
                    assert_eq!(op["security"], json!([]), "{path} is public");
                    continue;
                }
                for status in ["401", "403"] {
                    assert_eq!(
                        responses[status]["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{method} {path} {status}"
                    );
                }
                if method == "post" {
                    posts += 1;
                    assert!(responses["413"].is_object(), "{method} {path} has no 413");
                    assert!(op["requestBody"]["content"].is_object(), "{method} {path}");
                }
            }
        }
        assert_eq!(posts, 19, "every POST route is documented");
    }

    #[test]
    fn wire_limits_reach_the_schemas() {
        let d = doc();
        let search = &d["components"]["schemas"]["SearchRequest"]["properties"];
        assert_eq!(search["limit"]["maximum"], proto::limits::SEARCH_LIMIT.1);
        assert_eq!(search["query"]["maxLength"], proto::limits::QUERY_MAX_CHARS);
        let add = &d["components"]["schemas"]["MemoryBankAdd"];
        assert_eq!(
            add["properties"]["content"]["maxLength"],
            proto::limits::MEMORY_BANK_MAX_CHARS
        );
        assert!(
            add["required"]
                .as_array()
                .unwrap()
                .contains(&json!("content"))
        );
        let record = &d["paths"]["/api/import"]["post"]["requestBody"]["content"];
        assert_eq!(
            record["application/x-ndjson"]["x-line-schema"]["$ref"],
            "#/components/schemas/Record"
        );
    }
}
