//! `memd-eval`: memd's offline evaluations
//! (`memd-eval locomo --data DIR`, `memd-eval coding [--data DIR]`, `memd-eval learning`).

use clap::Parser;
use std::process::ExitCode;

/// Offline evaluations of memd's retrieval and outcome learning.
#[derive(Parser)]
#[command(name = "memd-eval", version)]
struct Cli {
    #[command(subcommand)]
    command: memd_lab::eval::EvalCommand,
}

fn main() -> ExitCode {
    match memd_lab::eval::run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memd-eval: {e:#}");
            ExitCode::FAILURE
        }
    }
}
