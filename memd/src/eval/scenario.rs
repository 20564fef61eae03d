//! The learning scenario: a fictional project's notes, some correct and some plausible but
//! wrong, the questions a user asks about them, and the user's fixed scoring rule.
//!
//! Owns the data and the rule only. The misleading notes are written to be as relevant to
//! the questions as the correct ones (same vocabulary, same length), so only outcomes can
//! separate them. Must never depend on the daemon or on ranking results.

use proto::Outcome;

/// How a seeded note relates to the questions of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Correct,
    Misleading,
    Filler,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Correct => "correct",
            Role::Misleading => "misleading",
            Role::Filler => "filler",
        }
    }
}

/// A subject the user keeps asking about.
#[derive(Debug)]
pub struct Topic {
    pub name: &'static str,
    /// Paraphrases, asked in turn; the first is also the fixed probe query.
    pub queries: &'static [&'static str],
    /// `initial_score` the notes were stored with (`None`: neutral 0.5).
    pub initial: Option<&'static str>,
    pub correct: &'static [&'static str],
    pub misleading: &'static [&'static str],
}

/// Deploy notes start as `worked` (0.7): the agent believed every one. Three failures leave a
/// misleading one at 0.1, still above the deletion threshold of a new memory, so leaving the
/// top 5 by then is the ranking prior's work, not deletion's. The other topics start neutral
/// (0.5), where two failures already delete.
pub const TOPICS: [Topic; 3] = [
    Topic {
        name: "deploy",
        queries: &[
            "How do I deploy the lantern service to production?",
            "What are the steps to ship a new lantern release?",
            "Walk me through the lantern deploy process.",
            "How does a lantern release get rolled out to prod?",
            "What do I need to run to deploy lantern?",
        ],
        initial: Some("worked"),
        correct: &[
            "To deploy lantern, run `make release`: it builds the container image and pushes it to the staging registry before anything reaches production.",
            "Lantern production deploys only start from a signed release tag; the `deploy-prod` CI job refuses unsigned tags.",
            "A lantern deploy is finished only after `lantern-cli smoke --env prod` passes; if the smoke check fails, roll back with `make rollback`.",
        ],
        misleading: &[
            "To deploy lantern, run `kubectl apply -f k8s/` from your laptop; the CI pipeline is not involved in production deploys.",
            "Lantern deploys to production automatically on every push to main, so there is no release step to run.",
            "Deploying lantern means copying the binary to the production hosts with scp and restarting the systemd unit; lantern does not use containers.",
        ],
    },
    Topic {
        name: "migrations",
        queries: &[
            "How do I run the database migrations for lantern?",
            "What rules do lantern schema migrations have to follow?",
            "How are lantern database schema changes applied?",
            "What is the lantern migration workflow?",
        ],
        initial: None,
        correct: &[
            "Lantern database migrations live in `db/migrations` and are applied with `make migrate`; never change the production schema by hand.",
            "Every lantern migration must stay compatible with the previous release, because old pods keep serving while the rollout runs.",
        ],
        misleading: &[
            "Lantern schema changes are applied by connecting to the production database with psql and running the ALTER statements directly.",
            "Lantern migrations can drop columns freely because the database is recreated from scratch on every deploy.",
        ],
    },
    Topic {
        name: "tests",
        queries: &[
            "How do I run the lantern test suite?",
            "What do the lantern integration tests need before they run?",
            "How do I run lantern's tests locally?",
            "What is needed to set up the lantern tests?",
        ],
        initial: None,
        correct: &[
            "Lantern's integration tests need `docker compose up db` running first; then `make test` runs the unit and integration tests.",
            "Flaky lantern tests are marked `#[ignore = \"flaky\"]` and listed in FLAKY.md until someone fixes them.",
        ],
        misleading: &[
            "Lantern's tests are run with `npm test`; the repository has no make target for tests.",
            "Lantern's integration tests use an in-memory SQLite database, so no docker container is needed to run them.",
        ],
    },
];

