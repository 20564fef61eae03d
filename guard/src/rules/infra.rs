//! The rules about data and infrastructure that live off this machine's disks, all asking by
//! default: `infra_destroy` (terraform / tofu / terragrunt / pulumi / cdk destroy, kubectl
//! deleting a namespace or everything, helm uninstall in a production context),
//! `bucket_delete` (recursive deletes in S3, GCS, Azure Blob and S3-like stores),
//! `volume_prune` (container pruning that deletes volumes) and `kv_flush` (Redis and its
//! forks flushing their keys).
//!
//! Must never flag what only reads, plans or lists (`terraform plan -destroy`, `kubectl get ns`,
//! `aws s3 ls --recursive`, `helm uninstall --dry-run`), and never deny: these are asked about
//! because they are often intended.

use super::{Ctx, Scan};
use crate::shell::{self, lex};

pub(crate) fn check(ctx: &Ctx, scan: &mut Scan) {
    let cmd = ctx.cmd;
    let p = cmd.program.as_str();
    let args = &cmd.args;
    let ops: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let flag = |names: &[&str]| {
        args.iter().any(|a| {
            names
                .iter()
                .any(|n| a == n || a.starts_with(&format!("{n}=")))
        })
    };
    let short = |letters: &[char]| {
        args.iter().any(|a| {
            a.len() > 1 && a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letters)
        })
    };
    let verb = |words: &[&str]| ops.windows(words.len()).any(|w| w == words);
    if flag(&["--dry-run"]) {
        return;
    }
    let hit: Option<(&'static str, &str)> = match p {
        "terraform" | "tofu" | "opentofu" => (ops.first() == Some(&"destroy")
            || (ops.first() == Some(&"apply") && flag(&["-destroy", "--destroy"])))
        .then_some((
            "infra_destroy",
            "tears down every resource of the Terraform workspace",
        )),
        "terragrunt" => (ops.iter().any(|o| matches!(*o, "destroy" | "destroy-all"))
            || flag(&["-destroy", "--destroy"]))
        .then_some((
            "infra_destroy",
            "tears down every resource of the Terragrunt stack",
        )),
        "pulumi" => matches!(ops.first(), Some(&("destroy" | "down"))).then_some((
            "infra_destroy",
            "tears down every resource of the Pulumi stack",
        )),
        "cdk" => (ops.first() == Some(&"destroy"))
            .then_some(("infra_destroy", "deletes the CDK stack and its resources")),
        "kubectl" | "oc" => kubectl(args),
        "helm" => helm(ctx),
        "aws" => {
            let s3 = ops.iter().position(|o| *o == "s3");
            match s3.and_then(|k| ops.get(k + 1)) {
                Some(&"rm") if flag(&["--recursive"]) => {
                    Some(("bucket_delete", "deletes every object under an S3 prefix"))
                }
                Some(&"rb") if flag(&["--force"]) => Some((
                    "bucket_delete",
                    "deletes an S3 bucket with everything in it",
                )),
                _ => None,
            }
        }
        "gsutil" => (verb(&["rm"]) && (short(&['r', 'R']) || flag(&["--recursive"]))).then_some((
            "bucket_delete",
            "deletes every object under a Cloud Storage path",
        )),
        "gcloud" => (verb(&["storage", "rm"]) && (short(&['r', 'R']) || flag(&["--recursive"])))
            .then_some((
                "bucket_delete",
                "deletes every object under a Cloud Storage path",
            )),
        "az" => (verb(&["storage", "blob", "delete-batch"])
            || verb(&["storage", "container", "delete"])
            || verb(&["storage", "account", "delete"]))
        .then_some(("bucket_delete", "deletes Azure Storage blobs in bulk")),
        "s3cmd" => (matches!(ops.first(), Some(&("del" | "rm" | "rb")))
            && (short(&['r']) || flag(&["--recursive"])))
        .then_some(("bucket_delete", "deletes every object under an S3 prefix")),
        "mc" => (matches!(ops.first(), Some(&("rm" | "rb")))
            && flag(&["--force"])
            && (ops.first() == Some(&"rb") || short(&['r']) || flag(&["--recursive"])))
        .then_some((
            "bucket_delete",
            "deletes every object under an object-storage path",
        )),
        "rclone" => (ops.first() == Some(&"purge")).then_some((
            "bucket_delete",
            "deletes a remote path and everything in it",
        )),
        "docker" | "podman" | "nerdctl" => {
            if verb(&["volume", "prune"]) {
                Some(("volume_prune", "deletes every unused volume, with its data"))
            } else if verb(&["system", "prune"]) && flag(&["--volumes"]) {
                Some((
                    "volume_prune",
                    "prunes containers, images and the volumes with their data",
                ))
            } else {
                None
            }
        }
        _ => None,
    };
    if let Some((rule, what)) = hit {
        scan.add(rule, format!("{what} (`{}`)", ctx.snippet()));
    }
    if let Some(what) = flush(ctx) {
        scan.add("kv_flush", format!("{what} (`{}`)", ctx.pipeline_snippet()));
    }
}

