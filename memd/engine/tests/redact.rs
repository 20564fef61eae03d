//! Secret redaction: the seeded corpus of coding-agent exchanges, exact outputs per secret kind,
//! `<private>` stripping, text that must stay untouched, robustness and throughput.

use memd_engine::redact::{SecretKind, redact, scrub, strip_private};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::time::Instant;

#[derive(Deserialize)]
struct Exchange {
    user: String,
    assistant: String,
    secrets: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    keep: Vec<String>,
}

fn corpus() -> Vec<Exchange> {
    let raw = include_str!("fixtures/secrets_corpus.json");
    serde_json::from_str(raw).expect("secrets_corpus.json parses")
}

#[test]
fn corpus_has_at_least_fifty_exchanges_each_with_a_secret() {
    let corpus = corpus();
    assert!(corpus.len() >= 50, "only {} exchanges", corpus.len());
    for (i, ex) in corpus.iter().enumerate() {
        assert!(!ex.secrets.is_empty(), "exchange {i} lists no secret");
        for secret in &ex.secrets {
            assert!(
                ex.user.contains(secret.as_str()) || ex.assistant.contains(secret.as_str()),
                "exchange {i}: listed secret does not occur in the text"
            );
        }
    }
}

#[test]
fn no_corpus_secret_survives_scrub() {
    for (i, ex) in corpus().iter().enumerate() {
        let user = scrub(&ex.user);
        let assistant = scrub(&ex.assistant);
        for secret in &ex.secrets {
            for (field, out) in [("user", &user.text), ("assistant", &assistant.text)] {
                assert!(
                    !out.contains(secret.as_str()),
                    "exchange {i}: a secret survived in the {field} field:\n{out}"
                );
            }
        }
        let found: BTreeSet<&str> = user
            .found
            .iter()
            .chain(&assistant.found)
            .map(|k| k.name())
            .collect();
        for kind in &ex.kinds {
            assert!(
                found.contains(kind.as_str()),
                "exchange {i}: expected {kind}, found {found:?}"
            );
        }
        if !ex.kinds.is_empty() {
            let markers = user.text.matches("[REDACTED:").count()
                + assistant.text.matches("[REDACTED:").count();
            assert_eq!(
                markers,
                user.found.len() + assistant.found.len(),
                "exchange {i}"
            );
            assert!(markers > 0, "exchange {i}: no marker");
        }
        for keep in &ex.keep {
            assert!(
                user.text.contains(keep.as_str()) || assistant.text.contains(keep.as_str()),
                "exchange {i}: ordinary text {keep:?} was lost:\n{}\n{}",
                user.text,
                assistant.text
            );
        }
    }
}

#[test]
fn scrubbing_twice_changes_nothing() {
    for (i, ex) in corpus().iter().enumerate() {
        for text in [&ex.user, &ex.assistant] {
            let once = scrub(text);
            let twice = scrub(&once.text);
            assert_eq!(twice.text, once.text, "exchange {i}");
            assert!(
                twice.found.is_empty(),
                "exchange {i}: markers re-detected: {:?}",
                twice.found
            );
        }
    }
}

