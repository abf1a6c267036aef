//! How a run ends: its summary (stderr, or a `run` line with `--json`) and its exit code.

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::config::run::PrintConfig;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use crate::events::RunOutcome;
use crate::orchestrator::driver::RunReport;
use crate::wire::RunId;
use crate::wire::reason::RequestEnd;

#[derive(Serialize)]
struct Summary {
    run_id: RunId,
    outcome: RunOutcome,
    /// Why a completed run stopped, named as `generate` names it.
    stop: Option<crate::events::CompletionCause>,
    reason: Option<String>,
    component: Option<String>,
    stages: usize,
    /// Blocks of each stage, in stage order.
    blocks: Vec<u32>,
    prompt_tokens: usize,
    tokens: usize,
    pool_ready_ms: f64,
    time_to_first_token_ms: Option<f64>,
    /// From the moment the pipeline could serve the prompt to its first token (what the
    /// plan's prediction is compared with; `time_to_first_token_ms` also counts the wait
    /// for the pool, provisioning and loading).
    #[serde(skip_serializing_if = "Option::is_none")]
    request_ttft_ms: Option<f64>,
    decode_tokens_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    speculation: Option<SpecSummary>,
    /// What the plan predicted, beside what was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    predicted: Option<Predicted>,
}

/// The plan's predicted figures for a run (`specs/cost-model.md`).
#[derive(Serialize)]
struct Predicted {
    /// Decode tokens/s: of one sequence for a prompt, of every slot for a batch job.
    decode_tokens_per_s: f64,
    /// Time to first token for the run's prompt (a prompt run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    time_to_first_token_ms: Option<f64>,
}

impl Predicted {
    /// A prompt run's prediction, if the plan has one: with speculation, priced at the
    /// run's own draft lengths and acceptance (what the plan cannot know).
    fn prompt(report: &RunReport) -> Option<Predicted> {
        let s = report.plan.speed.as_ref()?;
        let c = report.spec;
        let tokens = report.tokens.len() as u64;
        let speculative = (c.drafts > 0)
            .then(|| s.speculative_tok_s(tokens, c.drafts, c.draft_tokens, c.accepted_tokens))
            .flatten();
        Some(Predicted {
            decode_tokens_per_s: speculative.unwrap_or(s.pipeline.decode_tok_s),
            time_to_first_token_ms: Some(s.pipeline.ttft_ms),
        })
    }

    /// A batch job's prediction, if the plan has one.
    fn batch(plan: &crate::wire::RunPlan) -> Option<Predicted> {
        plan.speed.as_ref().map(|s| Predicted {
            decode_tokens_per_s: s.pipeline.decode_tok_s_concurrent,
            time_to_first_token_ms: None,
        })
    }

    /// The words after a text summary.
    fn words(p: Option<&Predicted>) -> String {
        match p {
            None => String::new(),
            Some(Predicted { decode_tokens_per_s, time_to_first_token_ms: Some(ms) }) => {
                format!(
                    " (predicted: first token {ms:.0} ms, decode {decode_tokens_per_s:.1} tokens/s)"
                )
            }
            Some(p) => format!(" (predicted {:.1} tokens/s)", p.decode_tokens_per_s),
        }
    }
}

/// Speculation's counters, named as llama.cpp's and vLLM's, and the acceptance (the
/// `speculation` block of a `run` or `generation` summary).
#[derive(Serialize)]
pub(crate) struct SpecSummary {
    swactor_spec_decode_num_drafts_total: u64,
    swactor_spec_decode_num_draft_tokens_total: u64,
    swactor_spec_decode_num_accepted_tokens_total: u64,
    /// Accepted over drafted tokens.
    acceptance: f64,
    /// Tokens generated per pass through the model, prefill excluded (`generate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_per_pass: Option<f64>,
}

impl SpecSummary {
    /// The block for `c`, with `tokens_per_pass` where it is known.
    pub(crate) fn of(
        c: crate::orchestrator::scheduler::SpecCounters,
        tokens_per_pass: Option<f64>,
    ) -> SpecSummary {
        SpecSummary {
            swactor_spec_decode_num_drafts_total: c.drafts,
            swactor_spec_decode_num_draft_tokens_total: c.draft_tokens,
            swactor_spec_decode_num_accepted_tokens_total: c.accepted_tokens,
            acceptance: c.accepted_tokens as f64 / c.draft_tokens.max(1) as f64,
            tokens_per_pass,
        }
    }
}

fn spec_summary(c: crate::orchestrator::scheduler::SpecCounters) -> Option<SpecSummary> {
    (c.drafts > 0).then(|| SpecSummary::of(c, None))
}

#[derive(Serialize)]
struct BatchSummary {
    run_id: RunId,
    outcome: RunOutcome,
    reason: Option<String>,
    stages: usize,
    requests: usize,
    failed: usize,
    completion_tokens: u64,
    pool_ready_ms: f64,
    decode_tokens_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    speculation: Option<SpecSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    predicted: Option<Predicted>,
}

