//! The command-line interface: parsing ([`args`]), validation into configs ([`config`]),
//! dispatch, and output formatting ([`output`]). Exit codes are documented in [`exit`].
//! Each `*_cmd` file parses, configures, calls and prints.

pub mod args;
pub mod batch_tokens;
pub mod bench_cmd;
pub mod bench_prefix_cmd;
pub mod bench_products_cmd;
pub mod bench_serve_cmd;
pub mod bench_wan_cmd;
pub mod cache_cmd;
pub mod client_cmd;
pub mod config;
pub mod edge_inspect_cmd;
pub mod exit;
pub mod generate_cmd;
pub mod local_nodes;
pub mod model_cmd;
pub mod node_cmd;
pub mod orchestrate_cmd;
pub mod output;
pub mod plan_cmd;
pub mod plan_speed;
pub mod pool_init_cmd;
pub mod pool_watch_cmd;
pub mod progress;
pub mod relay_cmd;
pub mod requests;
pub mod run_report;
pub mod run_sink;
pub mod serve_cmd;
pub mod signals;
pub mod util_cmd;
pub mod wan_link_cmd;

use clap::Parser;
use std::io::IsTerminal;

use args::{
    BenchCommand, CacheCommand, Cli, Command, EdgeCommand, ModelCommand, NodeCommand,
    OrchestrateCommand, PoolCommand, RelayCommand, RunCommand,
};
use exit::{CliError, ExitCode};
use output::Output;

/// Runs the CLI with the process's arguments and returns its exit code.
pub fn main() -> std::process::ExitCode {
    install_report_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with success; usage errors to stderr with 2,
            // and under `--json` also as the one `error` line on stdout.
            if e.use_stderr() && json_was_asked(std::env::args_os()) {
                let mut out = Output::default();
                let _ = out.json("error", &usage_error_line(&e)).and_then(|()| out.flush());
            }
            let _ = e.print();
            let code = if e.use_stderr() { ExitCode::Usage } else { ExitCode::Success };
            return std::process::ExitCode::from(code.code());
        }
    };
    if let Command::Worker = cli.command {
        // Read here, at the edge: how long the worker polls before it blocks
        // (`SWACTOR_WORKER_SPIN_US`, at most 10 ms). By default it polls only where cores
        // are plentiful: with fewer cores than busy processes a spinning worker takes the
        // core its peers need, and the doorbell wakes a blocked one in microseconds.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spin_us = std::env::var("SWACTOR_WORKER_SPIN_US")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(if cores >= 4 { 20 } else { 0 })
            .min(10_000);
        let spin = std::time::Duration::from_micros(spin_us);
        return std::process::ExitCode::from(crate::worker::process::run(spin));
    }
    let json = cli.command.output().is_some_and(|o| o.json);
    let mut out = Output::default();
    let result = run(cli.command, &mut out).and_then(|()| out.flush().map_err(CliError::from));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if json {
                let line = serde_json::json!({
                    "exit_code": e.code.code(),
                    "reason": e.reason,
                    "message": format!("{:#}", e.report),
                });
                let _ = out.json("error", &line).and_then(|()| out.flush());
            }
            if !e.told {
                eprintln!("Error: {:?}", e.report);
            }
            std::process::ExitCode::from(e.code.code())
        }
    }
}

/// Whether `--json` was among the arguments, for errors found before they are parsed: a
/// `--json` after `--` is a value, not the flag.
fn json_was_asked(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    args.into_iter().skip(1).take_while(|a| a != "--").any(|a| a == "--json")
}

/// The `error` line of a usage error caught by the argument parser.
fn usage_error_line(e: &clap::Error) -> serde_json::Value {
    let rendered = e.render().to_string();
    // clap's first paragraph says what is wrong (`error: ...` and any listed arguments);
    // the usage and hints follow, and stay on stderr.
    let what: Vec<&str> = rendered.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    let what = what.join(" ");
    let message = what.strip_prefix("error: ").unwrap_or(&what).to_string();
    serde_json::json!({
        "exit_code": ExitCode::Usage.code(),
        "reason": "usage",
        "message": message,
    })
}

