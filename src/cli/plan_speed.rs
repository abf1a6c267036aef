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
    format!(
        "decode {:.1} tokens/s (1 sequence), {:.1} tokens/s ({} at once); first token {:.0} ms for \
         {} prompt tokens",
        l.decode_tok_s, l.decode_tok_s_concurrent, s.concurrent, l.ttft_ms, s.prompt_tokens
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
        "some link round trips assumed (not measured)"
    } else {
        "link round trips measured"
    };
    let mut lines = vec![format!("predicted speed ({by}; {links}):")];
    let mut rows = vec![vec![
        "stage".into(),
        "node".into(),
        "decode step".into(),
        format!(
            "step x{}",
            s.concurrent.div_ceil((s.stages.len() as u32).min(s.concurrent).max(1))
        ),
        format!("prefill {}", s.prompt_tokens),
        "hop".into(),
    ]];
    for (i, st) in s.stages.iter().enumerate() {
        rows.push(vec![
            i.to_string(),
            st.node_id.to_string(),
            ms(st.step_us),
            ms(st.batch_step_us),
            ms(st.prefill_us),
            ms(st.hop_us),
        ]);
    }
    lines.extend(table(&rows));
    lines.push(format!("pipeline: {}", layout_line(&s.pipeline, s)));
    if let Some((node, alone)) = &s.single {
        lines.push(format!("best single node ({node}): {}", layout_line(alone, s)));
    }
    lines.push(s.verdict_words());
    lines
}
