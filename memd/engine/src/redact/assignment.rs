//! Judging `name <op> value` assignments found by the redaction rules.
//!
//! Owns deciding whether a secret-sounding name (`DB_PASSWORD`, `"api_key"`, `--token`) is
//! followed by an actual secret, and which bytes to redact. Must never: redact the name or the
//! quotes around a value, or panic on any text (every offset it returns is a char boundary).
//!
//! Assignments (`DB_PASSWORD=…`, `"api_key": "…"`, `password: …`, `--token …`) are judged by
//! the name and by the shape of the value. Deliberate choices, to keep ordinary code readable
//! (measured: about 40 redactions in 100 MB of Rust crates and Python packages, nearly all of
//! them credentials in test fixtures):
//! - A name counts when its last dotted part contains SECRET, PASSWORD, PASSWD, PASSPHRASE,
//!   API_KEY/APIKEY, PRIVATE_KEY, ACCESS_KEY (and similar `*_KEY`s), a word ending in TOKEN or
//!   PASS, or the word PWD, PW or AUTH; unless its last word says it is metadata
//!   (`token_count`, `PASSWORD_MIN_LENGTH`, `secretName`, `token_url`, …) or its first word is a
//!   quantifier or predicate (`max_tokens`, `is_password_valid`).
//! - Never secret: placeholders (`$VAR`, `${VAR}`, `<your-key>`, `{{ x }}`, `{name}`, `****`,
//!   the word `password` itself), booleans, null and keywords, values under 3 characters,
//!   decimals of up to 3 digits (4 for tokens: `token = 5`, `PW=2`) and hex literals, and
//!   multi-word identifiers naming another secret variable (`token=next_token`).
//! - Token, key and secret values (not passwords) must look generated: no spaces, and 12+
//!   characters or a digit, a symbol or inner upper case. `"input_token": "marker"` is kept.
//! - Unquoted values in `.env`/shell (`NAME=value`) and YAML keys at line start are literal;
//!   in code-like positions (`name = value` with spaces, keyword arguments, `"key": value`,
//!   `name: value` mid-line or ending in `,`) they are kept when they read as code: calls,
//!   indexing, macros, attribute paths, references (`&x`, `*mut`), type names, generics, or a
//!   word without digits. So `password = letmein` in an INI file is kept and
//!   `password = letme1n` is not.

use super::{Hit, SecretKind, group};
use regex::CaptureLocations;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

#[derive(Clone, Copy, PartialEq, Eq)]
enum NameClass {
    Password,
    Secret,
}

impl NameClass {
    fn kind(self) -> SecretKind {
        match self {
            Self::Password => SecretKind::Password,
            Self::Secret => SecretKind::SecretValue,
        }
    }
}

/// Last words that make a secret-sounding name describe metadata rather than hold a secret.
const META_LAST_WORDS: &str = "COUNT COUNTS NUM NUMBER LEN LENGTH MIN MAX SIZE LIMIT LIMITS \
    BUDGET USAGE USED TTL EXPIRY EXPIRES EXPIRATION IN AT LIFETIME TIMEOUT AGE TYPE TYPES KIND \
    NAME NAMES FIELD FIELDS LABEL HINT PLACEHOLDER PROMPT STDIN PATH FILE FILES DIR URL URI \
    ENDPOINT HOST PORT HEADER PREFIX SUFFIX ENABLED DISABLED REQUIRED POLICY REGEX PATTERN FORMAT \
    ALGORITHM ALG RATE THRESHOLD VERSION ARN REF INDEX IDX OFFSET POS POSITION START END STRATEGY \
    MODE ROTATION VALID VALIDATOR VALIDATION SCOPE SCOPES ISSUER AUDIENCE STATUS COLUMN ENV VAR \
    VARIABLE MANAGER PROVIDER STORE SERVICE CLASS ID MAP TEXT";

