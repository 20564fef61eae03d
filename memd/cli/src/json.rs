//! An order-preserving JSON document for editing other programs' config files.
//!
//! `serde_json::Value` sorts object keys (this workspace does not enable `preserve_order`), which
//! would reorder every key of a user's `settings.json` on the first `memd init`. This module owns
//! a small JSON tree that keeps keys in file order, parsing with positions in errors, and pretty
//! printing with the file's own indentation. It must never drop or reorder anything it did not
//! change.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::fmt;

/// A JSON value whose objects remember key order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Obj),
}

/// A JSON object as an ordered list of members.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Obj(Vec<(String, Json)>);

impl Obj {
    pub fn new() -> Obj {
        Obj(Vec::new())
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replaces the value in place (keeping the key's position) or appends the member.
    pub fn insert(&mut self, key: &str, value: Json) {
        match self.get_mut(key) {
            Some(slot) => *slot = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    /// The member's value, inserting `make()` at the end when absent.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> Json) -> &mut Json {
        let pos = match self.0.iter().position(|(k, _)| k == key) {
            Some(p) => p,
            None => {
                self.0.push((key.to_string(), make()));
                self.0.len() - 1
            }
        };
        &mut self.0[pos].1
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Builds an object from members in the given order.
    pub fn from_pairs<I: IntoIterator<Item = (&'static str, Json)>>(pairs: I) -> Obj {
        Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
}

impl Json {
    pub fn str(s: impl Into<String>) -> Json {
        Json::String(s.into())
    }

    pub fn int(n: i64) -> Json {
        Json::Number(n.into())
    }

    pub fn object(pairs: impl IntoIterator<Item = (&'static str, Json)>) -> Json {
        Json::Object(Obj::from_pairs(pairs))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Obj> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Obj> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Json>> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Json>> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// `self[key]` when `self` is an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// The JSON type's name, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// Why a config file could not be read as JSON; positions are 1-based.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// Parses a whole document. Empty or whitespace-only text is an empty object (editors and
/// some clients leave such files behind).
pub fn parse(text: &str) -> Result<Json, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(Json::Object(Obj::new()));
    }
    serde_json::from_str::<Json>(text).map_err(|e| {
        // serde_json appends " at line L column C" to its Display; keep only the cause.
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(cut) => full[..cut].to_string(),
            None => full,
        };
        ParseError {
            line: e.line(),
            column: e.column(),
            message,
        }
    })
}

/// The indentation unit a document uses (first indented line after an opening bracket),
/// defaulting to two spaces.
pub fn detect_indent(text: &str) -> String {
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_end();
        if t.ends_with('{') || t.ends_with('[') {
            let base = leading_ws(line);
            if let Some(next) = lines.clone().next() {
                let inner = leading_ws(next);
                if inner.len() > base.len() && inner.starts_with(base) {
                    return inner[base.len()..].to_string();
                }
            }
        }
    }
    "  ".to_string()
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Pretty-prints with the given indentation and a final newline.
pub fn to_pretty(doc: &Json, indent: &str) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    // Serialising this tree into memory cannot fail: every key is a string, every number valid.
    if doc.serialize(&mut ser).is_err() {
        return String::from("{}\n");
    }
    let mut s = String::from_utf8(out).unwrap_or_default();
    s.push('\n');
    s
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(obj) => {
                let mut map = s.serialize_map(Some(obj.len()))?;
                for (k, v) in obj.iter() {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut obj = Obj::new();
        // A repeated key keeps its first position and its last value, as JSON.parse does.
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            obj.insert(&k, v);
        }
        Ok(Json::Object(obj))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_survives_a_round_trip() {
        let text = "{\n  \"zeta\": 1,\n  \"alpha\": {\"b\": true, \"a\": null},\n  \"mid\": [1.5, \"x\"]\n}\n";
        let doc = parse(text).unwrap();
        let keys: Vec<&str> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["zeta", "alpha", "mid"]);
        let printed = to_pretty(&doc, "  ");
        assert_eq!(parse(&printed).unwrap(), doc);
        assert!(
            printed.find("\"b\"").unwrap() < printed.find("\"a\"").unwrap(),
            "{printed}"
        );
    }

    #[test]
    fn parse_errors_carry_positions() {
        let e = parse("{\n  \"a\": 1,\n  \"b\" 2\n}").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.column > 0);
        assert!(!e.message.contains(" at line "), "{}", e.message);
    }

    #[test]
    fn empty_text_is_an_empty_object_and_bom_is_ignored() {
        assert_eq!(parse("  \n").unwrap(), Json::Object(Obj::new()));
        assert_eq!(parse("\u{feff}{}").unwrap(), Json::Object(Obj::new()));
    }

    #[test]
    fn indentation_is_detected() {
        assert_eq!(detect_indent("{\n    \"a\": 1\n}"), "    ");
        assert_eq!(detect_indent("{\n\t\"a\": {\n\t\t\"b\": 1\n\t}\n}"), "\t");
        assert_eq!(detect_indent("{\"a\":1}"), "  ");
    }

    #[test]
    fn insert_keeps_position_and_big_numbers_survive() {
        let mut doc = parse("{\"a\": 1, \"b\": 18446744073709551615, \"c\": -5}").unwrap();
        let o = doc.as_object_mut().unwrap();
        o.insert("a", Json::str("x"));
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        let printed = to_pretty(&doc, "  ");
        assert!(printed.contains("18446744073709551615"), "{printed}");
    }
}
