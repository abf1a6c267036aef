//! Run progress: which spinner or bar each phase shows (hidden bars, no terminal).

use super::*;
use crate::wire::{EdgeId, LayerRange, NodeId, ObjectId, RunId, StageIndex};

#[test]
fn progress_is_drawn_only_on_a_terminal_and_never_with_json() {
    assert!(shown(false, true));
    assert!(!shown(true, true), "never with --json");
    assert!(!shown(false, false), "never when stderr is not a terminal");
    assert!(!shown(true, false));
}

#[test]
fn a_run_shows_the_pool_then_a_weights_bar_then_the_prefill_then_nothing() {
    let (run_id, stage_index) = (RunId(1), StageIndex(0));
    let mut p = RunProgress::new(Progress::with(false));
    assert_eq!(p.phase(), RunPhase::Pool);
    p.message("node 2 available");
    assert_eq!(p.shown().0, "node 2 available");

    p.event(&Event::RunPlanned { run_id, stages: 3, edges: 4, context: None });
    assert_eq!(p.phase(), RunPhase::Weights);
    assert_eq!(p.shown().1, (0, Some(3)), "one step per stage");
    p.event(&Event::WeightsDownloadStarted {
        run_id,
        node_id: NodeId(2),
        stage_index,
        bytes: 3 << 20,
    });
    assert_eq!(p.shown().0, "node 2 downloads 3.0 MiB of weights");
    p.event(&Event::WeightsDownloading {
        run_id,
        node_id: NodeId(2),
        stage_index,
        bytes: 1 << 20,
        total: 4 << 20,
    });
    assert_eq!(p.shown().0, "node 2 downloads weights: 1.0 MiB of 4.0 MiB (25%)");
    for n in 1..=3 {
        let layers = LayerRange::new(0, 1);
        p.event(&Event::WeightsLoaded {
            run_id,
            node_id: NodeId(n),
            stage_index,
            layers,
            bytes: 1,
            kept_caches: false,
        });
    }
    assert_eq!(p.shown().1, (3, Some(3)));

    let edge_id = EdgeId(1);
    let (object_id, sequence) = (ObjectId(1), Sequence(0));
    p.event(&Event::PromptInjected { run_id, edge_id, object_id, sequence, tokens: 12 });
    assert_eq!(p.phase(), RunPhase::Prefill);
    assert_eq!(p.shown().0, "prefill of 12 prompt tokens");
    p.token();
    assert_eq!(p.phase(), RunPhase::Done);
    // A later injection (decode) or message draws nothing again.
    p.event(&Event::PromptInjected {
        run_id,
        edge_id,
        object_id,
        sequence: Sequence(1),
        tokens: 1,
    });
    p.message("late");
    assert_eq!(p.phase(), RunPhase::Done);
    assert_eq!(p.shown().0, "");
}

#[test]
fn a_run_that_ends_before_its_first_token_clears_its_progress() {
    let mut p = RunProgress::new(Progress::with(false));
    p.event(&Event::RunPlanned { run_id: RunId(1), stages: 2, edges: 3, context: None });
    p.event(&Event::RunStopped {
        run_id: RunId(1),
        reason: crate::wire::reason::OperatorStop::Interrupt.into(),
    });
    assert_eq!(p.phase(), RunPhase::Done);
}