/// First words of names that are predicates or quantities (`max_tokens`, `is_password_set`).
const META_FIRST_WORDS: &str = "MAX MIN NUM IS HAS USE USES SHOW HIDE ENABLE DISABLE REQUIRE \
    REQUIRES SHOULD CAN VALIDATE CHECK VERIFY COUNT TOTAL GET SET FETCH LOAD READ GENERATE \
    CREATE HASH ON";

const PASSWORD_PARTS: &str = "PASSWORD PASSWD PASSPHRASE";
const PASSWORD_WORDS: &str = "PWD OLDPWD PW";
/// Words ending in PASS that have nothing to do with passwords.
const NOT_PASS: &str = "BYPASS COMPASS SURPASS TRESPASS OVERPASS UNDERPASS";
const KEY_PARTS: &str =
    "APIKEY PRIVATEKEY ACCESSKEY ACCOUNTKEY ENCRYPTIONKEY SIGNINGKEY MASTERKEY CLIENTKEY";

/// A case-insensitive set of words, built once from a space-separated list: these lookups run
/// for every secret-sounding name in the text.
struct WordSet(HashSet<String>);

impl WordSet {
    fn new(list: &str) -> Self {
        WordSet(
            list.split_ascii_whitespace()
                .map(str::to_ascii_uppercase)
                .collect(),
        )
    }

    fn contains(&self, word: &str) -> bool {
        self.0.contains(word.to_ascii_uppercase().as_str())
    }
}

static META_LAST: LazyLock<WordSet> = LazyLock::new(|| WordSet::new(META_LAST_WORDS));
static META_FIRST: LazyLock<WordSet> = LazyLock::new(|| WordSet::new(META_FIRST_WORDS));

fn is_one_of(word: &str, list: &str) -> bool {
    list.split_ascii_whitespace()
        .any(|w| word.eq_ignore_ascii_case(w))
}

fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let needle = needle.as_bytes();
    haystack
        .as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

fn contains_any(haystack: &str, list: &str) -> bool {
    list.split_ascii_whitespace()
        .any(|n| contains_ignore_case(haystack, n))
}