/// `kubectl delete namespace …` (`ns`, `namespaces`, `ns/x`), or `delete … --all` /
/// `--all-namespaces`.
fn kubectl(args: &[String]) -> Option<(&'static str, &'static str)> {
    let delete = args.iter().position(|a| a == "delete")?;
    let rest = &args[delete + 1..];
    let kind = rest
        .iter()
        .find(|a| !a.starts_with('-'))?
        .to_ascii_lowercase();
    let kind = kind.split('/').next().unwrap_or("");
    if matches!(kind, "namespace" | "namespaces" | "ns") {
        return Some((
            "infra_destroy",
            "deletes a Kubernetes namespace and everything in it",
        ));
    }
    rest.iter()
        .any(|a| a == "--all" || a == "--all-namespaces" || a == "-A")
        .then_some((
            "infra_destroy",
            "deletes every Kubernetes resource of that kind",
        ))
}

/// `helm uninstall` (`delete`, `del`, `un`) where the release, namespace, kube context or an
/// environment variable of the command names production.
fn helm(ctx: &Ctx) -> Option<(&'static str, &'static str)> {
    const VALUED: &[&str] = &[
        "-n",
        "--namespace",
        "--kube-context",
        "--kubeconfig",
        "--kube-token",
        "--kube-apiserver",
        "--registry-config",
        "--repository-config",
        "--repository-cache",
    ];
    let mut it = ctx.cmd.args.iter();
    let mut sub = None;
    while let Some(a) = it.next() {
        if VALUED.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            sub = Some(a.as_str());
            break;
        }
    }
    if !matches!(sub, Some("uninstall" | "delete" | "del" | "un")) {
        return None;
    }
    let words = ctx.simple.words.iter().map(|w| w.text.as_str());
    words
        .clone()
        .any(production)
        .then_some(("infra_destroy", "uninstalls a Helm release in production"))
}

/// A word naming production: one of its parts is `prod`, `production`, `prd` or `live`.
pub(crate) fn production(word: &str) -> bool {
    word.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|p| matches!(p, "prod" | "production" | "prd" | "live"))
}

const KV_CLIENTS: &[&str] = &["redis-cli", "valkey-cli", "keydb-cli"];
/// Programs that run another program given later in their arguments.
const RUNNERS: &[&str] = &["docker", "podman", "nerdctl", "kubectl", "oc"];

/// `redis-cli FLUSHALL` / `FLUSHDB`, given as arguments, through a container runner, or fed
/// on standard input (`echo FLUSHALL | redis-cli`).
fn flush(ctx: &Ctx) -> Option<String> {
    let cmd = ctx.cmd;
    let (client, args) = if KV_CLIENTS.contains(&cmd.program.as_str()) {
        (cmd.program.clone(), &cmd.args[..])
    } else if RUNNERS.contains(&cmd.program.as_str()) {
        let k = cmd
            .args
            .iter()
            .position(|a| KV_CLIENTS.contains(&shell::program_name(a).as_str()))?;
        (shell::program_name(&cmd.args[k]), &cmd.args[k + 1..])
    } else {
        return None;
    };
    let stdin = ctx
        .simple
        .redirects
        .iter()
        .filter(|r| matches!(r.op, lex::RedirOp::HereDoc | lex::RedirOp::HereString))
        .map(|r| r.target.text.as_str())
        .chain((ctx.simple.stage > 0).then_some(ctx.pipe.fed.as_str()));
    let said = args
        .iter()
        .map(String::as_str)
        .chain(stdin)
        .flat_map(str::split_whitespace)
        .find(|w| w.eq_ignore_ascii_case("flushall") || w.eq_ignore_ascii_case("flushdb"))?;
    Some(format!(
        "deletes every key with `{}` run by {client}",
        said.to_ascii_uppercase()
    ))
}
