//! `Metadata`: a memory's free-form fields, as a small map kept in one sorted vector.
//!
//! Owns the map's representation and its serde form (a plain map, keys in sorted order, as a
//! `BTreeMap` wrote it). Must never change what is written or read: only how it is held. Why
//! not a `BTreeMap`: a memory has two or three fields, and a B-tree allocates an 11-slot node
//! for them (~630 bytes); a store of a million memories spent most of its record memory there.
//! The field names memd itself writes are held as static text, not one heap string per memory
//! (at 1M memories two names each took 64 bytes a memory; bench/EVAL.md section 28).

use crate::value::Value;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A field name: the index of one of `KNOWN`, else its own text. 16 bytes, so an entry
/// with its `Value` is 48 (a `String` key made it 56).
/// Opaque outside this module: only its text is seen (`Deref`).
#[derive(Clone, PartialEq)]
pub struct Key(Name);

#[derive(Clone, PartialEq)]
enum Name {
    Known(u8),
    Own(Box<str>),
}

impl std::ops::Deref for Key {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Key(Name::Known(i)) => KNOWN[usize::from(*i)],
            Key(Name::Own(s)) => s,
        }
    }
}

impl Key {
    fn into_string(self) -> String {
        match self {
            Key(Name::Own(s)) => s.into_string(),
            known => known.to_string(),
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// Field names memd writes on many memories, sorted (held without an allocation each).
const KNOWN: [&str; 12] = [
    "chunk_count",
    "conversation_id",
    "exchange_id",
    "exchange_outcome",
    "file",
    "memory_type",
    "promoted_at",
    "source",
    "supersedes",
    "title",
    "trigger",
    "type",
];

/// `name` as a key when it is a known one.
fn known(name: &str) -> Option<Key> {
    let i = KNOWN.binary_search(&name).ok()?;
    Some(Key(Name::Known(i as u8)))
}

/// `name` as a key: known, else its own text.
fn key_of(name: String) -> Key {
    known(&name).unwrap_or_else(|| Key(Name::Own(name.into_boxed_str())))
}

/// Free-form metadata attached to a memory: a map from field name to value, in key order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata {
    entries: Vec<(Key, Value)>,
}

impl Metadata {
    pub fn new() -> Self {
        Self::default()
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.find(key.as_str()) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                let key = key_of(key);
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| &**k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Heap bytes the entries take (the vector, not what the values point to).
    pub fn table_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<(Key, Value)>()
    }

    /// Heap bytes the field names take (known names take none).
    pub fn key_bytes(&self) -> usize {
        self.entries
            .iter()
            .map(|(k, _)| match k {
                Key(Name::Known(_)) => 0,
                Key(Name::Own(s)) => s.len(),
            })
            .sum()
    }
}

impl std::ops::Index<&str> for Metadata {
    type Output = Value;

    /// The value of `key`; panics when there is none, as a `BTreeMap` does.
    fn index(&self, key: &str) -> &Value {
        self.get(key).expect("no entry found for key")
    }
}

impl FromIterator<(String, Value)> for Metadata {
    /// Later entries win over earlier ones with the same key, as a `BTreeMap` collects.
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut m = Metadata::new();
        m.extend(iter);
        m
    }
}

impl Extend<(String, Value)> for Metadata {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<const N: usize> From<[(String, Value); N]> for Metadata {
    fn from(entries: [(String, Value); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl IntoIterator for Metadata {
    type Item = (String, Value);
    type IntoIter =
        std::iter::Map<std::vec::IntoIter<(Key, Value)>, fn((Key, Value)) -> (String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter().map(|(k, v)| (k.into_string(), v))
    }
}

impl<'a> IntoIterator for &'a Metadata {
    type Item = (&'a str, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Key, Value)>,
        fn(&'a (Key, Value)) -> (&'a str, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Metadata, D::Error> {
        d.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Metadata;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of metadata fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Metadata, A::Error> {
        let mut entries: Vec<(Key, Value)> = Vec::with_capacity(a.size_hint().unwrap_or(0).min(64));
        while let Some(k) = a.next_key_seed(KeySeed)? {
            entries.push((k, a.next_value()?));
        }
        // What memd wrote is sorted and unique already; anything else is ordered here, the
        // last of repeated keys winning as it would in a `BTreeMap`.
        let sorted = entries.windows(2).all(|w| *w[0].0 < *w[1].0);
        if sorted {
            entries.shrink_to_fit();
            return Ok(Metadata { entries });
        }
        let mut m = Metadata::new();
        for (k, v) in entries {
            match m.find(&k) {
                Ok(i) => m.entries[i].1 = v,
                Err(i) => m.entries.insert(i, (k, v)),
            }
        }
        Ok(m)
    }
}

/// Reads a field name without allocating when it is a known one.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E>(self, s: &str) -> Result<Key, E> {
        Ok(known(s).unwrap_or_else(|| Key(Name::Own(s.into()))))
    }

    fn visit_string<E>(self, s: String) -> Result<Key, E> {
        Ok(key_of(s))
    }

    /// MessagePack may carry text as raw bytes; as `String` would, UTF-8 bytes are a name.
    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Key, E> {
        match std::str::from_utf8(b) {
            Ok(s) => self.visit_str(s),
            Err(_) => Err(E::invalid_type(de::Unexpected::Bytes(b), &self)),
        }
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Metadata {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <std::collections::BTreeMap<String, Value> as schemars::JsonSchema>::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <std::collections::BTreeMap<String, Value> as schemars::JsonSchema>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_keys_sorted_and_unique_like_a_btreemap() {
        let mut m = Metadata::new();
        assert_eq!(m.insert("b".into(), 2.0.into()), None);
        assert_eq!(m.insert("a".into(), "x".into()), None);
        assert_eq!(m.insert("b".into(), 3.0.into()), Some(Value::Number(2.0)));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(m.get("b").and_then(Value::as_f64), Some(3.0));
        assert_eq!(m["a"], Value::from("x"));
        assert!(m.contains_key("a") && !m.contains_key("c"));
        assert_eq!(m.remove("a"), Some(Value::from("x")));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn serde_form_is_that_of_a_btreemap() {
        let m: Metadata = [
            ("z".to_string(), Value::from(1.0)),
            ("a".to_string(), Value::from("s")),
        ]
        .into();
        let b: std::collections::BTreeMap<String, Value> = m.clone().into_iter().collect();
        let packed = rmp_serde::to_vec_named(&m).unwrap();
        assert_eq!(packed, rmp_serde::to_vec_named(&b).unwrap());
        let back: Metadata = rmp_serde::from_slice(&packed).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn known_names_take_no_heap_and_read_back_alike() {
        assert!(
            KNOWN.windows(2).all(|w| w[0] < w[1]),
            "KNOWN is searched: sorted"
        );
        let m: Metadata = [
            ("memory_type".to_string(), Value::from("key_takeaway")),
            ("conversation_id".to_string(), Value::from("c1")),
            ("zz_own".to_string(), Value::from(1.0)),
        ]
        .into();
        assert_eq!(m.key_bytes(), "zz_own".len());
        let packed = rmp_serde::to_vec(&m).unwrap();
        let back: Metadata = rmp_serde::from_slice(&packed).unwrap();
        assert_eq!(back, m);
        assert_eq!(
            back.key_bytes(),
            "zz_own".len(),
            "decoded names are static too"
        );
        let json: Metadata = serde_json::from_str(r#"{"title":"t","x":null}"#).unwrap();
        assert_eq!(json.key_bytes(), 1);
        assert_eq!(json.keys().collect::<Vec<_>>(), ["title", "x"]);
    }

    #[test]
    fn unsorted_or_repeated_input_is_ordered_last_one_winning() {
        // A map written by another tool: keys out of order and one repeated.
        let mut bytes = vec![0x83];
        for (k, v) in [("b", 1u8), ("a", 2), ("b", 3)] {
            bytes.push(0xa0 | k.len() as u8);
            bytes.extend_from_slice(k.as_bytes());
            bytes.push(v);
        }
        let m: Metadata = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(m.get("b").and_then(Value::as_f64), Some(3.0));
    }
}