fn ends_with_ignore_case(word: &str, suffix: &str) -> bool {
    word.len() >= suffix.len()
        && word.as_bytes()[word.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// Splits `DB_PASSWORD`, `accessToken`, `x-api-key` into words (ASCII alphanumeric runs, also
/// split where a lower-case letter or digit meets an upper-case one).
fn name_words(name: &str) -> Vec<&str> {
    let bytes = name.as_bytes();
    let mut words = Vec::new();
    let mut start = None;
    for (i, &b) in bytes.iter().enumerate() {
        let camel_break = b.is_ascii_uppercase()
            && i > 0
            && (bytes[i - 1].is_ascii_lowercase() || bytes[i - 1].is_ascii_digit());
        match (b.is_ascii_alphanumeric(), start) {
            (true, Some(s)) if camel_break => {
                words.push(&name[s..i]);
                start = Some(i);
            }
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push(&name[s..i]);
                start = None;
            }
            _ => {}
        }
    }
    words.extend(start.map(|s| &name[s..]));
    words
}

/// Whether a name holds a password, another secret, or neither. For a dotted path only the
/// last part counts: `db.password` does, `token.content` does not.
fn classify_name(name: &str) -> Option<NameClass> {
    let field = name
        .rsplit('.')
        .find(|part| !part.is_empty())
        .unwrap_or(name);
    let words = name_words(field);
    let (first, last) = (*words.first()?, *words.last()?);
    if META_LAST.contains(last) || (words.len() > 1 && META_FIRST.contains(first)) {
        return None;
    }
    let joined = words.concat();
    let password_word = |w: &&str| {
        is_one_of(w, PASSWORD_WORDS)
            || (ends_with_ignore_case(w, "PASS")
                && !NOT_PASS.split(' ').any(|x| ends_with_ignore_case(w, x)))
    };
    if contains_any(&joined, PASSWORD_PARTS) || words.iter().any(password_word) {
        return Some(NameClass::Password);
    }
    // `clientSecret` and `SECRETKEY` hold secrets; `secretsmanager` and `secretName` do not.
    let meta_suffix = |w: &str| {
        META_LAST_WORDS
            .split_ascii_whitespace()
            .any(|m| ends_with_ignore_case(w, m))
    };
    let secret_word = |w: &&str| {
        ends_with_ignore_case(w, "TOKEN")
            || (contains_ignore_case(w, "SECRET")
                && !w.eq_ignore_ascii_case("SECRETARY")
                && !meta_suffix(w))
    };
    let is_secret = words.iter().any(secret_word)
        || contains_any(&joined, KEY_PARTS)
        || last.eq_ignore_ascii_case("AUTH");
    is_secret.then_some(NameClass::Secret)
}

/// One `name <operator> value` occurrence, as byte ranges into the text.
struct Assignment {
    name: Range<usize>,
    /// Quoted on both sides: a JSON, dict or array key.
    key_quoted: bool,
    /// Quote before the name only: inside a string such as `-H "X-Api-Key: …"`.
    in_string: bool,
    operator: &'static str,
    spaced: bool,
    quoted_value: bool,
    /// The value without its quotes.
    value: Range<usize>,
}

/// Reads the name, operator and value of an assignment-rule match.
fn parse_assignment(text: &str, matched: Range<usize>) -> Option<Assignment> {
    let bytes = text.as_bytes();
    let is_name_byte = |b: &&u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    let name_len = bytes[matched.clone()]
        .iter()
        .take_while(is_name_byte)
        .count();
    let name = matched.start..matched.start + name_len;
    let op_area = text[name.end..matched.end].trim_start_matches(['"', '\'', ']']);
    let operator = [":=", "=>", "=", ":"]
        .into_iter()
        .find(|op| op_area.trim_start_matches([' ', '\t']) == *op)?;
    let after_op = &text[matched.end..];
    let value_at = matched.end + (after_op.len() - after_op.trim_start_matches([' ', '\t']).len());
    let quote_before = matched.start > 0 && matches!(bytes[matched.start - 1], b'"' | b'\'');
    let quote_after = text[name.end..matched.end].starts_with(['"', '\'']);
    let (value, quoted_value) = match bytes.get(value_at)? {
        q @ (b'"' | b'\'' | b'`') => (quoted_body(text, value_at + 1, *q)?, true),
        _ => (value_at..unquoted_value_end(text, value_at), false),
    };
    Some(Assignment {
        name,
        key_quoted: quote_before && quote_after,
        in_string: quote_before && !quote_after,
        operator,
        spaced: op_area.starts_with([' ', '\t']) || value_at > matched.end,
        quoted_value,
        value,
    })
}

/// An unquoted value ends at whitespace or a quote, or at a `;`/`&` that starts the next
/// `key=` pair of a connection string or query string.
fn unquoted_value_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            b if b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`') => break,
            b';' | b'&' if starts_key_value_pair(&bytes[at + 1..]) => break,
            _ => at += 1,
        }
    }
    at
}

fn starts_key_value_pair(bytes: &[u8]) -> bool {
    let is_key_byte = |b: &&u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b' ');
    let key_len = bytes.iter().take_while(is_key_byte).count();
    key_len > 0 && bytes[0].is_ascii_alphabetic() && bytes.get(key_len) == Some(&b'=')
}

/// The body of a string literal whose opening quote is just before `start`; `None` when it
/// does not close on the same line.
fn quoted_body(text: &str, start: usize, quote: u8) -> Option<Range<usize>> {
    let mut escaped = false;
    for (offset, &b) in text.as_bytes().get(start..)?.iter().enumerate() {
        match b {
            b'\n' => return None,
            b'\\' if !escaped && quote != b'`' => escaped = true,
            b if b == quote && !escaped => return Some(start..start + offset),
            _ => escaped = false,
        }
    }
    None
}

