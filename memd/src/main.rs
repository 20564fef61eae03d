//! The `memd` binary: see `memd --help`.

fn main() -> std::process::ExitCode {
    memd::cli::main()
}
