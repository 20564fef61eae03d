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
    /// Right all along (for a topic with stale notes: stored when the facts change).
    pub correct: &'static [&'static str],
    pub misleading: &'static [&'static str],
    /// Right during the warm-up, wrong after the facts change (the tooling moved).
    pub stale: &'static [&'static str],
    /// The command the agent runs for this topic (`memd-eval evidence`): it fails first, then
    /// passes if the agent was told right (`fix_works`).
    pub command: &'static str,
}

/// Turns at the start that ask only about the topic with stale notes, while those are still
/// right: enough `worked` outcomes to promote them to patterns (score 1.0), as a note that
/// served well for weeks would be. Then the facts change.
pub const WARMUP_TURNS: usize = 8;
/// The topic whose notes go stale.
pub const STALE_TOPIC: usize = 3;

/// Deploy notes start as `worked` (0.7): the agent believed every one; three failures take a
/// misleading one to 0 and deletion. Migration and test notes start neutral (0.5): two
/// failures delete. The CI notes are the hard case: promoted to patterns at 1.0 during the
/// warm-up, three failures leave them at 0.1, at or below every deletion threshold, and three
/// failures since the last success dispute them: the hooks stop injecting them either way.
pub const TOPICS: [Topic; 4] = [
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
        stale: &[],
        command: "make release",
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
        stale: &[],
        command: "make migrate",
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
        stale: &[],
        command: "make test",
    },
    Topic {
        name: "ci",
        queries: &[
            "Where does lantern's CI run and how do I trigger a build?",
            "How do I rerun a failed lantern CI build?",
            "Where are lantern's CI build artifacts stored?",
            "How is continuous integration set up for lantern?",
        ],
        initial: None,
        correct: &[
            "Lantern CI runs on GitHub Actions (.github/workflows/ci.yml); rerun a failed build from the pull request's Checks tab.",
            "Lantern CI build artifacts are published as GitHub release assets by the ci.yml workflow.",
        ],
        misleading: &[],
        stale: &[
            "Lantern CI runs on the Jenkins server; trigger or rerun a build from the lantern-main Jenkins job.",
            "Lantern CI build artifacts are uploaded by Jenkins to the Nexus repository under lantern/builds.",
        ],
        command: "gh run rerun --failed",
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
    /// Its role once the facts changed (a stale note is `Misleading` here).
    pub role: Role,
    /// Right before the facts changed, wrong after.
    pub stale: bool,
    /// Stored when the facts change (the replacement notes), not at the start.
    pub after_change: bool,
    pub content: &'static str,
    pub initial: Option<&'static str>,
}

impl Seed {
    /// The note's role at `turn`: a stale note is correct until the warm-up ends.
    pub fn role_at(&self, turn: usize) -> Role {
        if self.stale && turn <= WARMUP_TURNS {
            Role::Correct
        } else {
            self.role
        }
    }

    /// The first turn whose probe counts for eviction and rank changes: the one after the
    /// facts changed for stale and replacement notes, the start for the others.
    pub fn baseline_turn(&self) -> usize {
        if self.stale || self.after_change {
            WARMUP_TURNS
        } else {
            0
        }
    }
}

/// Every note of the scenario: each topic's correct, misleading and stale notes, then filler.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    for (i, t) in TOPICS.iter().enumerate() {
        let has_stale = !t.stale.is_empty();
        let lists = [
            (Role::Correct, t.correct, false, has_stale),
            (Role::Misleading, t.misleading, false, false),
            (Role::Misleading, t.stale, true, false),
        ];
        for (role, list, stale, after_change) in lists {
            out.extend(list.iter().map(|content| Seed {
                topic: Some(i),
                role,
                stale,
                after_change,
                content,
                initial: t.initial,
            }));
        }
    }
    out.extend(FILLER.iter().map(|content| Seed {
        topic: None,
        role: Role::Filler,
        stale: false,
        after_change: false,
        content,
        initial: None,
    }));
    out
}

/// The topic and question of turn `turn` (1-based): the stale topic during the warm-up, then
/// every topic in rotation, paraphrases in turn.
pub fn question(turn: usize) -> (usize, &'static str) {
    let i = turn.saturating_sub(1);
    if i < WARMUP_TURNS {
        let queries = TOPICS[STALE_TOPIC].queries;
        return (STALE_TOPIC, queries[i % queries.len()]);
    }
    let i = i - WARMUP_TURNS;
    let topic = i % TOPICS.len();
    let queries = TOPICS[topic].queries;
    (topic, queries[(i / TOPICS.len()) % queries.len()])
}