/// Where an assignment sits, which decides how much an unquoted value must look like a secret.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// `.env`, shell, YAML key at line start: any value is literal.
    Literal,
    /// Inside a string such as `-H "X-Api-Key: …"` or an error message.
    InString,
    /// `name: value` in code: a field, parameter or object key.
    CodeColon,
    /// `name = value` with spaces, or a keyword argument.
    CodeAssign,
}

fn context_of(text: &str, found: &Assignment, ends_statement: bool) -> Context {
    let name_start = found.name.start - usize::from(found.key_quoted || found.in_string);
    match found.operator {
        _ if found.in_string => Context::InString,
        // Struct fields (`token: Token,`) sit where YAML keys do; the trailing comma gives them
        // away.
        ":" if found.key_quoted || ends_statement || !starts_yaml_key(text, name_start) => {
            Context::CodeColon
        }
        ":" => Context::Literal,
        // Keyword arguments, one per line, end in a comma; `.env` values never do.
        _ if found.spaced || ends_statement || follows_code_punctuation(text, name_start) => {
            Context::CodeAssign
        }
        _ => Context::Literal,
    }
}

/// Judges one secret-sounding `name <op> value`; see the module doc for the policy.
pub(super) fn judge_assignment(text: &str, locs: &CaptureLocations, _: SecretKind) -> Hit {
    let found = parse_assignment(text, group(locs, 0)?)?;
    let name = &text[found.name.clone()];
    let class = classify_name(name)?;
    if text[..found.name.start].ends_with("::") {
        return None; // `Error::Token => …`: an enum variant or constant path
    }
    let mut value = found.value.clone();
    let mut ends_statement = false;
    if !found.quoted_value {
        let raw = &text[value.clone()];
        // `==`, `::`, `=~` compare or name paths; `secret:x` without a space is an ARN,
        // `host:port` or a format spec, not a YAML key.
        let glued_colon = found.operator == ":" && !found.spaced;
        if glued_colon || raw.starts_with(['=', ':', '~']) || is_placeholder(raw) {
            return None;
        }
        ends_statement = raw.ends_with([',', ';']);
        value.end = value.start
            + raw
                .trim_end_matches([',', ';', ':', '.', ')', ']', '}'])
                .len();
    }
    let value_text = &text[value.clone()];
    // A backtick span with spaces in prose is a command (password: `pass show db`).
    let backtick_code =
        text[..value.start].ends_with('`') && value_text.contains(char::is_whitespace);
    if backtick_code
        || is_never_secret(value_text, class)
        || (class == NameClass::Password && is_shell_working_dir(name, value_text))
    {
        return None;
    }
    if found.quoted_value {
        return Some((value, class.kind()));
    }
    // `&config.token`, `*mut c_char`, and YAML anchors and aliases (`*db_password`).
    let code = value_text.trim_start_matches(['&', '*', '!']);
    let reference = code.len() < value_text.len() && (is_identifier(code) || is_keyword(code));
    if reference || looks_like_call_or_index(code) {
        return None;
    }
    if found.operator == ":" && looks_like_type(code) {
        return annotated_literal(text, found.value.end, class).map(|r| (r, class.kind()));
    }
    let keep = match context_of(text, &found, ends_statement) {
        Context::Literal => false,
        Context::InString => is_word(code),
        Context::CodeColon => reads_as_code(code) || is_identifier(code),
        Context::CodeAssign => reads_as_code(code),
    };
    (!keep).then_some((value, class.kind()))
}

