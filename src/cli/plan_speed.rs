//! The speed part of `run plan`'s (and a run's) human output: per stage, the pipeline, the
//! best single node and what splitting does.

use super::output::table;
use crate::wire::{LayoutSpeed, PlacedBy, RunPlan, SpeedPrediction};

/// Milliseconds of `us` microseconds, one decimal.
fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1e3)
}

/// One layout's figures as a sentence.
fn layout_line(l: &LayoutSpeed, s: &SpeedPrediction) -> String {
    let concurrent = if s.concurrent > 1 {
        format!(", {:.1} tokens/s ({} at once)", l.decode_tok_s_concurrent, s.concurrent)
    } else {
        String::new()
    };
    format!(
        "decode {:.1} tokens/s (1 sequence){concurrent}; first token {:.0} ms for {} prompt tokens",
        l.decode_tok_s, l.ttft_ms, s.prompt_tokens
    )
}

/// The predicted speed of `plan`, or why there is none.
pub fn speed_lines(plan: &RunPlan) -> Vec<String> {
    let Some(s) = &plan.speed else {
        return vec![
            "speed: not predicted (a stage node reported no speed: nodes measure it at boot; \
             `pool init` writes it into the pool file)"
                .into(),
        ];
    };
    let by = match s.placed_by {
        PlacedBy::Speed => "ranges balance the stages' measured speed",
        PlacedBy::Memory => "ranges balance memory",
        PlacedBy::Given => "ranges as given",
    };
    let links = if s.links_assumed {
        "some hops estimated, not measured on their own link"
    } else {
        "link round trips measured"
    };
    let mut lines = vec![format!("predicted speed ({by}; {links}):")];
    let batch = s.concurrent.div_ceil((s.stages.len() as u32).min(s.concurrent).max(1));
    let mut header: Vec<String> = vec!["stage".into(), "node".into(), "decode step".into()];
    if batch > 1 {
        header.push(format!("step x{batch}"));
    }
    header.extend([format!("prefill {}", s.prompt_tokens), "hop".into()]);
    let mut rows = vec![header];
    for (i, st) in s.stages.iter().enumerate() {
        let mut row = vec![i.to_string(), st.node_id.to_string(), ms(st.step_us)];
        if batch > 1 {
            row.push(ms(st.batch_step_us));
        }
        row.extend([ms(st.prefill_us), ms(st.hop_us)]);
        rows.push(row);
    }
    lines.extend(table(&rows));
    lines.push(format!("pipeline: {}", layout_line(&s.pipeline, s)));
    if let Some((node, alone)) = &s.single {
        lines.push(format!("best single node ({node}): {}", layout_line(alone, s)));
    }
    lines.push(s.verdict_words());
    lines
}
