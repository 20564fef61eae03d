//! `Metadata`: a memory's free-form fields, as a small map kept in one sorted vector.
//!
//! Owns the map's representation and its serde form (a plain map, keys in sorted order, as a
//! `BTreeMap` wrote it). Must never change what is written or read: only how it is held. Why
//! not a `BTreeMap`: a memory has two or three fields, and a B-tree allocates an 11-slot node
//! for them (~630 bytes); a store of a million memories spent most of its record memory there.

use crate::value::Value;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;

/// Free-form metadata attached to a memory: a map from field name to value, in key order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
}

impl Metadata {
    pub fn new() -> Self {
        Self::default()
    }

    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        String: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&Value>
    where
        String: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut Value>
    where
        String: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        String: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.find(key.as_str()) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<Value>
    where
        String: Borrow<Q>,
    {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Heap bytes the entries take (the vector, not what the values point to).
    pub fn table_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<(String, Value)>()
    }
}

impl<Q: Ord + ?Sized> std::ops::Index<&Q> for Metadata
where
    String: Borrow<Q>,
{
    type Output = Value;

    /// The value of `key`; panics when there is none, as a `BTreeMap` does.
    fn index(&self, key: &Q) -> &Value {
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
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a> IntoIterator for &'a Metadata {
    type Item = (&'a String, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a String, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
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
        let mut entries: Vec<(String, Value)> =
            Vec::with_capacity(a.size_hint().unwrap_or(0).min(64));
        while let Some((k, v)) = a.next_entry::<String, Value>()? {
            entries.push((k, v));
        }
        // What memd wrote is sorted and unique already; anything else is ordered here, the
        // last of repeated keys winning as it would in a `BTreeMap`.
        let sorted = entries.windows(2).all(|w| w[0].0 < w[1].0);
        if sorted {
            entries.shrink_to_fit();
            return Ok(Metadata { entries });
        }
        Ok(entries.into_iter().collect())
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