/// Other notes about the project (and one not about it): lexical and semantic distractors.
pub const FILLER: [&str; 20] = [
    "Lantern logs are JSON lines written to stdout; the log level is set with LANTERN_LOG.",
    "The lantern API listens on port 8420 in development.",
    "Lantern reads its configuration from lantern.toml, overridden by LANTERN_* environment variables.",
    "Code review for lantern needs one approval from the platform team.",
    "The lantern on-call rotation changes every Monday at 10:00.",
    "Lantern uses the tracing crate for spans; metrics are exported to Prometheus.",
    "Lantern's public API is versioned under /v2; /v1 is frozen.",
    "User avatars in lantern are stored in the S3 bucket lantern-avatars.",
    "The lantern frontend lives in a separate repository and is built with Vite.",
    "Rate limiting in lantern allows 100 requests per minute per API key.",
    "Lantern error codes are documented in docs/errors.md.",
    "The lantern team prefers small pull requests, under 400 changed lines.",
    "The coffee machine on the third floor is broken.",
    "Lantern design documents go in docs/design as markdown files.",
    "Lantern's background jobs run on a Redis-backed queue.",
    "Feature flags in lantern are managed in flags.yaml.",
    "The lantern CLI is written in Go, unlike the Rust service.",
    "Alerts for lantern go to the #lantern-alerts Slack channel.",
    "Lantern sessions expire after 30 minutes of inactivity.",
    "Weekly planning for the lantern team is on Tuesdays.",
];

/// One seeded note.
#[derive(Debug, Clone, Copy)]
pub struct Seed {
    /// Index into `TOPICS`; `None` for filler.
    pub topic: Option<usize>,
    pub role: Role,
    pub content: &'static str,
    pub initial: Option<&'static str>,
}

/// Every note of the scenario: each topic's correct then misleading notes, then filler.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    for (i, t) in TOPICS.iter().enumerate() {
        for (role, list) in [(Role::Correct, t.correct), (Role::Misleading, t.misleading)] {
            out.extend(list.iter().map(|content| Seed {
                topic: Some(i),
                role,
                content,
                initial: t.initial,
            }));
        }
    }
    out.extend(FILLER.iter().map(|content| Seed {
        topic: None,
        role: Role::Filler,
        content,
        initial: None,
    }));
    out
}

/// The topic and question of turn `turn` (1-based): topics in rotation, paraphrases in turn.
pub fn question(turn: usize) -> (usize, &'static str) {
    let i = turn.saturating_sub(1);
    let topic = i % TOPICS.len();
    let queries = TOPICS[topic].queries;
    (topic, queries[(i / TOPICS.len()) % queries.len()])
}

/// The simulated user's rule for one injected note, given the topic asked about: a note of
/// that topic worked if correct and failed if misleading; anything else was not used.
pub fn judge(seed: Option<&Seed>, asked: usize) -> Outcome {
    match seed {
        Some(s) if s.topic == Some(asked) => match s.role {
            Role::Correct => Outcome::Worked,
            Role::Misleading => Outcome::Failed,
            Role::Filler => Outcome::Unknown,
        },
        _ => Outcome::Unknown,
    }
}

/// The exchange's outcome: failed when a misleading note of the topic was used, worked when
/// only correct ones were, unknown when none of the topic's notes was injected.
pub fn exchange_outcome(judged: &[Outcome]) -> Outcome {
    if judged.contains(&Outcome::Failed) {
        Outcome::Failed
    } else if judged.contains(&Outcome::Worked) {
        Outcome::Worked
    } else {
        Outcome::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_rotate_and_paraphrases_advance_per_round() {
        assert_eq!(question(1), (0, TOPICS[0].queries[0]));
        assert_eq!(question(2), (1, TOPICS[1].queries[0]));
        assert_eq!(question(4), (0, TOPICS[0].queries[1]));
        let n = TOPICS[0].queries.len() * TOPICS.len();
        assert_eq!(question(1 + n), question(1));
    }

    #[test]
    fn the_rule_scores_only_notes_of_the_asked_topic() {
        let seeds = seeds();
        let correct = seeds.iter().find(|s| s.role == Role::Correct).unwrap();
        let misleading = seeds.iter().find(|s| s.role == Role::Misleading).unwrap();
        assert_eq!(judge(Some(correct), 0), Outcome::Worked);
        assert_eq!(judge(Some(misleading), 0), Outcome::Failed);
        assert_eq!(judge(Some(misleading), 1), Outcome::Unknown);
        assert_eq!(judge(None, 0), Outcome::Unknown);
        assert_eq!(
            exchange_outcome(&[Outcome::Worked, Outcome::Failed]),
            Outcome::Failed
        );
        assert_eq!(exchange_outcome(&[Outcome::Unknown]), Outcome::Unknown);
    }

    #[test]
    fn every_note_is_distinct() {
        let seeds = seeds();
        let mut contents: Vec<&str> = seeds.iter().map(|s| s.content).collect();
        contents.sort();
        contents.dedup();
        assert_eq!(contents.len(), seeds.len());
        assert_eq!(seeds.iter().filter(|s| s.role == Role::Misleading).count(), 7);
    }
}
