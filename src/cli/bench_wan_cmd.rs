//! `swactor bench wan`: a pipeline over wide-area links and a relay, predicted beside
//! measured.

use super::args::BenchWanArgs;
use super::bench_cmd::{exe, failed, print_cpu};
use super::exit::CliError;
use super::output::{Output, table};
use crate::bench;

/// `swactor bench wan`.
pub fn wan(args: &BenchWanArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    print_cpu(args.output.json, out)?;
    let base = bench::wan::WanSetup {
        exe: exe()?,
        model: args.model.clone(),
        stages: args.stages,
        tokens: args.tokens,
        prompt: args.prompt.clone(),
        link: bench::wan::Link::Rtt { ms: 0 },
        loss: args.loss,
        rate_mbit: args.rate_mbit,
        speculate: false,
        restart_relay: false,
        scalar_hosts: Vec::new(),
        balance_memory: false,
    };
    let figures = bench::wan::wan(&base, &args.links, !args.no_speculate, args.mixed, &dir)
        .map_err(failed)?;
    if args.output.json {
        for f in &figures {
            out.json("bench_wan", f)?;
        }
        return Ok(());
    }
    let ratio = |m: f64, p: Option<f64>| p.map_or("-".into(), |p| format!("{:.2}", m / p));
    let opt = |p: Option<f64>, digits: usize| p.map_or("-".into(), |p| format!("{p:.digits$}"));
    let mut rows = vec![
        [
            "link",
            "link MB/s",
            "nodes",
            "balance",
            "blocks",
            "speculate",
            "decode tok/s",
            "predicted",
            "ratio",
            "ttft ms",
            "predicted",
            "ratio",
            "acceptance",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for f in &figures {
        rows.push(vec![
            f.link.to_string(),
            opt(f.link_mbs, 1),
            if f.scalar_hosts.is_empty() {
                "same".into()
            } else {
                format!("{} scalar", f.scalar_hosts.len())
            },
            f.balance.into(),
            f.blocks.iter().map(ToString::to_string).collect::<Vec<_>>().join("/"),
            if f.speculate { "ngram" } else { "off" }.into(),
            format!("{:.1}", f.decode_tokens_per_s),
            opt(f.predicted_decode_tokens_per_s, 1),
            ratio(f.decode_tokens_per_s, f.predicted_decode_tokens_per_s),
            format!("{:.0}", f.ttft_ms),
            opt(f.predicted_ttft_ms, 0),
            ratio(f.ttft_ms, f.predicted_ttft_ms),
            opt(f.acceptance, 2),
        ]);
    }
    for line in table(&rows) {
        out.line(line)?;
    }
    out.line(
        "(ratio: measured / predicted; with speculation, the prediction prices the run's own \
         drafts and acceptance; link MB/s: what the nodes measured to each other before the \
         plan, - where too fast for the probe to tell)",
    )?;
    Ok(())
}
