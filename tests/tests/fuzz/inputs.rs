//! Random and malformed inputs: numbers and strings at the edges, arbitrary JSON, mutations
//! of valid bodies, and bodies no JSON encoder would produce.

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
pub fn edge_integer(rng: &mut StdRng, s: &Value, edges: bool) -> i128 {
    let lo = s.get("minimum").and_then(Value::as_i64).unwrap_or(-1_000) as i128;
    let hi = s
        .get("maximum")
        .and_then(Value::as_i64)
        .unwrap_or(1_000_000) as i128;
    if !edges {
        return rng.random_range(lo..=hi.min(lo + 50));
    }
    match rng.random_range(0..10) {
        0 => lo,
        1 => hi,
        2 => lo - 1,
        3 => hi + 1,
        4 => i64::MAX as i128,
        5 => i64::MIN as i128,
        6 => u64::MAX as i128,
        _ => rng.random_range(lo..=hi),
    }
}

pub fn edge_number(rng: &mut StdRng, s: &Value, edges: bool) -> Value {
    let lo = s.get("minimum").and_then(Value::as_f64).unwrap_or(-1e6);
    let hi = s.get("maximum").and_then(Value::as_f64).unwrap_or(1e6);
    if !edges {
        return json!(rng.random_range(lo..=hi));
    }
    match rng.random_range(0..10) {
        0 => json!(lo),
        1 => json!(hi),
        2 => json!(1e308),
        3 => json!(-1e308),
        4 => json!(5e-324),
        5 => json!(-0.0),
        6 => json!(hi + 1e-9),
        _ => json!(rng.random_range(lo..=hi)),
    }
}

pub fn edge_string(rng: &mut StdRng, s: &Value, edges: bool) -> String {
    let max = s
        .get("maxLength")
        .and_then(Value::as_u64)
        .map(|m| m as usize);
    if !edges {
        let words: Vec<&str> = (0..rng.random_range(1..8))
            .map(|_| {
                [
                    "deploy", "cache", "port", "worked", "billing", "the", "5433",
                ][rng.random_range(0..7)]
            })
            .collect();
        return words.join(" ").chars().take(max.unwrap_or(200)).collect();
    }
    match (rng.random_range(0..12), max) {
        (0, Some(m)) => "é".repeat(m),
        (1, Some(m)) => "x".repeat(m + 1),
        (2, _) => String::new(),
        (3, _) => "   \n\t ".into(),
        (4, _) => "worked".into(),
        (5, _) => "<private>hidden</private>".into(),
        (6, _) => "\u{0}\u{1}\u{7f}\u{feff}\u{202e}\u{fffd}".into(),
        (7, _) => format!(
            "{}_{}",
            ["working", "memory_bank", "books", "patterns"][rng.random_range(0..4)],
            random_string(rng, 12)
        ),
        _ => random_string(rng, max.unwrap_or(200).min(300)),
    }
}

pub fn random_string(rng: &mut StdRng, max: usize) -> String {
    let n = rng.random_range(0..=max.max(1));
    (0..n)
        .map(|_| match rng.random_range(0..10) {
            0 => char::from_u32(rng.random_range(0x80..0x2_FFFF)).unwrap_or('?'),
            1 => char::from(rng.random_range(0u8..0x20)),
            2 => ['"', '\\', '/', '<', '>', '{', '$', '\''][rng.random_range(0..8)],
            _ => char::from(rng.random_range(b'a'..=b'z')),
        })
        .collect()
}

/// Any JSON value at all.
pub fn random_json(rng: &mut StdRng, depth: usize) -> Value {
    let pick = if depth == 0 {
        rng.random_range(0..5)
    } else {
        rng.random_range(0..7)
    };
    match pick {
        0 => Value::Null,
        1 => json!(rng.random_bool(0.5)),
        2 => [
            json!(0),
            json!(-1),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e308),
            json!(0.5),
        ][rng.random_range(0..6)]
        .clone(),
        3 | 4 => json!(random_string(rng, 40)),
        5 => Value::Array(
            (0..rng.random_range(0..5))
                .map(|_| random_json(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.random_range(0..5))
                .map(|_| (random_string(rng, 10), random_json(rng, depth - 1)))
                .collect(),
        ),
    }
}