/// A batch job's summary (stderr, or a `run` line with `--json`) and exit code: the
/// session's outcome decides it; requests that failed alone are in their lines.
pub fn finish_batch(
    report: RunReport,
    bad_lines: usize,
    print: PrintConfig,
    out: &mut Output,
) -> Result<(), CliError> {
    let tokens: u64 = report.results.iter().map(|r| u64::from(r.completion_tokens)).sum();
    let decode = report.decode_time.as_secs_f64();
    let summary = BatchSummary {
        run_id: report.plan.run_id,
        outcome: report.outcome,
        reason: report.fault.map(|f| f.reason.to_string()),
        stages: report.plan.stages.len(),
        requests: report.results.len() + bad_lines,
        failed: report.results.iter().filter(|r| r.is_error()).count() + bad_lines,
        completion_tokens: tokens,
        pool_ready_ms: report.pool_ready_after.as_secs_f64() * 1e3,
        decode_tokens_per_s: if decode > 0.0 { tokens as f64 / decode } else { 0.0 },
        speculation: spec_summary(report.spec),
        predicted: Predicted::batch(&report.plan),
    };
    if print.json {
        out.json("run", &summary)?;
        out.flush()?;
    } else {
        eprintln!(
            "{}: {} requests ({} failed) on {} stages, {} tokens generated, {:.1} tokens/s{}",
            outcome_words(&report),
            summary.requests,
            summary.failed,
            summary.stages,
            summary.completion_tokens,
            summary.decode_tokens_per_s,
            Predicted::words(summary.predicted.as_ref())
        );
        // The summary said how it ended: no `Error:` block repeats it.
        return finish_outcome(&report).map_err(CliError::already_told);
    }
    finish_outcome(&report)
}

/// How a run ended, in the words of its text summary (a fault with its component).
fn outcome_words(report: &RunReport) -> String {
    match (report.outcome, report.fault) {
        (RunOutcome::Completed, _) => "completed".into(),
        (RunOutcome::Faulted, Some(f)) => format!("faulted ({f})"),
        (RunOutcome::Faulted, None) => "faulted".into(),
        (RunOutcome::OperatorStopped, _) => "stopped by the operator".into(),
    }
}

/// A prompt run's summary (stderr after the text, or a `run` line with `--json`) and exit
/// code.
pub fn finish(
    report: RunReport,
    prompt_tokens: usize,
    print: PrintConfig,
    out: &mut Output,
) -> Result<(), CliError> {
    let decode = report.decode_time.as_secs_f64();
    let summary = Summary {
        run_id: report.plan.run_id,
        outcome: report.outcome,
        stop: report.stop,
        reason: report.fault.map(|f| f.reason.to_string()),
        component: report.fault.map(|f| f.component.to_string()),
        stages: report.plan.stages.len(),
        blocks: report.plan.stages.iter().map(|s| s.layers.end - s.layers.start).collect(),
        prompt_tokens,
        tokens: report.tokens.len(),
        pool_ready_ms: report.pool_ready_after.as_secs_f64() * 1e3,
        time_to_first_token_ms: report.first_token_after.map(|d| d.as_secs_f64() * 1e3),
        request_ttft_ms: report.results.first().and_then(|r| r.ttft_ms),
        decode_tokens_per_s: if report.tokens.len() > 1 && decode > 0.0 {
            (report.tokens.len() - 1) as f64 / decode
        } else {
            0.0
        },
        speculation: spec_summary(report.spec),
        predicted: Predicted::prompt(&report),
    };
    if print.json {
        out.json("run", &summary)?;
    } else {
        out.write_str(&report.tail)?;
        out.line("")?;
        out.flush()?;
        let outcome = match (summary.outcome, &summary.stop) {
            (RunOutcome::Completed, Some(stop)) => {
                format!("completed ({})", super::output::stop_words(stop))
            }
            _ => outcome_words(&report),
        };
        let first = match (summary.time_to_first_token_ms, summary.request_ttft_ms) {
            (Some(ms), Some(request)) => {
                format!("first token after {ms:.0} ms ({request:.0} ms from the prompt)")
            }
            (Some(ms), None) => format!("first token after {ms:.0} ms"),
            (None, _) => "no token".into(),
        };
        eprintln!(
            "{outcome}: {} stages, {} prompt tokens, {} generated; {first}, decode {:.1} tokens/s{}",
            summary.stages,
            summary.prompt_tokens,
            summary.tokens,
            summary.decode_tokens_per_s,
            Predicted::words(summary.predicted.as_ref())
        );
        // The summary said how it ended: no `Error:` block repeats it.
        return finish_outcome(&report).map_err(CliError::already_told);
    }
    finish_outcome(&report)
}

/// The exit of a run: success, 7 for a fault, 9 for an operator stop.
fn finish_outcome(report: &RunReport) -> Result<(), CliError> {
    match report.outcome {
        RunOutcome::Completed => Ok(()),
        RunOutcome::Faulted => {
            let reason = report.fault.map_or_else(|| "unknown".into(), |f| f.reason.to_string());
            let what = report.fault.map_or_else(|| "unknown".into(), |f| f.to_string());
            Err(CliError::new(ExitCode::RunFaulted, reason, eyre!("the run faulted: {what}")))
        }
        RunOutcome::OperatorStopped => Err(CliError::new(
            ExitCode::Stopped,
            RequestEnd::OperatorStopped.as_str(),
            eyre!("the run was stopped by the operator and torn down"),
        )),
    }
}
