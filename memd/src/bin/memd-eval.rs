//! `memd-eval`: the evaluations of `memd eval` as a standalone program
//! (`memd-eval locomo --data DIR`, `memd-eval learning`).

use clap::Parser;
use std::process::ExitCode;

/// Offline evaluations of memd's retrieval and outcome learning.
#[derive(Parser)]
#[command(name = "memd-eval", version)]
struct Cli {
    #[command(subcommand)]
    command: memd::eval::EvalCommand,
}

fn main() -> ExitCode {
    match memd::eval::run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memd-eval: {e:#}");
            ExitCode::FAILURE
        }
    }
}
