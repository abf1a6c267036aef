//! Hidden `swactor util ...`: shell completions, man pages and the Markdown CLI reference,
//! all generated from the clap definitions so they never drift (a test checks the
//! committed copies in `completions/` and `man/`).

use clap::CommandFactory;
use clap_complete::Shell;
use color_eyre::eyre::eyre;
use std::path::Path;

use super::args::{Cli, UtilCommand};
use super::exit::{CliError, ExitCode};
use super::output::Output;

/// Shells whose completion files are generated.
pub const SHELLS: [Shell; 5] =
    [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::Elvish, Shell::PowerShell];

/// Runs a `util` subcommand.
pub fn run(cmd: UtilCommand, out: &mut Output) -> Result<(), CliError> {
    match cmd {
        UtilCommand::Completions { shell, dir } => {
            if let Some(dir) = dir {
                for shell in SHELLS {
                    write(dir.join(completion_file_name(shell)), &completion(shell))?;
                }
            }
            if let Some(shell) = shell {
                out.line(String::from_utf8_lossy(&completion(shell)).trim_end())?;
            }
            Ok(())
        }
        UtilCommand::Man { dir } => {
            match dir {
                Some(dir) => {
                    for (name, page) in man_pages() {
                        write(dir.join(name), &page)?;
                    }
                }
                None => {
                    let pages = man_pages();
                    out.line(String::from_utf8_lossy(&pages[0].1).trim_end())?;
                }
            }
            Ok(())
        }
        UtilCommand::MarkdownHelp => out.line(markdown_help().trim_end()).map_err(CliError::from),
        UtilCommand::RingProduce { layout, bytes, uncommitted } => {
            ring_produce(&layout, bytes, uncommitted, out)
        }
        UtilCommand::SwimImpostor { mode, node_id, endpoint_id, target, listen } => {
            swim_impostor(mode, node_id, endpoint_id, target, listen, out)
        }
        UtilCommand::Fuzz(args) => fuzz(&args, out),
        UtilCommand::Simulate(args) => simulate(&args, out),
        UtilCommand::WanLink(args) => super::wan_link_cmd::wan_link(&args, out),
    }
}

#[derive(serde::Serialize)]
struct SimSummary {
    seeds: u64,
    from: u64,
    faults_by_class: std::collections::BTreeMap<&'static str, u64>,
    outcomes: std::collections::BTreeMap<String, u64>,
    /// Sessions that re-formed after a node loss.
    reformed: u64,
    /// Sessions that gave re-forming up (no node left, or an operator stop).
    reform_given_up: u64,
    failing_seeds: Vec<u64>,
    violations: u64,
}

/// `swactor util simulate`.
#[allow(clippy::disallowed_methods)] // the simulated clock starts at one real instant
fn simulate(args: &super::args::SimulateArgs, out: &mut Output) -> Result<(), CliError> {
    use crate::sim::{SimConfig, simulate};
    let base = std::time::Instant::now();
    let mut summary = SimSummary {
        seeds: args.seeds,
        from: args.from,
        faults_by_class: Default::default(),
        outcomes: Default::default(),
        reformed: 0,
        reform_given_up: 0,
        failing_seeds: Vec::new(),
        violations: 0,
    };
    for seed in args.from..args.from.saturating_add(args.seeds) {
        let cfg = SimConfig { seed, faults: !args.no_faults, planted: args.plant };
        let r = simulate(base, cfg);
        for f in &r.faults {
            *summary.faults_by_class.entry(f).or_default() += 1;
        }
        let outcome = r.outcome.map_or("none".to_string(), |o| format!("{o:?}").to_lowercase());
        *summary.outcomes.entry(outcome).or_default() += 1;
        summary.reformed += u64::from(r.reformed > 0);
        summary.reform_given_up += u64::from(r.abandoned.is_some());
        let failed = !r.violations.is_empty();
        if args.output.json && (failed || args.trace) {
            out.json("simulation", &r)?;
        }
        if (failed || args.trace) && !args.output.json {
            let replay = format!(
                "swactor util simulate --seeds 1 --from {seed}{}{} --trace",
                if args.no_faults { " --no-faults" } else { "" },
                args.plant.map_or(String::new(), |p| format!(" --plant {}", p.name()))
            );
            out.line(format!(
                "seed {seed}: {} violation(s); replay: {replay}",
                r.violations.len()
            ))?;
            for v in &r.violations {
                out.line(format!("  violated: {v}"))?;
            }
            for t in &r.trace {
                out.line(format!("  {t}"))?;
            }
        }
        if failed {
            summary.violations += r.violations.len() as u64;
            summary.failing_seeds.push(seed);
        }
    }
    if args.output.json {
        out.json("simulation_summary", &summary)?;
    } else {
        out.line(format!(
            "{} seeds from {}: {} with violations {:?}; outcomes {:?}; {} sessions re-formed \
             after a node loss, {} gave re-forming up; faults injected {:?}",
            summary.seeds,
            summary.from,
            summary.failing_seeds.len(),
            summary.failing_seeds.iter().take(20).collect::<Vec<_>>(),
            summary.outcomes,
            summary.reformed,
            summary.reform_given_up,
            summary.faults_by_class
        ))?;
    }
    out.flush()?;
    if !summary.failing_seeds.is_empty() {
        return Err(CliError::new(
            ExitCode::Internal,
            "simulation_violations",
            eyre!("{} seed(s) broke an invariant", summary.failing_seeds.len()),
        ));
    }
    Ok(())
}

