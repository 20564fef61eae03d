//! Secret redaction for everything memd stores.
//!
//! Owns finding credentials in free text (API keys, tokens, private keys, passwords in URLs, in
//! `NAME=value` style assignments, on command lines and in sentences, and any of these inside
//! base64) and replacing each with a `[REDACTED:<kind>]` marker, and removing
//! `<private>…</private>` spans. Every write path calls [`scrub`] before text reaches the WAL,
//! snapshots, indexes, logs or an API answer; ids a client chooses go through [`safe_id`].
//!
//! Must never: keep or report the secret text itself (only its kind), panic on any input, or
//! build regexes per call (they are compiled once). Markers contain no quotes or backslashes, so
//! redacting inside a JSON or YAML string keeps the document well formed, and scrubbing twice
//! gives the same text as scrubbing once.
//!
//! `NAME=value` style assignments are judged in the `assignment` submodule, whose doc gives
//! the policy for telling a secret from ordinary code; passwords known by the words around them
//! (`mysql -p…`, `the password is …`) in `phrase`; base64 runs in `encoded`.

use regex::{CaptureLocations, Regex};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

mod assignment;
mod encoded;
mod phrase;

use assignment::{is_placeholder, judge_assignment, judge_cli_flag};
use phrase::{command_password, sentence_password};

macro_rules! secret_kinds {
    ($($variant:ident => $name:literal,)*) => {
        /// What kind of secret a marker stands for. `name()` is stable: markers and logs use it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum SecretKind { $($variant,)* }

        impl SecretKind {
            /// Every kind, for metrics and tests.
            pub const ALL: &[SecretKind] = &[$(Self::$variant,)*];

            pub const fn name(self) -> &'static str {
                match self { $(Self::$variant => $name,)* }
            }
        }
    };
}

secret_kinds! {
    PrivateKey => "private_key",
    AnthropicKey => "anthropic_key",
    OpenAiKey => "openai_key",
    GithubToken => "github_token",
    GitlabToken => "gitlab_token",
    DockerToken => "docker_token",
    SlackWebhook => "slack_webhook",
    SlackToken => "slack_token",
    StripeKey => "stripe_key",
    GoogleApiKey => "google_api_key",
    GoogleOauthSecret => "google_oauth_secret",
    AwsAccessKey => "aws_access_key",
    AwsSecretKey => "aws_secret_key",
    AzureSas => "azure_sas",
    AwsPresigned => "aws_presigned",
    HuggingfaceToken => "huggingface_token",
    NpmToken => "npm_token",
    SendgridKey => "sendgrid_key",
    Jwt => "jwt",
    BearerToken => "bearer_token",
    BasicAuth => "basic_auth",
    UrlPassword => "url_password",
    Password => "password",
    SecretValue => "secret_value",
    EncodedSecret => "encoded_secret",
}

impl SecretKind {
    /// The text that replaces a secret of this kind.
    pub fn marker(self) -> String {
        format!("{MARKER_PREFIX}{}]", self.name())
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const MARKER_PREFIX: &str = "[REDACTED:";

/// Redacted text plus the kind of every secret replaced, in text order (one entry per marker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub text: String,
    pub found: Vec<SecretKind>,
}

/// Removes `<private>` spans, then redacts secrets: what every write path calls.
pub fn scrub(text: &str) -> Redaction {
    redact(&strip_private(text))
}

/// An identifier a client chose (a conversation id) as memd may keep it: unchanged when it
/// holds no secret, else `redacted-<16 hex>`. Ids are keys (session state, the trace ledger,
/// exchange metadata), so a marker in place of the secret is not enough: the replacement is the
/// same for the same id, and the hooks of one conversation still meet. The digest is of the
/// redacted text, so a guessed secret cannot be confirmed against it; the price is that ids
/// differing only in their secrets share one key.
pub fn safe_id(id: &str) -> Cow<'_, str> {
    let scrubbed = scrub(id).text;
    if scrubbed == id {
        return Cow::Borrowed(id);
    }
    let digest = Sha256::digest(scrubbed.as_bytes());
    Cow::Owned(format!("redacted-{}", hex::encode(&digest[..8])))
}

