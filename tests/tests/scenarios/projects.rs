//! Projects: two repositories on one machine. Every scenario asks the same paraphrased
//! questions in both and counts, per injection, whether it carried the asking project's own
//! answer (the same-project hit rate, which must stay 100 %) and whether it carried the other
//! project's (cross-project injections, which must be 0). Each prints its figures.

use super::*;
use std::path::PathBuf;
use tests::project::make_repo;

/// One thing each project knows, the question that should recall it, and how to recognise
/// each project's answer in an injection.
struct Topic {
    question: &'static str,
    shop: &'static str,
    shop_marker: &'static str,
    blog: &'static str,
    blog_marker: &'static str,
}

const TOPICS: [Topic; 3] = [
    Topic {
        question: "how do I run the test suite for this project?",
        shop: "Shop tests need Postgres on port 5433; run the test suite with `just test`.",
        shop_marker: "just test",
        blog: "Blog tests run with `npm run test:unit`; the test suite needs no database.",
        blog_marker: "npm run test:unit",
    },
    Topic {
        question: "how is this app deployed to production?",
        shop: "The shop app is deployed to production with `fly deploy --app shop-prod`.",
        shop_marker: "fly deploy",
        blog: "The blog app is deployed to production by pushing to the pages branch.",
        blog_marker: "pages branch",
    },
    Topic {
        question: "where is the configuration file of this app?",
        shop: "The shop app's configuration file is config/shop.toml.",
        shop_marker: "config/shop.toml",
        blog: "The blog app's configuration file is site.config.js at the repository root.",
        blog_marker: "site.config.js",
    },
];

struct Repos {
    shop: PathBuf,
    blog: PathBuf,
}

fn repos(d: &Daemon) -> Repos {
    Repos {
        shop: make_repo(d.root(), "shop", Some("git@github.com:acme/shop.git")),
        blog: make_repo(d.root(), "blog", Some("https://gitlab.com/acme/blog.git")),
    }
}

fn bank_in(d: &Daemon, dir: &Path, content: &str, scope: &str) -> MemoryBankResponse {
    d.post(
        "/api/memory-bank/add",
        &json!({"content": content, "cwd": dir, "scope": scope}),
    )
}

/// Same-project hits and cross-project injections over every topic asked in both repositories.
#[derive(Default)]
struct Tally {
    asked: usize,
    own: usize,
    cross: usize,
}

impl Tally {
    fn ask(&mut self, d: &Daemon, r: &Repos, conv: &str) {
        for (i, t) in TOPICS.iter().enumerate() {
            for (dir, own, other, name) in [
                (&r.shop, t.shop_marker, t.blog_marker, "shop"),
                (&r.blog, t.blog_marker, t.shop_marker, "blog"),
            ] {
                let ctx = prompt_in(d, dir, &format!("{conv}-{name}-{i}"), t.question);
                self.asked += 1;
                self.own += usize::from(ctx.contains(own));
                self.cross += usize::from(ctx.contains(other));
            }
        }
    }

    fn report_and_check(&self, scenario: &str) {
        eprintln!(
            "projects/{scenario}: {} questions, own answer injected {}/{} ({:.0} %), cross-project injections {}",
            self.asked,
            self.own,
            self.asked,
            100.0 * self.own as f64 / self.asked.max(1) as f64,
            self.cross
        );
        assert_eq!(
            self.cross, 0,
            "{scenario}: another project's memory was injected"
        );
        assert_eq!(
            self.own, self.asked,
            "{scenario}: a question missed its own answer"
        );
    }
}

#[test]
fn projects_the_same_question_gets_each_repositorys_own_fact() {
    let d = tests::start_daemon();
    let r = repos(&d);
    for t in &TOPICS {
        bank_in(&d, &r.shop, t.shop, "project");
        bank_in(&d, &r.blog.join("src"), t.blog, "project");
    }
    embedded(&d);
    let mut tally = Tally::default();
    tally.ask(&d, &r, "facts");
    tally.report_and_check("facts");
}