/// The simulated user's rule for one note injected at `turn`, given the topic asked about: a
/// note of that topic worked if right at the time and failed if wrong; anything else was not
/// used.
pub fn judge(seed: Option<&Seed>, asked: usize, turn: usize) -> Outcome {
    match seed {
        Some(s) if s.topic == Some(asked) => match s.role_at(turn) {
            Role::Correct => Outcome::Worked,
            Role::Misleading => Outcome::Failed,
            Role::Filler => Outcome::Unknown,
        },
        _ => Outcome::Unknown,
    }
}

/// Whether the agent's fix at `turn` works (`memd-eval evidence`): a note of the asked topic
/// that is right then was injected, and none that is wrong. Otherwise its command fails again.
pub fn fix_works<'a>(
    injected: impl IntoIterator<Item = &'a Seed>,
    asked: usize,
    turn: usize,
) -> bool {
    let mut right = false;
    for s in injected.into_iter().filter(|s| s.topic == Some(asked)) {
        match s.role_at(turn) {
            Role::Correct => right = true,
            Role::Misleading => return false,
            Role::Filler => {}
        }
    }
    right
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
    fn the_warm_up_asks_the_stale_topic_then_topics_rotate() {
        assert_eq!(question(1), (STALE_TOPIC, TOPICS[STALE_TOPIC].queries[0]));
        assert_eq!(question(WARMUP_TURNS).0, STALE_TOPIC);
        let first = WARMUP_TURNS + 1;
        assert_eq!(question(first), (0, TOPICS[0].queries[0]));
        assert_eq!(question(first + 1), (1, TOPICS[1].queries[0]));
        assert_eq!(question(first + TOPICS.len()), (0, TOPICS[0].queries[1]));
        // Paraphrase counts are 5 and 4: every (topic, question) pair recurs after 4 × 20 turns.
        let period = TOPICS.len() * 20;
        assert_eq!(question(first + period), question(first));
    }

    #[test]
    fn the_rule_scores_only_notes_of_the_asked_topic() {
        let seeds = seeds();
        let correct = seeds.iter().find(|s| s.role == Role::Correct).unwrap();
        let misleading = seeds.iter().find(|s| s.role == Role::Misleading).unwrap();
        let late = WARMUP_TURNS + 1;
        assert_eq!(judge(Some(correct), 0, late), Outcome::Worked);
        assert_eq!(judge(Some(misleading), 0, late), Outcome::Failed);
        assert_eq!(judge(Some(misleading), 1, late), Outcome::Unknown);
        assert_eq!(judge(None, 0, late), Outcome::Unknown);
        assert_eq!(
            exchange_outcome(&[Outcome::Worked, Outcome::Failed]),
            Outcome::Failed
        );
        assert_eq!(exchange_outcome(&[Outcome::Unknown]), Outcome::Unknown);
    }

    #[test]
    fn stale_notes_turn_from_right_to_wrong_when_the_facts_change() {
        let seeds = seeds();
        let stale = seeds.iter().find(|s| s.stale).unwrap();
        assert_eq!(stale.topic, Some(STALE_TOPIC));
        assert_eq!(
            judge(Some(stale), STALE_TOPIC, WARMUP_TURNS),
            Outcome::Worked
        );
        assert_eq!(
            judge(Some(stale), STALE_TOPIC, WARMUP_TURNS + 1),
            Outcome::Failed
        );
        assert_eq!(stale.baseline_turn(), WARMUP_TURNS);
        let replacement = seeds.iter().find(|s| s.after_change).unwrap();
        assert_eq!(replacement.role, Role::Correct);
        assert!(
            seeds
                .iter()
                .filter(|s| s.after_change)
                .all(|s| s.topic == Some(STALE_TOPIC))
        );
    }

    #[test]
    fn a_fix_works_with_a_right_note_of_the_topic_and_no_wrong_one() {
        let seeds = seeds();
        let late = WARMUP_TURNS + 1;
        let of = |topic: usize, role: Role| {
            seeds
                .iter()
                .find(|s| s.topic == Some(topic) && s.role == role && !s.stale)
                .unwrap()
        };
        let (right, wrong) = (of(0, Role::Correct), of(0, Role::Misleading));
        assert!(fix_works([right], 0, late));
        assert!(!fix_works([right, wrong], 0, late));
        assert!(
            !fix_works([right], 1, late),
            "a note of another topic does not fix it"
        );
        assert!(!fix_works([], 0, late));
        let stale = seeds.iter().find(|s| s.stale).unwrap();
        assert!(fix_works([stale], STALE_TOPIC, WARMUP_TURNS));
        assert!(!fix_works([stale], STALE_TOPIC, late));
    }

    #[test]
    fn every_note_is_distinct() {
        let seeds = seeds();
        let mut contents: Vec<&str> = seeds.iter().map(|s| s.content).collect();
        contents.sort();
        contents.dedup();
        assert_eq!(contents.len(), seeds.len());
        assert_eq!(
            seeds.iter().filter(|s| s.role == Role::Misleading).count(),
            9
        );
    }
}