/// Removes `<private>…</private>` spans (tag names case-insensitive, spans may cross lines and
/// nest). An unclosed tag removes everything after it; a stray closing tag is dropped.
pub fn strip_private(text: &str) -> String {
    static TAG: LazyLock<Regex> = LazyLock::new(|| compile(r"(?i)<(/?)private(?:\s[^>]*)?>"));
    let mut out = String::with_capacity(text.len());
    let (mut depth, mut copied_to) = (0usize, 0);
    for tag in TAG.captures_iter(text) {
        let (Some(whole), Some(slash)) = (tag.get(0), tag.get(1)) else {
            continue;
        };
        if depth == 0 {
            out.push_str(&text[copied_to..whole.start()]);
        }
        depth = if slash.is_empty() {
            depth + 1
        } else {
            depth.saturating_sub(1)
        };
        copied_to = whole.end();
    }
    if depth == 0 {
        out.push_str(&text[copied_to..]);
    }
    out
}

/// Replaces every secret found in `text` by its kind's marker.
pub fn redact(text: &str) -> Redaction {
    let spans = without_existing_markers(text, merged(find_spans(text, true)));
    let mut out = String::with_capacity(text.len());
    let mut found = Vec::with_capacity(spans.len());
    let mut copied_to = 0;
    for span in spans {
        out.push_str(&text[copied_to..span.range.start]);
        out.push_str(MARKER_PREFIX);
        out.push_str(span.kind.name());
        out.push(']');
        found.push(span.kind);
        copied_to = span.range.end;
    }
    out.push_str(&text[copied_to..]);
    Redaction { text: out, found }
}

/// A byte range to redact; `priority` is the index of the rule that found it (lower wins).
struct Span {
    range: Range<usize>,
    priority: usize,
    kind: SecretKind,
}

impl Span {
    fn new(range: Range<usize>, priority: usize, kind: SecretKind) -> Self {
        Span {
            range,
            priority,
            kind,
        }
    }
}

/// What a rule's judge returns for one regex match: the range to redact and its kind.
type Hit = Option<(Range<usize>, SecretKind)>;

/// Decides whether one regex match is a secret.
type Judge = fn(&str, &CaptureLocations, SecretKind) -> Hit;

struct Rule {
    kind: SecretKind,
    regex: Regex,
    judge: Judge,
}

/// Every rule's spans; with `decode`, also base64 runs that decode to a secret (decoded text is
/// searched without it, so decoding never nests).
fn find_spans(text: &str, decode: bool) -> Vec<Span> {
    let mut spans = Vec::new();
    for (priority, rule) in RULES.iter().enumerate() {
        let mut locs = rule.regex.capture_locations();
        let mut at = 0;
        while let Some(found) = rule.regex.captures_read_at(&mut locs, text, at) {
            if let Some((range, kind)) = (rule.judge)(text, &locs, rule.kind)
                && !range.is_empty()
            {
                spans.push(Span::new(range, priority, kind));
            }
            at = if found.is_empty() {
                next_char_boundary(text, found.end())
            } else {
                found.end()
            };
            if at > text.len() {
                break;
            }
        }
    }
    if decode {
        let last = RULES.len();
        spans.extend(
            encoded::encoded_secrets(text)
                .into_iter()
                .map(|(range, kind)| Span::new(range, last, kind)),
        );
    }
    spans
}

/// Sorts spans and unites overlapping ones, so no part of any secret survives; the most
/// specific rule involved names the result.
fn merged(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.range.start, s.priority));
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.range.start < last.range.end => {
                last.range.end = last.range.end.max(span.range.end);
                if span.priority < last.priority {
                    (last.priority, last.kind) = (span.priority, span.kind);
                }
            }
            _ => out.push(span),
        }
    }
    out
}

/// Markers already in the text (from an earlier scrub) are never re-redacted, so scrubbing is
/// idempotent. What a span covers beyond a marker is still redacted, unless it is a few
/// characters of punctuation or an escape (`\n`) left next to the marker.
fn without_existing_markers(text: &str, spans: Vec<Span>) -> Vec<Span> {
    static MARKER: LazyLock<Regex> = LazyLock::new(|| compile(r"\[REDACTED:[a-z_]{1,40}\]"));
    if spans.is_empty() || !text.contains(MARKER_PREFIX) {
        return spans;
    }
    let markers: Vec<Range<usize>> = MARKER.find_iter(text).map(|m| m.range()).collect();
    let mut kept = Vec::with_capacity(spans.len());
    for span in spans {
        let range = span.range.clone();
        let inside: Vec<&Range<usize>> = markers
            .iter()
            .filter(|m| m.start < range.end && m.end > range.start)
            .collect();
        if inside.is_empty() {
            kept.push(span);
            continue;
        }
        let mut pieces = Vec::new();
        let mut start = range.start;
        for marker in inside {
            pieces.push(start..marker.start.max(start));
            start = start.max(marker.end);
        }
        pieces.push(start..range.end.max(start));
        let substantial = |piece: &Range<usize>| text[piece.clone()].chars().count() > 3;
        let pieces = pieces.into_iter().filter(substantial);
        kept.extend(pieces.map(|piece| Span::new(piece, span.priority, span.kind)));
    }
    kept
}