#[test]
fn each_kind_is_replaced_by_its_marker_and_context_is_kept() {
    let cases: &[(&str, &str)] = &[
        (
            "key sk-proj-Ab3dEf5gHi7jKl9mNo1pQr3sTu5vWx7yZa9b",
            "key [REDACTED:openai_key]",
        ),
        (
            "key sk-ant-api03-Xy9_abcDEF123-ghiJKL456mnoPQR",
            "key [REDACTED:anthropic_key]",
        ),
        (
            "t=ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5 ok",
            "t=[REDACTED:github_token] ok",
        ),
        ("glpat-Ab12Cd34Ef56Gh78Ij90 x", "[REDACTED:gitlab_token] x"),
        (
            "xoxb-12345678901-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "[REDACTED:slack_token]",
        ),
        (
            "https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFGHI/AbCdEfGhIjKlMnOpQrStUvWx",
            "https://hooks.slack.com/services/[REDACTED:slack_webhook]",
        ),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:stripe_key]"),
        (
            "pk_live_4eC39HqLyjWDarjtT1zdp7dc is public",
            "pk_live_4eC39HqLyjWDarjtT1zdp7dc is public",
        ),
        (
            "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
            "[REDACTED:google_api_key]",
        ),
        (
            "id AKIA2E0A8F3B244C9986 end",
            "id [REDACTED:aws_access_key] end",
        ),
        (
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCY1234567890",
            "aws_secret_access_key=[REDACTED:aws_secret_key]",
        ),
        (
            "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
            "[REDACTED:huggingface_token]",
        ),
        (
            "npm_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",
            "[REDACTED:npm_token]",
        ),
        (
            "Authorization: Bearer abc.DEF-123_456~789",
            "Authorization: Bearer [REDACTED:bearer_token]",
        ),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "[REDACTED:jwt]",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\nAbCd==\n-----END RSA PRIVATE KEY-----\nafter",
            "[REDACTED:private_key]\nafter",
        ),
        (
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBx9\nQkZ3aW5k\n(truncated)",
            "[REDACTED:private_key]\n(truncated)",
        ),
        (
            "postgres://app:S3cr3t!x@db.example.com:5432/app",
            "postgres://app:[REDACTED:url_password]@db.example.com:5432/app",
        ),
        ("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED:password]"),
        (
            "export GITHUB_TOKEN=\"abc123def456\"",
            "export GITHUB_TOKEN=\"[REDACTED:secret_value]\"",
        ),
        (
            "{\"api_key\": \"abc123\"}",
            "{\"api_key\": \"[REDACTED:secret_value]\"}",
        ),
        ("password: s3cret", "password: [REDACTED:password]"),
        (
            "  client_secret: 'x9y8z7'",
            "  client_secret: '[REDACTED:secret_value]'",
        ),
        ("APIKEY=Zx81mm", "APIKEY=[REDACTED:secret_value]"),
        (
            "redis-server --requirepass Pa55word9",
            "redis-server --requirepass [REDACTED:password]",
        ),
        (
            "Server=db;User Id=sa;Password=Pa55;Encrypt=true",
            "Server=db;User Id=sa;Password=[REDACTED:password];Encrypt=true",
        ),
        (
            "https://api.example.com/v1?access_token=ab12cd34&page=2",
            "https://api.example.com/v1?access_token=[REDACTED:secret_value]&page=2",
        ),
        (
            "password: str = \"pyth0n\"",
            "password: str = \"[REDACTED:password]\"",
        ),
        (
            "$env:API_TOKEN = \"zz99\"",
            "$env:API_TOKEN = \"[REDACTED:secret_value]\"",
        ),
        ("password = letme1n", "password = [REDACTED:password]"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact(input).text, *expected, "input: {input}");
    }
}

#[test]
fn overlapping_rules_give_one_marker_named_by_the_most_specific() {
    let r = redact("OPENAI_API_KEY=sk-proj-Ab3dEf5gHi7jKl9mNo1pQr3sTu5vWx7yZa9b");
    assert_eq!(r.text, "OPENAI_API_KEY=[REDACTED:openai_key]");
    assert_eq!(r.found, vec![SecretKind::OpenAiKey]);
    let r = redact("Authorization: token ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5");
    assert_eq!(r.found, vec![SecretKind::GithubToken]);
}

#[test]
fn redacted_json_stays_valid_json() {
    let doc = r#"{"password": "p\"a:ss", "token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlMTIz",
        "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----\n", "n": 3}"#;
    let out = scrub(doc);
    let value: serde_json::Value = serde_json::from_str(&out.text).expect("still JSON");
    assert_eq!(value["password"], "[REDACTED:password]");
    assert_eq!(value["token"], "[REDACTED:jwt]");
    assert_eq!(value["private_key"], "[REDACTED:private_key]\n");
    assert_eq!(value["n"], 3);
}