pub(super) fn judge_cli_flag(text: &str, locs: &CaptureLocations, _: SecretKind) -> Hit {
    let (flag, value) = (group(locs, 1)?, group(locs, 2)?);
    let class = classify_name(&text[flag])?;
    let value = match text.as_bytes()[value.start] {
        q @ (b'"' | b'\'') => quoted_body(text, value.start + 1, q)?,
        _ => value,
    };
    let value_text = &text[value.clone()];
    // Flags in prose ("using --password via the CLI") take a plain word; real values do not.
    let rejected = is_never_secret(value_text, class)
        || is_word(value_text)
        || looks_like_call_or_index(value_text);
    (!rejected).then_some((value, class.kind()))
}

/// Values that are no secret whatever the context: placeholders, keywords, small numbers,
/// names of other variables (`next_token`, `"NO_AUTH"`), and for tokens and keys, short
/// plain words (`"input_token": "marker"`) where real ones are long or mix character kinds.
fn is_never_secret(value: &str, class: NameClass) -> bool {
    let names_a_variable =
        || is_identifier(value) && name_words(value).len() > 1 && classify_name(value).is_some();
    value.chars().count() < 3
        || is_small_number(value, class)
        || is_placeholder(value)
        || is_keyword(value)
        || is_css_color(value)
        || (class == NameClass::Secret && !looks_random(value))
        || names_a_variable()
}