#[test]
fn projects_what_an_exchange_taught_stays_in_its_repository() {
    let d = tests::start_daemon();
    let r = repos(&d);
    for (i, t) in TOPICS.iter().enumerate() {
        prompt_in(&d, &r.shop, &format!("teach-shop-{i}"), t.question);
        stop_in(&d, &r.shop, &format!("teach-shop-{i}"), t.shop);
        prompt_in(&d, &r.blog, &format!("teach-blog-{i}"), t.question);
        stop_in(&d, &r.blog, &format!("teach-blog-{i}"), t.blog);
    }
    embedded(&d);
    let mut tally = Tally::default();
    tally.ask(&d, &r, "exchanges");
    tally.report_and_check("exchanges");
}

#[test]
fn projects_a_global_fact_reaches_every_directory() {
    let d = tests::start_daemon();
    let r = repos(&d);
    let plain = d.root().join("scratch");
    std::fs::create_dir_all(&plain).unwrap();
    let global = bank_in(
        &d,
        &r.shop,
        "The user prefers answers that show the code first and explain after.",
        "global",
    );
    assert_eq!(global.project, None);
    for t in &TOPICS {
        bank_in(&d, &r.shop, t.shop, "project");
        bank_in(&d, &r.blog, t.blog, "project");
    }
    embedded(&d);
    for (i, dir) in [&r.shop, &r.blog, &plain].into_iter().enumerate() {
        let ctx = prompt_in(
            &d,
            dir,
            &format!("pref-{i}"),
            "what answer style do I prefer?",
        );
        assert!(ctx.contains(&global.doc_id), "{}: {ctx}", dir.display());
    }
    // A directory outside both repositories sees global memories only.
    let outside = prompt_in(&d, &plain, "outside", TOPICS[1].question);
    assert!(
        !outside.contains(TOPICS[1].shop_marker) && !outside.contains(TOPICS[1].blog_marker),
        "{outside}"
    );
    let mut tally = Tally::default();
    tally.ask(&d, &r, "global");
    tally.report_and_check("global");
}

#[test]
fn projects_two_clones_of_one_repository_are_one_project() {
    let d = tests::start_daemon();
    let r = repos(&d);
    let clones = d.root().join("elsewhere");
    let shop_again = make_repo(&clones, "shop-copy", Some("https://github.com/acme/shop"));
    for t in &TOPICS {
        bank_in(&d, &shop_again, t.shop, "project");
        bank_in(&d, &r.blog, t.blog, "project");
    }
    embedded(&d);
    let projects: ProjectsResponse = d.get("/api/projects");
    let ids: Vec<&str> = projects.projects.iter().map(|p| p.id.as_str()).collect();
    assert!(
        ids.contains(&"github.com/acme/shop") && ids.len() == 2,
        "{ids:?}"
    );
    // Learned in the other clone, asked in the first one.
    let mut tally = Tally::default();
    tally.ask(&d, &r, "clones");
    tally.report_and_check("clones");
}

#[test]
fn projects_memories_from_before_projects_stay_visible_everywhere() {
    let d = tests::start_daemon();
    let r = repos(&d);
    // An export line written before memories had a project: no `project` field at all.
    let old = json!({"key": 7, "id": "memory_bank_00000000abcd", "collection": "memory_bank",
        "content": "The user's name is Ada and she reviews every pull request herself.",
        "created_at": 1_700_000_000_000_i64, "updated_at": 1_700_000_000_000_i64,
        "score": 1.0, "uses": 0, "success_count": 0.0, "outcome_history": [],
        "last_outcome": null, "last_used": null, "tags": [], "importance": 0.9,
        "confidence": 0.9, "archived": false, "former_ids": [], "metadata": {}});
    let (status, body) = d.post_raw("/api/import", old.to_string().as_bytes(), true);
    assert_eq!(status, 200, "{body}");
    for t in &TOPICS {
        bank_in(&d, &r.shop, t.shop, "project");
        bank_in(&d, &r.blog, t.blog, "project");
    }
    embedded(&d);
    for (i, dir) in [&r.shop, &r.blog].into_iter().enumerate() {
        let ctx = prompt_in(
            &d,
            dir,
            &format!("who-{i}"),
            "who reviews the pull requests?",
        );
        assert!(ctx.contains("memory_bank_00000000abcd"), "{ctx}");
    }
    let projects: ProjectsResponse = d.get("/api/projects");
    assert_eq!(projects.global.get("memory_bank"), Some(&1));
    let mut tally = Tally::default();
    tally.ask(&d, &r, "upgrade");
    tally.report_and_check("upgrade");
}