#[test]
fn ordinary_prose_and_code_are_unchanged() {
    let texts = [
        "The build failed because the linker could not find libssl; rerun with RUST_LOG=debug.",
        "token_count = 5\nmax_tokens: 1024\n\"token_type\": \"bearer\"\nPASSWORD_MIN_LENGTH = 8",
        "if password_hash(pw) == stored_hash { return Ok(()); }",
        "let token = get_token();\nlet api_key = std::env::var(\"API_KEY\")?;",
        "password = request.form['password']\ntoken = self.token\napi_key = config.api_key",
        "def login(username, password):\n    return check(password=password)",
        "interface Props { password: string; token?: string; apiKey: Option<String> }",
        "pub struct Creds { pub password: String, pub token: SecretString }",
        "Reset your password: click the link in the email we sent you.",
        "Set the OPENAI_API_KEY environment variable before running the script.",
        "commit 3f2a9c1e8b7d6f5a4c3b2a1f0e9d8c7b6a5f4e3d\nMerge: 9c1e8b7 4c3b2a1",
        "request_id: 550e8400-e29b-41d4-a716-446655440000 trace=4bf92f3577b34da6a3ce929d0e0e4736",
        "integrity sha512-Q9yH6rJzX0bVkF2Q4m8e0o3N1m6wT9c4Xz1sPp6Vq8lR0h7YkVbWq3z5Ue2oT8c1Yw==",
        "docker image sha256:9b2a7e0f5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f",
        "<div class=\"sk-fading-circle sk-circle-bounce-delay\"></div>",
        "Bearer tokens are sent in the Authorization header; see RFC 6750.",
        "env:\n  PWD=/home/alice/project\n  OLDPWD=/home/alice",
        "git clone ssh://git@github.com:22/acme/app.git && git remote add up https://github.com/acme/app",
        "password: ${DB_PASSWORD}\ntoken: \"{{ vault_token }}\"\napi_key: <your-api-key>\nsecret: '****'",
        "echo $TOKEN | docker login --password-stdin -u bot registry.example.com",
        "WARNING! Using --password via the CLI is insecure.",
        "passwordless: true\nauth: false\nsecretName: db-credentials\ntokenUrl: https://auth.example.com/token",
        "日本語のテキスト 🚀 — naïve café; ключ = значение; 密码是什么？",
    ];
    for text in texts {
        let r = redact(text);
        assert_eq!(r.text, text, "changed: {text}");
        assert!(r.found.is_empty());
    }
}

#[test]
fn strip_private_removes_tagged_spans() {
    assert_eq!(strip_private("a <private>b</private> c"), "a  c");
    assert_eq!(strip_private("a <PRIVATE>b\nc</Private> d"), "a  d");
    assert_eq!(
        strip_private("x <private note=\"mine\">y</private>z"),
        "x z"
    );
    assert_eq!(strip_private("keep <private>gone\nall of it"), "keep ");
    assert_eq!(
        strip_private("a <private>b <private>c</private> d</private> e"),
        "a  e"
    );
    assert_eq!(strip_private("stray </private> tag"), "stray  tag");
    assert_eq!(strip_private("no tags here"), "no tags here");
    assert_eq!(
        strip_private("<privateer> is not a tag"),
        "<privateer> is not a tag"
    );
}

#[test]
fn scrub_strips_private_before_redacting() {
    let r = scrub("ok <private>DB_PASSWORD=hunter2</private> DB_PASSWORD=swordfish9");
    assert_eq!(r.text, "ok  DB_PASSWORD=[REDACTED:password]");
    assert_eq!(r.found, vec![SecretKind::Password]);
}

#[test]
fn kind_names_are_unique_lowercase_and_used_in_markers() {
    let names: BTreeSet<&str> = SecretKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), SecretKind::ALL.len());
    for kind in SecretKind::ALL {
        let name = kind.name();
        assert!(
            name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{name}"
        );
        assert_eq!(kind.marker(), format!("[REDACTED:{name}]"));
        assert_eq!(kind.to_string(), name);
    }
}

/// Deterministic pseudo-random text over an alphabet rich in the characters the rules look at,
/// cut at every char boundary: nothing may panic and the result must be stable.
#[test]
fn arbitrary_text_never_panics_and_scrub_is_stable() {
    let alphabet: Vec<char> = "aZ09_-=:\"' \n\t$@/.;&<>[](){}ésk-ghp_AKIAeyJ日本🚀#*"
        .chars()
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..300 {
        let len = (state % 200) as usize;
        let text: String = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                alphabet[(state % alphabet.len() as u64) as usize]
            })
            .collect();
        let once = scrub(&text);
        assert_eq!(scrub(&once.text).text, once.text, "unstable on {text:?}");
    }
    let sample = &corpus()[0].user;
    for (cut, _) in sample.char_indices().step_by(3) {
        let _ = scrub(&sample[..cut]);
    }
}