fn fuzz(args: &super::args::FuzzArgs, out: &mut Output) -> Result<(), CliError> {
    use crate::fuzz::{Target, run};
    let targets = if args.target.is_empty() { Target::ALL.to_vec() } else { args.target.clone() };
    // Panics are caught and reported; the default hook would print each one.
    std::panic::set_hook(Box::new(|_| {}));
    let mut found = 0;
    for target in targets {
        let r = run(target, args.seed, args.iterations);
        if !r.clean() {
            found += 1;
        }
        if args.output.json {
            out.json("fuzz", &r)?;
        } else {
            out.line(format!(
                "{:<12} {} inputs: {} decoded, {} refused, {} panics, {} slow; slowest {} µs",
                format!("{target:?}"),
                r.inputs,
                r.decoded,
                r.rejected,
                r.panics.len(),
                r.slow.len(),
                r.slowest_us
            ))?;
            for (i, m) in r.panics.iter().take(5) {
                out.line(format!("  panic at iteration {i} (seed {}): {m}", args.seed))?;
            }
        }
        out.flush()?;
    }
    let _ = std::panic::take_hook();
    if found > 0 {
        return Err(CliError::new(
            ExitCode::Internal,
            "fuzz_findings",
            eyre!("{found} decoder(s) panicked or hung; rerun with the same --seed to replay"),
        ));
    }
    Ok(())
}

fn swim_impostor(
    mode: super::args::ImpostorModeArg,
    node_id: u64,
    endpoint_id: String,
    target: std::net::SocketAddr,
    listen: std::net::SocketAddr,
    out: &mut Output,
) -> Result<(), CliError> {
    use super::args::ImpostorModeArg as A;
    use crate::membership::impostor::{self, ImpostorMode as M};
    let mode = match mode {
        A::Plain => M::Plain,
        A::OwnKey => M::OwnKey,
        A::ForgedSigner => M::ForgedSigner,
        A::Replay => M::Replay,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let socket = tokio::net::UdpSocket::bind(listen).await?;
        let addr = socket.local_addr()?;
        out.json("impostor_started", &serde_json::json!({ "addr": addr.to_string() }))?;
        out.flush()?;
        let claim = crate::membership::swim::SwimIdentity {
            node_id: crate::wire::NodeId(node_id),
            addr: addr.into(),
            endpoint_id,
            bump: 0,
        };
        impostor::run(mode, claim, socket, target).await;
        Ok(())
    })
}

fn write(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), CliError> {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "io",
            eyre!(e).wrap_err(format!("cannot write {}", path.display())),
        )
    })
}

/// The conventional file name of a shell's completion script.
pub fn completion_file_name(shell: Shell) -> &'static str {
    match shell {
        Shell::Bash => "swactor.bash",
        Shell::Zsh => "_swactor",
        Shell::Fish => "swactor.fish",
        Shell::Elvish => "swactor.elv",
        Shell::PowerShell => "_swactor.ps1",
        _ => "swactor.completion",
    }
}

/// The CLI without its hidden subcommands (internal roles and generators), so that
/// completions never offer them.
fn visible_command() -> clap::Command {
    let full = Cli::command();
    let visible: Vec<clap::Command> =
        full.get_subcommands().filter(|s| !s.is_hide_set()).cloned().collect();
    let mut root =
        clap::Command::new("swactor").version(env!("CARGO_PKG_VERSION")).subcommands(visible);
    if let Some(about) = full.get_about() {
        root = root.about(about.clone());
    }
    root
}

/// The completion script for one shell.
pub fn completion(shell: Shell) -> Vec<u8> {
    let mut cmd = visible_command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "swactor", &mut buf);
    buf
}