fn next_char_boundary(text: &str, at: usize) -> usize {
    (at + 1..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(at + 1)
}

fn compile(pattern: &str) -> Regex {
    // The patterns are constants exercised by the tests, so a failure is a build bug.
    Regex::new(pattern).unwrap_or_else(|e| unreachable!("invalid built-in pattern: {e}"))
}

fn group(locs: &CaptureLocations, index: usize) -> Option<Range<usize>> {
    locs.get(index).map(|(s, e)| s..e)
}

fn whole(_: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    group(locs, 0).map(|r| (r, kind))
}

fn group1(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let range = group(locs, 1)?;
    (!is_placeholder(&text[range.clone()])).then_some((range, kind))
}

/// Random key material always mixes letters and digits; words joined by dashes do not.
fn letters_and_digits(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let range = group(locs, 1).or_else(|| group(locs, 0))?;
    let value = text[range.clone()].as_bytes();
    let mixed = value.iter().any(u8::is_ascii_digit) && value.iter().any(u8::is_ascii_alphabetic);
    mixed.then_some((range, kind))
}

fn mixed_case(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let range = group(locs, 0)?;
    let body = &text.as_bytes()[range.start + 3..range.end];
    let mixed = body.iter().any(u8::is_ascii_uppercase) && body.iter().any(u8::is_ascii_lowercase);
    mixed.then_some((range, kind))
}

/// A 40-character AWS secret must not be the start of a longer base64 run.
fn aws_secret(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let range = group(locs, 1)?;
    let next = text.as_bytes().get(range.end);
    let longer = next.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/');
    (!longer).then_some((range, kind))
}

/// The 40-character secret beside an access key id (a `credentials.csv` row); a 40-digit hex
/// string there is a commit or a digest, which base64 key material never is.
fn aws_pair_secret(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let (range, kind) = aws_secret(text, locs, kind)?;
    let hex = text[range.clone()].bytes().all(|b| b.is_ascii_hexdigit());
    (!hex).then_some((range, kind))
}

/// Base64 of a PEM block (kubeconfig `client-key-data`, Kubernetes secrets): redacted only when
/// the decoded header names a private key, so certificates stay readable.
fn base64_private_key(text: &str, locs: &CaptureLocations, kind: SecretKind) -> Hit {
    let range = group(locs, 0)?;
    let head = &text.as_bytes()[range.start..range.end.min(range.start + 64)];
    let decoded = decode_base64_prefix(head, Alphabet::Standard);
    decoded
        .windows(11)
        .any(|w| w == b"PRIVATE KEY")
        .then_some((range, kind))
}

/// Base64's two alphabets: `+` `/` (RFC 4648 §4) or `-` `_` (§5, URLs and JWTs).
#[derive(Clone, Copy)]
enum Alphabet {
    Standard,
    UrlSafe,
}

/// The bytes `encoded` decodes to, up to its first character outside `alphabet`.
fn decode_base64_prefix(encoded: &[u8], alphabet: Alphabet) -> Vec<u8> {
    let (c62, c63) = match alphabet {
        Alphabet::Standard => (b'+', b'/'),
        Alphabet::UrlSafe => (b'-', b'_'),
    };
    let sextet = |b: u8| match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        _ if b == c62 => Some(62),
        _ if b == c63 => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(encoded.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for value in encoded.iter().copied().map_while(sextet) {
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Rules in priority order: when matches overlap, the earlier (more specific) rule names the
/// marker. Token prefixes use an ASCII word boundary, which the lazy DFA handles on any text.
#[rustfmt::skip]
const RULE_TABLE: &[(SecretKind, &str, Judge)] = &[
    (SecretKind::PrivateKey, r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:,.()\s\\-]*?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----|(?:(?:[ \t]*(?:\r?\n|\\n)){1,2}[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*))+)", whole),
    (SecretKind::PrivateKey, r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}", base64_private_key),
    (SecretKind::AnthropicKey, r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{20,}", whole),
    (SecretKind::OpenAiKey, r"(?-u:\b)sk-[A-Za-z0-9_\-]{20,}", letters_and_digits),
    (SecretKind::GithubToken, r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})", whole),
    (SecretKind::GitlabToken, r"(?-u:\b)gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt)-[A-Za-z0-9_\-]{20,}", whole),
    (SecretKind::DockerToken, r"(?-u:\b)dckr_pat_[A-Za-z0-9_\-]{20,}", whole),
    (SecretKind::SlackWebhook, r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/\-]{10,})", group1),
    (SecretKind::SlackToken, r"(?-u:\b)(?:xox[abprse]-|xapp-)[A-Za-z0-9\-]{10,}", whole),
    (SecretKind::StripeKey, r"(?-u:\b)(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})", whole),
    (SecretKind::GoogleApiKey, r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}", whole),
    (SecretKind::GoogleOauthSecret, r"(?-u:\b)GOCSPX-[0-9A-Za-z_\-]{20,}", whole),
    (SecretKind::AwsAccessKey, r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)", whole),
    (SecretKind::AwsSecretKey, r#"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)["']?[ \t]*(?:=>|[:=])[ \t]*["']?([A-Za-z0-9/+]{40})"#, aws_secret),
    // `credentials.csv` (`alice,,AKIA…,<secret>`) and `aws configure list`-like columns.
    (SecretKind::AwsSecretKey, r#"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}["']?(?:[ \t]*[,;|:][ \t]*|[ \t]+)["']?([A-Za-z0-9/+]{40})"#, aws_pair_secret),
    // Azure SAS: only `sig` is secret; `sv`, `se`, `sp` are its readable terms.
    (SecretKind::AzureSas, r"[?&]sig=([A-Za-z0-9%+/=]{16,})", group1),
    // An S3 presigned URL: the signature, the credential (access key id and scope) and a
    // session's token; `X-Amz-Date`, `-Expires` and `-SignedHeaders` stay readable.
    (SecretKind::AwsPresigned, r"(?i)[?&](?:amp;)?X-Amz-(?:Signature|Credential|Security-Token)=([^&\s\x22'#<>]{8,})", group1),
    (SecretKind::HuggingfaceToken, r"(?-u:\b)hf_[A-Za-z0-9]{30,}", mixed_case),
    (SecretKind::NpmToken, r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)", whole),
    (SecretKind::SendgridKey, r"(?-u:\b)SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?-u:\b)", whole),
    (SecretKind::Jwt, r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", whole),
    (SecretKind::BearerToken, r#"(?i)authorization["']?[ \t]*[:=][ \t]*["']?(?:bearer|token)[ \t]+([A-Za-z0-9\-._~+/]{8,}=*)"#, group1),
    (SecretKind::BasicAuth, r#"(?i)authorization["']?[ \t]*[:=][ \t]*["']?basic[ \t]+([A-Za-z0-9+/]{8,}={0,2})"#, group1),
    (SecretKind::BearerToken, r"(?i:bearer)[ \t]+([A-Za-z0-9\-._~+/]{16,}=*)", letters_and_digits),
    (SecretKind::BasicAuth, r#"(?:^|[ \t])(?:-u|--user)[ \t]+["']?[^\s:"']+:([^\s"']+)"#, group1),
    (SecretKind::UrlPassword, r#"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/?#@"'<>\[\]]*:([^\s/?#"'<>]+)@[A-Za-z0-9\[]"#, group1),
    (SecretKind::Password, r"(?i)(?-u:\b)machine[ \t]+\S+\s+login[ \t]+\S+\s+password[ \t]+(\S+)", group1),
    // `-p` with a password glued on (`mysql -pS3cret`; `mysql -p` alone prompts, `-P` is the
    // port). The flag must come within a few arguments, so a later command in prose is not read.
    (SecretKind::Password, r#"(?-u:\b)(?:mysql|mariadb|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mariadb-dump|mariadb-admin)(?:[ \t]+[^\s|;&<>`]+){0,8}?[ \t]+-p("[^"\n]*"|'[^'\n]*'|[^\s"'|;&<>`]+)"#, command_password),
    // `sshpass [-f f|-d n|-P p|-e|-v] -p PASS`: only sshpass's own options before it, so the
    // `-p 2222` of the ssh it runs is a port.
    (SecretKind::Password, r#"(?-u:\b)sshpass(?:[ \t]+(?:-[fdP](?:[ \t]*[^\s\-][^\s]*)?|-e[^\s]*|-v))*[ \t]+-p[ \t]*("[^"\n]*"|'[^'\n]*'|[^\s"'|;&<>`]+)"#, command_password),
    // `redis-cli -a PASS` / `--pass PASS` (`--askpass` prompts); `-u redis://…` is a URL.
    (SecretKind::Password, r#"(?-u:\b)redis-cli(?:[ \t]+[^\s|;&<>`]+){0,8}?[ \t]+(?:-a|--pass)[ \t]+("[^"\n]*"|'[^'\n]*'|[^\s"'|;&<>`]+)"#, command_password),
    (SecretKind::Password, r#"(?-u:\b)(?:docker|podman|nerdctl|buildah|skopeo|oras|crane|helm[ \t]+registry)[ \t]+login(?:[ \t]+[^\s|;&<>`]+){0,6}?[ \t]+-p[ \t]*("[^"\n]*"|'[^'\n]*'|[^\s"'|;&<>`]+)"#, command_password),
    // `the password is X`, `password for prod was set to X`, `my password: X` (see `phrase`).
    (SecretKind::Password, r#"(?i)(?-u:\b)(?:password|passphrase|passwd|passcode)(?:[ \t]+(?:for|of|on|to)[ \t]+(?:(?:the|my|your|our)[ \t]+)?[^\s:,;."'`]+)?[ \t]+(?:is|was)(?:[ \t]+(?:now|still|just|set[ \t]+to|changed[ \t]+to))?[ \t]*:?[ \t]+("[^"\n]+"|'[^'\n]+'|`[^`\n]+`|“[^”\n]+”|[^\s"'`“]+)"#, sentence_password),
    (SecretKind::Password, r#"(?i)(?-u:\b)(?:my|the|your|our|root|admin|wifi|wi-fi|new|old|default|temporary|initial|sudo|login|account)[ \t]+(?:password|passphrase|passwd|passcode)[ \t]*:[ \t]+("[^"\n]+"|'[^'\n]+'|`[^`\n]+`|“[^”\n]+”|[^\s"'`“]+)"#, sentence_password),
    // A secret-sounding name and its operator (`NAME=`, `"name":`, `name :=`, `'name' =>`,
    // `env["NAME"] =`); the value is parsed by hand, cheaper than capture groups on the many
    // harmless hits (`token_count = 5`) this has in ordinary code.
    (SecretKind::SecretValue, r#"(?i)[A-Za-z0-9_.\-]*(?:secret|token|pass|pwd|pw|auth|(?:api|private|access|account|encryption|signing|master|client)[_.\-]?key)[A-Za-z0-9_.\-]*["']?\]?[ \t]*(?::=|=>|=|:)"#, judge_assignment),
    // `--token value`, `--password "value"`: groups 1 flag, 2 value.
    (SecretKind::SecretValue, r#"(?i)(?:^|[ \t])(--?[A-Za-z0-9_\-]*(?:secret|token|pass|pwd|auth|key)[A-Za-z0-9_\-]*)[ \t]+("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^\s"'`\-][^\s"'`]*)"#, judge_cli_flag),
];

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |&(kind, pattern, judge): &(SecretKind, &str, Judge)| Rule {
        kind,
        regex: compile(pattern),
        judge,
    };
    RULE_TABLE.iter().map(rule).collect()
});

/// Metadata keys and string values get the same redaction as content.
pub fn scrub_metadata(m: proto::Metadata) -> proto::Metadata {
    scrub_entries(m)
}

/// A map's keys and values scrubbed, collected into any map type (metadata or a nested map).
fn scrub_entries<M: FromIterator<(String, proto::Value)>>(
    m: impl IntoIterator<Item = (String, proto::Value)>,
) -> M {
    m.into_iter()
        .map(|(k, v)| (scrub(&k).text, scrub_value(v)))
        .collect()
}

fn scrub_value(v: proto::Value) -> proto::Value {
    use proto::Value;
    match v {
        Value::String(s) => Value::String(scrub(&s).text),
        Value::List(l) => Value::List(l.into_iter().map(scrub_value).collect()),
        Value::Map(m) => Value::Map(scrub_entries(m)),
        other => other,
    }
}

#[cfg(test)]
mod families_tests;