fn is_css_color(value: &str) -> bool {
    value.strip_prefix('#').is_some_and(|hex| {
        matches!(hex.len(), 3 | 4 | 6 | 8) && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// Generated tokens have no spaces, and are long or mix letters with digits, symbols or case
/// (beyond a capital first letter).
fn looks_random(value: &str) -> bool {
    let has = |f: fn(&char) -> bool| value.chars().any(|c| f(&c));
    let symbol = |c: &char| c.is_ascii_punctuation() && !"_-.".contains(*c);
    !has(|c| c.is_whitespace())
        && (value.chars().count() >= 12
            || has(char::is_ascii_digit)
            || (value.chars().skip(1).any(|c| c.is_ascii_uppercase())
                && has(char::is_ascii_lowercase))
            || has(symbol))
}

/// `$VAR`, `${VAR}`, `$(cmd)`, `{{ var }}`, `<your-key>`, `[your key]`, `****`, `xxxx`, `...`,
/// and the field's own name used as a dummy (`user:password@host`).
pub(super) fn is_placeholder(value: &str) -> bool {
    static DUMMIES: LazyLock<WordSet> = LazyLock::new(|| {
        WordSet::new("password passwd pass pwd pw secret token apikey api_key n/a tbd todo")
    });
    let v = value.trim();
    let mut chars = v.chars();
    let variable = chars.next() == Some('$')
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || "{(_".contains(c));
    variable
        || !v.chars().any(char::is_alphanumeric)
        || v.starts_with("{{")
        || v.starts_with("#{")
        || v.starts_with("%(")
        || (v.starts_with('{') && v.ends_with('}'))
        || (v.starts_with('<') && v.ends_with('>'))
        || (v.starts_with('[') && v.ends_with(']'))
        || v.chars().all(|c| "*xX.•…-_#".contains(c))
        || DUMMIES.contains(v)
}

/// Booleans, null, permission words (`id-token: write`) and language keywords.
pub(super) fn is_keyword(value: &str) -> bool {
    static WORDS: LazyLock<WordSet> = LazyLock::new(|| {
        WordSet::new(
            "true false null nil none undefined yes no on off ~ read write inherit \
        required optional enabled disabled match if else await async new function lambda fn move \
        self this super crate let const mut ref return some ok err or and not in is of the to",
        )
    });
    WORDS.contains(value)
}

/// Short decimal numbers and hex literals (`token = 5`, `PW=2`, `MATCH_PASS = 0x04`) are
/// counts and flags; numeric passwords of 4+ digits and numeric tokens of 5+ stay redacted.
fn is_small_number(value: &str, class: NameClass) -> bool {
    let max_digits = if class == NameClass::Password { 3 } else { 4 };
    let hex = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"));
    match hex {
        Some(digits) => {
            (1..=8).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_hexdigit())
        }
        None => {
            (1..=max_digits).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

/// `PWD=/home/me/project` in an `env` dump is the working directory, not a password.
fn is_shell_working_dir(name: &str, value: &str) -> bool {
    (name == "PWD" || name == "OLDPWD") && value.starts_with(['/', '~'])
}

fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `get_token()`, `env::var("X")?`, `request.form['password']`, `a?.split(`, `quote! {`,
/// `input.parse::<Token![struct]>()`.
fn looks_like_call_or_index(value: &str) -> bool {
    let callee_end = value
        .find(['(', '[', '{'])
        .or_else(|| value.ends_with('!').then_some(value.len()));
    let Some(end) = callee_end else {
        return false;
    };
    let callee = &value[..end];
    let starts_like_name = callee.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    starts_like_name
        && callee
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:<>!?-".contains(c))
}

/// `self.token`, `config.db.password`, `Secret::default`.
fn is_attribute_path(value: &str) -> bool {
    let mut parts = value.split(['.', ':']).filter(|p| !p.is_empty());
    let all_identifiers = parts.clone().all(is_identifier);
    all_identifiers && parts.nth(1).is_some()
}

/// A word in any script, without digits or punctuation: a variable name such as
/// `new_password`, or prose (`this token: 嗎`).
fn is_word(value: &str) -> bool {
    !value.is_empty() && value.chars().all(|c| c.is_alphabetic() || c == '_')
}

/// Unquoted values that read as code in a code-like position.
fn reads_as_code(value: &str) -> bool {
    is_word(value)
        || is_attribute_path(value)
        || looks_like_type(value)
        || value.starts_with(['(', '[', '{', '<'])
        || value.contains(['<', '>'])
}

/// Type annotations: `token: String`, `password: str`, `api_key: Option<String>`, `t: Token`.
fn looks_like_type(value: &str) -> bool {
    static TYPES: LazyLock<WordSet> = LazyLock::new(|| {
        WordSet::new(
            "str string bool boolean number int integer float bytes any unknown \
        object secret secretstring secretbox uuid option optional char vec box arc rc cow u8 u16 \
        u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64",
        )
    });
    let v = value
        .trim_start_matches(['&', '\''])
        .trim_end_matches(['?', '!']);
    let camel_case_name = v.starts_with(|c: char| c.is_ascii_uppercase())
        && v.contains(|c: char| c.is_ascii_lowercase())
        && is_word(v);
    camel_case_name || v.contains(['<', '>', '|']) || TYPES.contains(v)
}

/// The literal in `password: str = "hunter2"`, after the annotation that ends at `from`.
fn annotated_literal(text: &str, from: usize, class: NameClass) -> Option<Range<usize>> {
    let rest = &text[from..];
    let after_eq = rest.trim_start_matches([' ', '\t']).strip_prefix('=')?;
    let literal = after_eq.trim_start_matches([' ', '\t']);
    let quote = *literal
        .as_bytes()
        .first()
        .filter(|q| matches!(q, b'"' | b'\''))?;
    let range = quoted_body(text, from + (rest.len() - literal.len()) + 1, quote)?;
    (!is_never_secret(&text[range.clone()], class)).then_some(range)
}

/// The name is the first thing on its line (after indentation, a YAML `- ` or a `#`).
fn starts_yaml_key(text: &str, name_start: usize) -> bool {
    let line_start = text[..name_start].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..name_start]
        .chars()
        .all(|c| matches!(c, ' ' | '\t' | '-' | '#'))
}

/// A keyword argument (`f(password=pw)`, `f(a, token=t)`) or a generic binding
/// (`Stream<Token = u8>`) is code.
fn follows_code_punctuation(text: &str, name_start: usize) -> bool {
    text[..name_start]
        .trim_end_matches([' ', '\t'])
        .ends_with(['(', ',', '<'])
}