/// Dispatches one parsed command.
pub fn run(command: Command, out: &mut Output) -> Result<(), CliError> {
    match command {
        Command::Run(RunCommand::Plan(args)) => plan_cmd::run_plan(&args, out),
        Command::Run(RunCommand::Local(args)) if args.serve => serve_cmd::local(&args, out),
        Command::Run(RunCommand::Local(args)) => orchestrate_cmd::local(&args, out),
        Command::Orchestrate(OrchestrateCommand::Pool(args)) => orchestrate_cmd::pool(&args, out),
        Command::Orchestrate(OrchestrateCommand::Serve(args)) => serve_cmd::orchestrate(&args, out),
        Command::Generate(args) => generate_cmd::generate(&args, out),
        Command::Model(ModelCommand::Inspect(args)) => model_cmd::inspect(&args, out),
        Command::Model(ModelCommand::Synth(args)) => model_cmd::synth(&args, out),
        Command::Model(ModelCommand::Quantize(args)) => model_cmd::quantize(&args, out),
        Command::Model(ModelCommand::Tokenize(args)) => model_cmd::tokenize(&args, out),
        Command::Bench(BenchCommand::Decode(args)) => bench_cmd::decode(&args, out),
        Command::Bench(BenchCommand::Pipeline(args)) => bench_cmd::pipeline(&args, out),
        Command::Bench(BenchCommand::Failover(args)) => bench_cmd::failover(&args, out),
        Command::Bench(BenchCommand::Serve(args)) => bench_serve_cmd::serve(&args, out),
        Command::Bench(BenchCommand::Prefix(args)) => bench_prefix_cmd::prefix(&args, out),
        Command::Bench(BenchCommand::Structured(args)) => bench_prefix_cmd::structured(&args, out),
        Command::Bench(BenchCommand::Engine(args)) => bench_cmd::engine(&args, out),
        Command::Bench(BenchCommand::Products(args)) => bench_products_cmd::products(&args, out),
        Command::Bench(BenchCommand::Speculate(args)) => bench_serve_cmd::speculate(&args, out),
        Command::Bench(BenchCommand::Wan(args)) => bench_wan_cmd::wan(&args, out),
        Command::Node(NodeCommand::Id(args)) => node_cmd::node_id(&args, out),
        Command::Node(NodeCommand::Boot(args)) => node_cmd::boot(&args, out),
        Command::Edge(EdgeCommand::Inspect(args)) => edge_inspect_cmd::inspect(&args, out),
        Command::Pool(PoolCommand::Watch(args)) => pool_watch_cmd::watch(&args, out),
        Command::Pool(PoolCommand::Init(args)) => pool_init_cmd::pool_init(&args, out),
        Command::Bench(BenchCommand::Ring(args)) => bench_cmd::ring(&args, out),
        Command::Bench(BenchCommand::Wake(args)) => bench_cmd::wake(&args, out),
        Command::Bench(BenchCommand::Edge(args)) => bench_cmd::edge(&args, out),
        Command::Cache(CacheCommand::Ls(args)) => cache_cmd::ls(&args, out),
        Command::Relay(RelayCommand::Serve(args)) => relay_cmd::serve(&args, out),
        Command::Chat(args) => client_cmd::chat(&args, out),
        Command::Complete(args) => client_cmd::complete(&args, out),
        Command::Cache(CacheCommand::Clear(args)) => cache_cmd::clear(&args, out),
        Command::Util(cmd) => util_cmd::run(cmd, out),
        Command::Worker => Err(CliError::new(
            ExitCode::Usage,
            "usage",
            color_eyre::eyre::eyre!("the worker role is started by `swactor node boot`"),
        )),
    }
}

/// Installs color-eyre's report printer, in plain text unless stderr is a terminal.
fn install_report_hook() {
    let mut hook = color_eyre::config::HookBuilder::default().display_env_section(false);
    if !std::io::stderr().is_terminal() || std::env::var_os("NO_COLOR").is_some() {
        hook = hook.theme(color_eyre::config::Theme::new());
    }
    let _ = hook.install();
}