#[test]
fn throughput_on_one_megabyte_of_mixed_text() {
    let prose = "The build failed because the linker could not find libssl. I reinstalled the \
                 package, ran cargo clean and tried again; the token_count = 5 stays. ";
    let code = "fn main() {\n    let config = Config::load(&path)?;\n    let token = get_token();\n    \
                for (i, item) in items.iter().enumerate() { println!(\"{i}: {item:?}\"); }\n}\n";
    let secrets = "DB_PASSWORD=hunter2\nexport GITHUB_TOKEN=\"ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5\"\n\
                   curl -H 'Authorization: Bearer abcDEF123456ghiJKL789' https://x\n";
    let unicode = "日本語のテキストと絵文字 🚀 — naïve café résumé. ";
    let mut text = String::new();
    let mut blocks_with_secrets = 0;
    for i in 0.. {
        if text.len() >= 1 << 20 {
            break;
        }
        text.push_str(match i % 10 {
            0..=3 => prose,
            4..=7 => code,
            8 => unicode,
            _ => {
                blocks_with_secrets += 1;
                secrets
            }
        });
    }
    let start = Instant::now();
    let r = scrub(&text);
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r.found.len(), 3 * blocks_with_secrets);
    assert!(
        !r.text.contains("hunter2")
            && !r.text.contains("ghp_aB3d")
            && !r.text.contains("abcDEF123")
    );
    println!(
        "scrub: {} bytes in {:.1} ms = {:.1} MB/s",
        text.len(),
        secs * 1e3,
        text.len() as f64 / secs / 1e6
    );
}

#[test]
fn a_literal_marker_does_not_shield_the_secret_after_it() {
    let r = redact("token=[REDACTED:x]abc123secret");
    assert_eq!(r.text, "token=[REDACTED:x][REDACTED:secret_value]");
}

#[test]
fn code_that_only_names_secrets_is_unchanged() {
    let texts = [
        "struct Session {\n    token: Token,\n    password: Password,\n}",
        "const token = req.headers.authorization?.split(\" \")[1];",
        "return { \"password\": hashedPassword, \"token\": session.token };",
        "var token = await GetTokenAsync();\nTOKEN=$(cat ~/.token)",
        "env:\n  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
        "Token: 42 tokens used\nSecret: 7\nPassword:\n",
        "the secret: it is all about caching",
        "requests.post(url, auth=(user, password), timeout=5)",
    ];
    for text in texts {
        let r = redact(text);
        assert_eq!(r.text, text, "changed: {text}");
    }
}

#[test]
fn source_code_seen_in_real_projects_is_unchanged() {
    let texts = [
        "let struct_token = input.parse::<Token![struct]>()?;",
        "pub pw_passwd: *mut c_char,\npub rq_area_token: __u64,\ncolon2_token: Colon2,",
        "fn contains_token(&self, token: C1) -> bool {\n    I: Stream<Token = u8> + Clone,",
        "permissions:\n  id-token: write\n  contents: read",
        "NETKIT_PASS = 0,\nDEVSTAT_MATCH_PASS = 0x04,\nIFLA_VXLAN_LOCALBYPASS = 31,",
        "Error::Token => \"invalid token\",",
        "def __init__(self, request_token: str):\n    call(next_token=next_token,\n        secret=self.secret,",
        "ClientRequestToken='{self.client_request_token}'",
        "# full ARN: arn:aws:secretsmanager:us-west-2:123456789012:secret:testsecret-xxxxxx",
        "token: match self.token {",
        "\"input_token\": \"next_marker\",\nNO_AUTH = \"NO_AUTH\"",
        "Token:                     \"#cccccc\",",
        "raise InvalidToken(\"Invalid Token: 'Invalid token'\")",
        "when your file has '-----BEGIN RSA PRIVATE KEY-----' and ends with '-----END RSA PRIVATE KEY-----'",
        "return f\"{self.upload_sequence_token:056d}\"",
        "token.content = \"hey\".to_string();\n/// Month (FW=PW=2).",
        "let token_stream = quote! {\npassword: &config.password,",
    ];
    for text in texts {
        let r = redact(text);
        assert_eq!(r.text, text, "changed: {text}");
    }
}

