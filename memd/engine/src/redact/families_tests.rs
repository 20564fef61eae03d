//! The families issue 37 found open: base64url payloads, secrets deep inside a long base64
//! run, `redis-cli` passwords and S3 presigned URLs; each beside text that must stay readable.

use super::{SecretKind, redact};

const SECRET_LINE: &str = "AWS_SECRET_ACCESS_KEY=Hn4tR8vK2pLz7Xq0Wm5Ys/Bd9Fg3Jc6Ve1Ta+Ku8";

/// RFC 4648 base64 (`url`: §5's `-` `_`, no padding), for building test input.
fn encode(data: &[u8], url: bool) -> String {
    let table: &[u8] = match url {
        false => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        true => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    };
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.len();
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=n {
            out.push(table[((v >> (18 - 6 * i)) & 63) as usize] as char);
        }
        if !url {
            out.extend(std::iter::repeat_n('=', 3 - n));
        }
    }
    out
}

/// `text` with `secret` replaced by the marker, and nothing else changed (a run redacted in
/// part would leave the rest decodable).
fn assert_redacted(text: &str, secret: &str, kind: SecretKind) {
    let r = redact(text);
    let clip = |t: &str| t.chars().take(160).collect::<String>();
    assert_eq!(
        r.text,
        text.replace(secret, &kind.marker()),
        "from {}",
        clip(text)
    );
}

#[test]
fn base64url_payloads_holding_a_secret_are_redacted() {
    // Chosen so the encoding has `-` and `_`: the standard alphabet's rule never saw it.
    let env = format!("# deploy ~~~ ???\n{SECRET_LINE}\nREGION=eu-west-1 >>> ok\n");
    let payload = encode(env.as_bytes(), true);
    assert!(payload.contains(['-', '_']), "{payload}");
    assert_redacted(
        &format!("CI_ENV={payload} is decoded by the job"),
        &payload,
        SecretKind::EncodedSecret,
    );
    // A JWT-like segment without dots: a JSON claim set carrying a key.
    let claims = encode(
        br#"{"sub":"ci>>bot","api_key":"sk-ant-api03-Zq8Xw2Lm5Rt9Yb3Kd7Hp1Vn4"}"#,
        true,
    );
    assert_redacted(
        &format!("payload {claims}"),
        &claims,
        SecretKind::EncodedSecret,
    );
    // Identifiers with underscores and dashes decode to no text: kept.
    let code = "call parse_incoming_request_headers_fast-path-v2 then retry";
    assert_eq!(redact(code).text, code);
    let harmless = encode(
        b"hello world, nothing secret in this base64url text at all ~~~>",
        true,
    );
    assert_eq!(redact(&harmless).text, harmless);
}

#[test]
fn a_secret_past_the_first_8_kib_of_a_base64_run_is_found() {
    let mut env = String::new();
    while env.len() < 40 * 1024 {
        env.push_str("FEATURE_FLAG_NUMBER_SOMETHING=enabled\n");
    }
    env.push_str(SECRET_LINE);
    env.push('\n');
    let run = encode(env.as_bytes(), false);
    assert!(run.len() > 50_000);
    assert_redacted(&run, &run, SecretKind::EncodedSecret);
    // Wrapped at 76 like `base64` prints it.
    let wrapped: Vec<String> = run
        .as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let wrapped = wrapped.join("\n");
    assert_redacted(&wrapped, &wrapped, SecretKind::EncodedSecret);
    // The same file without the secret stays as it is.
    let clean = encode(
        env.replace(SECRET_LINE, "LOG_LEVEL=debug").as_bytes(),
        false,
    );
    assert_eq!(redact(&clean).text, clean);
}

#[test]
fn redis_cli_passwords_are_redacted() {
    for (text, secret) in [
        ("redis-cli -a S3cr3tPass! ping", "S3cr3tPass!"),
        (
            "redis-cli -h cache.internal -p 6379 -a 'hunter2-x9' FLUSHDB",
            "hunter2-x9",
        ),
        ("redis-cli --pass Zq8Xw2Lm5R info", "Zq8Xw2Lm5R"),
        (
            "redis-cli -u redis://app:Kd7Hp1Vn4q@10.0.0.5:6379 ping",
            "Kd7Hp1Vn4q",
        ),
        (
            "redis-cli -u rediss://:Yb3Kd7Hp1V@cache:6380/0",
            "Yb3Kd7Hp1V",
        ),
    ] {
        let r = redact(text);
        assert!(!r.text.contains(secret), "{text} → {}", r.text);
        assert!(r.text.starts_with("redis-cli "), "{}", r.text);
    }
    for kept in [
        "redis-cli -a",
        "redis-cli --askpass ping",
        "redis-cli -p 6379 ping",
    ] {
        assert_eq!(redact(kept).text, kept);
    }
}

#[test]
fn aws_presigned_urls_lose_their_signature_credential_and_token() {
    let sig = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7";
    let cred = "AKIAIOSFODNN7EXAMPLE%2F20261127%2Fus-east-1%2Fs3%2Faws4_request";
    let token = "IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQ";
    let url = format!(
        "https://bucket.s3.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256\
         &X-Amz-Credential={cred}&X-Amz-Date=20261127T030000Z&X-Amz-Expires=3600\
         &X-Amz-Security-Token={token}&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}"
    );
    let r = redact(&format!("curl '{url}' -o report.csv"));
    for secret in [sig, cred, token, "AKIAIOSFODNN7EXAMPLE"] {
        assert!(!r.text.contains(secret), "{secret} survived: {}", r.text);
    }
    assert!(r.found.contains(&SecretKind::AwsPresigned), "{:?}", r.found);
    for kept in [
        "X-Amz-Date=20261127T030000Z",
        "X-Amz-Expires=3600",
        "report.csv",
    ] {
        assert!(r.text.contains(kept), "{kept} lost: {}", r.text);
    }
}
