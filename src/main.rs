//! The `swactor` binary: every role is a subcommand of the library's CLI.

fn main() -> std::process::ExitCode {
    swactor::cli::main()
}
