//! A dependency-free JSON value, so raw metadata and filters can travel without `serde_json`.
//!
//! Owns `Value` and its decoding. Must never buffer or retry while decoding: every stored
//! memory's metadata goes through it when a snapshot is opened (a million at a time).

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Any JSON value. Numbers are kept as `f64` (metadata is small and human-made).
///
/// Written as the plain JSON value (untagged). Read by one visitor that takes whatever the
/// input holds: a derived untagged reader would buffer each value and try the variants in
/// turn, building an error for each miss, which made metadata most of a snapshot's decoding.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Number(n)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n as f64))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n as f64))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::Number(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    /// MessagePack may carry text as raw bytes; as before, UTF-8 bytes are a string.
    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Value, E> {
        match std::str::from_utf8(b) {
            Ok(s) => Ok(Value::String(s.to_owned())),
            Err(_) => Err(E::invalid_type(de::Unexpected::Bytes(b), &self)),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            out.insert(k, v);
        }
        Ok(Value::Map(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        let mut inner = BTreeMap::new();
        inner.insert("n".to_owned(), Value::Number(-3.5));
        inner.insert("none".to_owned(), Value::Null);
        Value::List(vec![
            Value::Null,
            Value::Bool(true),
            Value::Number(42.0),
            Value::from("text"),
            Value::Map(inner),
            Value::List(vec![]),
        ])
    }

    #[test]
    fn json_and_messagepack_round_trip_every_variant() {
        let v = sample();
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, r#"[null,true,42.0,"text",{"n":-3.5,"none":null},[]]"#);
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), v);
        for bytes in [
            rmp_serde::to_vec(&v).unwrap(),
            rmp_serde::to_vec_named(&v).unwrap(),
        ] {
            assert_eq!(rmp_serde::from_slice::<Value>(&bytes).unwrap(), v);
        }
    }

    #[test]
    fn integers_read_as_numbers_and_bad_input_is_an_error() {
        let v: Value = serde_json::from_str(r#"{"a":7,"b":-2,"c":[1]}"#).unwrap();
        let Value::Map(m) = v else {
            panic!("not a map: {v:?}")
        };
        assert_eq!(m["a"], Value::Number(7.0));
        assert_eq!(m["b"], Value::Number(-2.0));
        assert_eq!(m["c"], Value::List(vec![Value::Number(1.0)]));
        assert!(serde_json::from_str::<Value>("{\"a\":}").is_err());
        let not_utf8 = rmp_serde::to_vec(&serde_bytes::Bytes::new(&[0xff, 0xfe])).unwrap();
        assert!(rmp_serde::from_slice::<Value>(&not_utf8).is_err());
    }
}