/// Visible commands that have no subcommands of their own, with their full names.
fn all_commands(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{prefix} {}", sub.get_name());
        out.push((name.clone(), sub.clone()));
        if sub.has_subcommands() {
            all_commands(sub, &name, out);
        }
    }
}

/// Man pages as paths under a man directory (`man -M DIR swactor` reads them):
/// `man1/swactor.1` first, then one page per visible command (groups too, so every page a
/// page refers to exists), and `man5/swactor-pool.5`, the pool file format.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    // `help` subcommands only repeat `--help`: the pages leave them out.
    fn no_help(cmd: clap::Command) -> clap::Command {
        cmd.disable_help_subcommand(true).mut_subcommands(no_help)
    }
    let root = no_help(Cli::command());
    let mut pages = Vec::new();
    let mut buf = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = clap_mangen::Man::new(root.clone()).render(&mut buf);
    pages.push(("man1/swactor.1".to_string(), buf));
    let mut commands = Vec::new();
    all_commands(&root, "swactor", &mut commands);
    for (full, sub) in commands {
        let dashed = full.replace(' ', "-");
        let cmd = sub.name(dashed.clone()).bin_name(full).version(env!("CARGO_PKG_VERSION"));
        let mut buf = Vec::new();
        let _ = clap_mangen::Man::new(cmd).render(&mut buf);
        pages.push((format!("man1/{dashed}.1"), buf));
    }
    pages.push(("man5/swactor-pool.5".to_string(), POOL_FILE_PAGE.as_bytes().to_vec()));
    pages
}

