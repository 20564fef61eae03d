//! The OpenAPI document as the fuzzer uses it: resolving `$ref`s, generating values of a
//! schema's shape, and checking answers against the documented schemas.

use super::inputs::{edge_integer, edge_number, edge_string, random_json, random_string};
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Map, Value, json};

pub struct Schemas(pub Value);

impl Schemas {
    pub fn resolve<'a>(&'a self, s: &'a Value) -> &'a Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => self.resolve(
                &self.0["components"]["schemas"][r.trim_start_matches("#/components/schemas/")],
            ),
            None => s,
        }
    }

    /// A value of the schema's shape with random content; with `edges`, often at or past its
    /// limits (extreme numbers, strings one past `maxLength`, control characters).
    pub fn typed(&self, rng: &mut StdRng, schema: &Value, depth: usize, edges: bool) -> Value {
        let s = self.resolve(schema);
        if let Some(any) = s.get("anyOf").and_then(Value::as_array)
            && s.get("type").is_none()
        {
            let pick = &any[rng.random_range(0..any.len())];
            return self.typed(rng, pick, depth, edges);
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array)
            && (!edges || rng.random_bool(0.9))
        {
            return e[rng.random_range(0..e.len())].clone();
        }
        let ty = match s.get("type") {
            Some(Value::Array(ts)) => ts[rng.random_range(0..ts.len())].as_str().unwrap_or("null"),
            Some(Value::String(t)) => t.as_str(),
            _ => return random_json(rng, depth.min(3)),
        };
        match ty {
            "null" => Value::Null,
            "boolean" => json!(rng.random_bool(0.5)),
            "integer" => json!(edge_integer(rng, s, edges)),
            "number" => edge_number(rng, s, edges),
            "string" => json!(edge_string(rng, s, edges)),
            "array" => {
                let max = s.get("maxItems").and_then(Value::as_u64).unwrap_or(4) as usize;
                let n = rng.random_range(0..=(max + 1).min(6));
                let items = s.get("items").cloned().unwrap_or(json!({}));
                Value::Array(
                    (0..n)
                        .map(|_| self.typed(rng, &items, depth + 1, edges))
                        .collect(),
                )
            }
            "object" => self.typed_object(rng, s, depth, edges),
            _ => Value::Null,
        }
    }

    fn typed_object(&self, rng: &mut StdRng, s: &Value, depth: usize, edges: bool) -> Value {
        let mut out = Map::new();
        let names = |v: &Value| -> Vec<String> {
            let list = v.get("required").and_then(Value::as_array);
            list.into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let required = names(s);
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                if required.contains(k) || rng.random_bool(0.6) {
                    out.insert(k.clone(), self.typed(rng, v, depth + 1, edges));
                }
            }
        }
        // One branch of an `anyOf` of required sets (at least one of query, days_back, id):
        // that field present and, like the branch says, not null.
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            let branch = &any[rng.random_range(0..any.len())];
            for k in names(branch) {
                let full = &s["properties"][&k];
                let v = (0..16)
                    .map(|_| self.typed(rng, full, depth + 1, edges))
                    .find(|v| !v.is_null())
                    .unwrap_or_else(|| json!("x"));
                out.insert(k, v);
            }
        }
        // Aliases (`id` / `doc_id`) must not both be sent: keep the first.
        for part in s
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let excluded = names(&part["not"]);
            if !edges && excluded.iter().all(|k| out.contains_key(k)) {
                let null = excluded.iter().find(|k| out[k.as_str()].is_null());
                if let Some(drop) = null.or(excluded.last()).cloned() {
                    out.remove(&drop);
                }
            }
        }
        if edges && s.get("additionalProperties").is_some() && depth < 4 {
            for _ in 0..rng.random_range(0..4) {
                out.insert(random_string(rng, 12), random_json(rng, 2));
            }
        }
        Value::Object(out)
    }
}

/// Strict JSON Schema subset check of an answer (undeclared keys are refused).
pub fn conforms(schemas: &Schemas, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let s = schemas.resolve(schema);
    if let Some(any) = s.get("anyOf").and_then(Value::as_array)
        && !any.iter().any(|b| conforms(schemas, b, v, at).is_ok())
    {
        return Err(format!("{at}: matches no anyOf branch"));
    }
    for part in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        conforms(schemas, part, v, at)?;
    }
    if let Some(not) = s.get("not")
        && conforms(schemas, not, v, at).is_ok()
    {
        return Err(format!("{at}: matches the excluded shape {not}"));
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            other => vec![other.as_str().unwrap_or("")],
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
        let fits = types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
        if !fits {
            return Err(format!("{at}: {actual}, documented {types:?}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return Err(format!("{at}: {v} not in {e:?}"));
    }
    match v {
        Value::Array(items) => match s.get("items") {
            Some(is) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, x)| conforms(schemas, is, x, &format!("{at}[{i}]"))),
            None => Ok(()),
        },
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            for r in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let r = r.as_str().unwrap_or("");
                if !map.contains_key(r) {
                    return Err(format!("{at}: required `{r}` missing"));
                }
            }
            for (k, x) in map {
                let path = format!("{at}.{k}");
                match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                    (Some(ps), _) => conforms(schemas, ps, x, &path)?,
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(ap)) if ap.is_object() => conforms(schemas, ap, x, &path)?,
                    (None, _) if props.is_some() => {
                        return Err(format!("{path}: undocumented field"));
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