/// `valid` with one field replaced by a value of another type, dropped, or renamed.
pub fn mutate(rng: &mut StdRng, valid: &Value) -> Value {
    let Value::Object(map) = valid else {
        return random_json(rng, 3);
    };
    let mut map = map.clone();
    let keys: Vec<String> = map.keys().cloned().collect();
    if keys.is_empty() {
        map.insert(random_string(rng, 8), random_json(rng, 2));
        return Value::Object(map);
    }
    let key = keys[rng.random_range(0..keys.len())].clone();
    match rng.random_range(0..4) {
        0 => {
            map.remove(&key);
        }
        1 => {
            let v = map.remove(&key).unwrap_or(Value::Null);
            map.insert(key.to_uppercase() + "_", v);
        }
        _ => {
            map.insert(key, random_json(rng, 3));
        }
    }
    Value::Object(map)
}

/// Bodies no JSON encoder would produce.
pub fn malformed_bodies(rng: &mut StdRng) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("whitespace".into(), b" \n\t ".to_vec()),
        ("null".into(), b"null".to_vec()),
        ("number".into(), b"42".to_vec()),
        ("truncated".into(), br#"{"query": "abc"#.to_vec()),
        ("bom".into(), b"\xef\xbb\xbf{}".to_vec()),
        (
            "nan".into(),
            br#"{"importance": NaN, "limit": Infinity}"#.to_vec(),
        ),
        (
            "invalid utf-8 in string".into(),
            b"{\"content\": \"ok \xff\xfe\xc3\x28 \", \"query\": \"\xed\xa0\x80\"}".to_vec(),
        ),
        (
            "lone surrogate escape".into(),
            br#"{"content": "\ud800", "query": "\udfff x", "conversation_id": "\ud83d"}"#.to_vec(),
        ),
        (
            "duplicate keys".into(),
            br#"{"content": "a", "content": 5, "limit": 1, "limit": "x"}"#.to_vec(),
        ),
        (
            "deep arrays".into(),
            [vec![b'['; 100_000], vec![b']'; 100_000]].concat(),
        ),
        (
            "deep objects".into(),
            [b"{\"a\":".repeat(50_000), b"1".to_vec(), vec![b'}'; 50_000]].concat(),
        ),
        (
            "deep metadata".into(),
            [
                b"{\"content\":\"x\",\"metadata\":{\"m\":".to_vec(),
                b"[".repeat(126),
                b"]".repeat(126),
                b"}}".to_vec(),
            ]
            .concat(),
        ),
        (
            "huge integer literal".into(),
            format!("{{\"limit\": {}, \"days_back\": 1}}", "9".repeat(5000)).into_bytes(),
        ),
        (
            "huge exponent".into(),
            br#"{"importance": 1e999999, "days_back": -1e400}"#.to_vec(),
        ),
        (
            "trailing garbage".into(),
            br#"{"query": "x"} {"query": "y"}"#.to_vec(),
        ),
        ("nul bytes".into(), b"{\"query\"\0: \"x\"}".to_vec()),
    ];
    let near = 1024 * 1024 - 64;
    out.push((
        "string near the body limit".into(),
        json!({"content": "a".repeat(near), "query": "b", "title": "t", "key_takeaway": "k"})
            .to_string()
            .into_bytes(),
    ));
    out.push((
        "body just over 1 MiB".into(),
        json!({"content": "a".repeat(1024 * 1024)})
            .to_string()
            .into_bytes(),
    ));
    out.push((
        "many keys".into(),
        Value::Object((0..20_000).map(|i| (format!("k{i}"), json!(i))).collect())
            .to_string()
            .into_bytes(),
    ));
    for n in 0..20 {
        let len = rng.random_range(1..4096);
        out.push((
            format!("random bytes {n}"),
            (0..len).map(|_| rng.random()).collect(),
        ));
    }
    out
}