#[test]
fn plain_looking_values_are_still_redacted_where_they_are_literal() {
    let cases = [
        ("API_TOKEN=abcdef1", "API_TOKEN=[REDACTED:secret_value]"),
        (
            "SECRET=mysupersecretphrase",
            "SECRET=[REDACTED:secret_value]",
        ),
        ("token: aBcDeF", "token: [REDACTED:secret_value]"),
        ("password: letmein", "password: [REDACTED:password]"),
        (
            "\"password\": \"correct horse battery staple\"",
            "\"password\": \"[REDACTED:password]\"",
        ),
        ("PIN_PASSWORD=4821", "PIN_PASSWORD=[REDACTED:password]"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact(input).text, expected, "input: {input}");
    }
}

#[test]
fn values_in_query_strings_and_headers_are_redacted_up_to_the_next_pair() {
    let r = redact(
        "curl -d \"client_secret=ab12cd&grant_type=client_credentials\" -H 'X-Auth-Token: zz99yy'",
    );
    assert_eq!(
        r.text,
        "curl -d \"client_secret=[REDACTED:secret_value]&grant_type=client_credentials\" -H 'X-Auth-Token: [REDACTED:secret_value]'"
    );
}

/// Secrets the rules once let through: a `credentials.csv` row, passwords on `mysql`, `sshpass`
/// and `docker login` command lines, Docker tokens, Azure SAS signatures, passwords given in a
/// sentence.
#[test]
fn secrets_known_by_their_surroundings_are_redacted() {
    let cases = [
        (
            "User name,Password,Access key ID,Secret access key\nalice,,AKIAZ7QXK2MVN4PLR8TW,wJalrXUtnFEMI/K7MDENG/bPxRfiCY9xQ2mZt7Lp",
            "User name,Password,Access key ID,Secret access key\nalice,,[REDACTED:aws_access_key],[REDACTED:aws_secret_key]",
        ),
        (
            "mysql -h db -u root -pS3cretPw9 app",
            "mysql -h db -u root -p[REDACTED:password] app",
        ),
        (
            "mysqldump -u root -p'Sq1 pass' shop > shop.sql",
            "mysqldump -u root -p'[REDACTED:password]' shop > shop.sql",
        ),
        (
            "mysql -u root --password=S3cretPw9 app",
            "mysql -u root --password=[REDACTED:password] app",
        ),
        (
            "sshpass -p Hunter2pass ssh deploy@host",
            "sshpass -p [REDACTED:password] ssh deploy@host",
        ),
        (
            "sshpass -v -pHunter2pass scp f host:",
            "sshpass -v -p[REDACTED:password] scp f host:",
        ),
        (
            "docker login -u bot -p dckr_pat_2b3e36beeb386dfdaacb9b46 registry.example.com",
            "docker login -u bot -p [REDACTED:docker_token] registry.example.com",
        ),
        (
            "podman login -u bot -p Rg9!stry quay.io",
            "podman login -u bot -p [REDACTED:password] quay.io",
        ),
        (
            "DOCKERHUB=dckr_pat_2b3e36beeb386dfdaacb9b46 in the notes",
            "DOCKERHUB=[REDACTED:docker_token] in the notes",
        ),
        (
            "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&se=2025-01-01&sig=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA%3D%3D",
            "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&se=2025-01-01&sig=[REDACTED:azure_sas]",
        ),
        (
            "the password is Tr0ub4dor&3",
            "the password is [REDACTED:password]",
        ),
        (
            "The password for prod was set to Zx9!kkq, ok?",
            "The password for prod was set to [REDACTED:password], ok?",
        ),
        (
            "the password is \"swordfish\"",
            "the password is \"[REDACTED:password]\"",
        ),
        (
            "Use my password: hunter2 for now",
            "Use my password: [REDACTED:password] for now",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(redact(input).text, expected, "input: {input}");
    }
}

/// Look-alikes of those: ports, `mysql -p` that prompts, words about passwords, hex digests.
#[test]
fn look_alikes_of_command_and_sentence_passwords_are_unchanged() {
    let texts = [
        "mysql -u root -p",
        "mysql -u root -p shop < dump.sql",
        "mysql -u root -P 3306 -p$MYSQL_PWD shop",
        "docker run -p 8080:80 nginx && ssh -p 2222 host",
        "sshpass -f ~/.ssh/pw ssh -p 2222 deploy@host",
        "docker login --password-stdin -u bot registry.example.com",
        "run `docker login -u bot --password-stdin`, then `docker run -p 8080:80 app`",
        "python -m http.server -p 8000; pytest -p no:cacheprovider",
        "the password field is required",
        "The password is incorrect. The password is required.",
        "the password is 8+ characters and the passphrase is optional",
        "The password is stored at /run/secrets/db_password",
        "The password was rotated yesterday; the password is 2FA-protected.",
        "Reset password: click the link we sent.",
        "Use a token instead of the password: `curl -u admin:$TOKEN https://ci`.",
        "alice,,AKIAZ7QXK2MVN4PLR8TW rotated at commit 3f2a9c1e8b7d6f5a4c3b2a1f0e9d8c7b6a5f4e3d",
        "https://example.com/search?q=sig&sig=abc",
    ];
    for text in texts {
        let r = redact(text);
        let kept = r
            .text
            .replace("[REDACTED:aws_access_key]", "AKIAZ7QXK2MVN4PLR8TW");
        assert_eq!(kept, text, "changed: {text}");
    }
}

/// Base64 of a `.env` line (`echo … | base64 -d`, Kubernetes `data:`) is decoded and redacted
/// whole; base64 of anything else (hashes, ordinary text, binary) is kept.
#[test]
fn base64_that_decodes_to_a_secret_is_redacted_whole() {
    let cases = [
        // AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCY9xQ2mZt7Lp
        (
            "echo QVdTX1NFQ1JFVF9BQ0NFU1NfS0VZPXdKYWxyWFV0bkZFTUkvSzdNREVORy9iUHhSZmlDWTl4UTJtWnQ3THA= | base64 -d",
            "echo [REDACTED:encoded_secret] | base64 -d",
        ),
        // DB_PASSWORD=hunter2\n
        (
            "data:\n  env: REJfUEFTU1dPUkQ9aHVudGVyMgo=\n",
            "data:\n  env: [REDACTED:encoded_secret]\n",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(scrub(input).text, expected, "input: {input}");
    }
    // `base64` wraps at 76 characters; the wrapped lines are decoded together.
    let env = "NODE_ENV=production\nPORT=3000\nLOG_LEVEL=info\nSTRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc\n";
    let wrapped = wrap76(&base64(env.as_bytes()));
    assert!(wrapped.contains('\n'));
    let r = scrub(&format!("kubectl get secret app -o yaml\n{wrapped}\nend"));
    assert_eq!(
        r.text,
        "kubectl get secret app -o yaml\n[REDACTED:encoded_secret]\nend"
    );
    let kept = [
        // NODE_ENV=production PORT=3000 (no secret)
        "echo Tk9ERV9FTlY9cHJvZHVjdGlvbiBQT1JUPTMwMDA= | base64 -d",
        "integrity sha512-Q9yH6rJzX0bVkF2Q4m8e0o3N1m6wT9c4Xz1sPp6Vq8lR0h7YkVbWq3z5Ue2oT8c1Yw==",
        "commit 3f2a9c1e8b7d6f5a4c3b2a1f0e9d8c7b6a5f4e3d /usr/local/lib/python3/site-packages/x",
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    ];
    for text in kept {
        assert_eq!(scrub(text).text, text, "changed: {text}");
    }
    // Long runs are decoded only in part and cost no more than a bounded decode each.
    let long = "QUFB".repeat(50_000);
    assert_eq!(scrub(&long).text, long);
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn wrap76(encoded: &str) -> String {
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    lines.join("\n")
}