/// The pool file format (written by hand: clap knows only the commands).
const POOL_FILE_PAGE: &str = r#".TH swactor-pool 5 "" "swactor" "File formats"
.SH NAME
swactor\-pool \- the pool file: the hosts of a swactor pool and its orchestrator
.SH DESCRIPTION
A TOML file (\fBswactor pool init\fR writes one from the nodes' \fBnode_available\fR
lines) read by \fBswactor run plan\fR, \fBswactor orchestrate pool\fR and
\fBswactor pool watch\fR. It names the orchestrator and every node; SWIM membership
accepts exactly the (node id, endpoint id) pairs it names. It is checked before anything
starts: duplicate node ids, malformed endpoint ids, a placement naming unknown nodes or
ranges that do not tile the model are typed errors.
.SH "[orchestrator]"
.TP
\fBnode_id\fR (integer, required)
The orchestrator's node id in SWIM; distinct from every node's, and not 0.
.TP
\fBendpoint_id\fR (string, optional)
The orchestrator's endpoint id (64 hex digits, either case). The running orchestrator
fills in its own.
.TP
\fBaddrs\fR (array of "ip:port", optional)
Where nodes reach the orchestrator; the running orchestrator fills in its own.
.SH "[[nodes]] (one table per node)"
.TP
\fBnode_id\fR (integer, required)
The node id the node was booted with (\fBswactor node boot \-\-node\-id\fR); not 0.
.TP
\fBendpoint_id\fR (string, required)
The node's iroh endpoint id: the public half of its key (\fBswactor node id \-\-key FILE\fR
prints it), 64 hex digits, either case.
.TP
\fBaddrs\fR (array of "ip:port", required unless \fBrelay\fR is given)
The node's iroh addresses (what \fBnode_available\fR printed): where other hosts
reach it, never an unspecified address (\fB0.0.0.0\fR, \fB::\fR) or port 0.
.TP
\fBrelay\fR (string, optional)
The iroh relay the node can be reached through (\fBnode boot \-\-relay URL\fR;
\fBhttp://\fR or \fBhttps://\fR with a host), beside or instead of \fBaddrs\fR: a node
behind NAT, or one booted with \fB\-\-relay\-only\fR.
.TP
\fBmemory_bytes\fR (integer, optional)
Memory the node can give a stage; weights the split and bounds the planner's memory
prediction (a plan that does not fit is rejected with \fBexceeds_node_memory\fR).
Absent: what the node reports in \fBnode_available\fR (\fBnode boot \-\-memory\-bytes\fR,
else the host's available memory), taken by \fBorchestrate pool\fR; \fBrun plan\fR
needs it written. \fBpool init\fR leaves it out for a node that reported none.
.TP
\fBarena_bytes\fR (integer, optional)
The node's arena capacity (absent: what the node reports). A stage whose rings do not
fit is rejected with \fBexceeds_node_arena\fR, naming the \fB\-\-arena\-bytes\fR to boot
with.
.TP
\fBdevice\fR (string, optional)
Where the node computes: \fBcpu\fR or \fBcuda:N\fR, as its \fBnode_available\fR
reports it (\fBnode boot --device\fR). When given, \fBorchestrate pool\fR checks it
against the node's report and refuses the plan on a mismatch (\fBdevice_mismatch\fR).
.TP
\fBrtt_us\fR (integer, optional)
The round trip between the orchestrator and the node, microseconds, to plan for a known
link (\fBorchestrate pool\fR measures it and uses its measurement instead).
.TP
\fBlinks\fR (array of tables, optional)
Round trips the node measured to other nodes and to the orchestrator:
\fBto\fR (node id), \fBrtt_us\fR. A hop not listed is estimated from both ends'
\fBrtt_us\fR.
.TP
\fB[nodes.speed]\fR (table, optional)
What the node measured of its host at boot (\fBpool init\fR writes it from
\fBnode_available\fR): \fBthreads\fR, \fBisa\fR, \fBread_mbs\fR (memory read
bandwidth, MB/s) and \fBformats\fR (per weight format, \fBdecode_mmacs\fR and
\fBprefill_mmacs\fR, million multiply-adds per second). With every stage node's speed the
planner balances the stages' decode steps and predicts the plan's speed; without, it balances
memory and predicts none.
.SH "[placement] (optional)"
.TP
\fBnodes\fR (array of node ids)
The nodes to place stages on, in pipeline order.
.TP
\fBlayers\fR (array of "start..end")
Explicit contiguous block ranges, one per stage.
.SH EXAMPLE
.nf
[orchestrator]
node_id = 100

[[nodes]]
node_id = 1
endpoint_id = "6a1f...e3"
addrs = ["10.0.0.11:7000"]
memory_bytes = 8589934592

[[nodes]]
node_id = 2
endpoint_id = "9c04...7b"
addrs = ["10.0.0.12:7000"]
memory_bytes = 8589934592
.fi
.SH "SEE ALSO"
swactor\-run\-plan(1), swactor\-orchestrate\-pool(1), swactor\-pool\-watch(1),
swactor\-node\-boot(1)
"#;

/// The whole CLI reference as Markdown: every visible command's full help.
pub fn markdown_help() -> String {
    let mut root = Cli::command().bin_name("swactor");
    root.build();
    let mut md = String::from(
        "# swactor command-line reference\n\nGenerated from the command definitions by the hidden `util markdown-help` command; do not edit by hand.\n",
    );
    fn walk(cmd: &mut clap::Command, name: &str, md: &mut String) {
        let help = cmd.render_long_help().to_string();
        md.push_str(&format!("\n## `{name}`\n\n```text\n{}\n```\n", help.trim_end()));
        let subs: Vec<String> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect();
        for sub in subs {
            if let Some(s) = cmd.find_subcommand_mut(&sub) {
                walk(s, &format!("{name} {sub}"), md);
            }
        }
    }
    walk(&mut root, "swactor", &mut md);
    md
}

/// The pattern byte at stream position `i` written by `util ring-produce`.
pub fn ring_pattern(i: u64) -> u8 {
    (i.wrapping_mul(7).wrapping_add(3) & 0xff) as u8
}

fn ring_produce(
    layout: &str,
    bytes: u64,
    uncommitted: u64,
    out: &mut Output,
) -> Result<(), CliError> {
    use crate::ring::{MappedRing, Producer};
    let input = |e: String| CliError::new(ExitCode::Input, "invalid_input", eyre!(e));
    let layout: crate::wire::RingLayout =
        serde_json::from_str(layout).map_err(|e| input(e.to_string()))?;
    let arena =
        std::sync::Arc::new(crate::arena::Arena::from_env().map_err(|e| input(e.to_string()))?);
    let region = arena.region(&layout).map_err(|e| input(e.to_string()))?;
    let ring = MappedRing::attach(region, &layout).map_err(|e| input(format!("attach: {e}")))?;
    let mut producer = Producer::attach(ring);
    let mut chunk = vec![0u8; 4096];
    let mut written = 0u64;
    while written < bytes {
        let n = chunk.len().min((bytes - written) as usize);
        for (k, b) in chunk[..n].iter_mut().enumerate() {
            *b = ring_pattern(written + k as u64);
        }
        let mut off = 0;
        while off < n {
            let w = producer.write(&chunk[off..n]).map_err(|e| input(e.to_string()))?;
            if w == 0 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            off += w;
            producer.commit();
        }
        written += n as u64;
    }
    let garbage = vec![0xEEu8; uncommitted as usize];
    let mut off = 0;
    while off < garbage.len() {
        let w = producer.write(&garbage[off..]).map_err(|e| input(e.to_string()))?;
        if w == 0 {
            break;
        }
        off += w;
    }
    out.line("stalled")?;
    out.flush()?;
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
