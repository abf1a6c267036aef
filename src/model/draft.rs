//! A draft model: a smaller model with the target's vocabulary, run greedily by the
//! engine in this process (`generate`'s, or the orchestrator's on a thread of its own:
//! `orchestrator/driver/drafting.rs`), one KV cache per slot. It implements [`Draft`]:
//! a session asks for every drafting sequence of a micro-batch at once (a
//! [`crate::speculate::DraftRequest`]) and the model steps them together, one row each
//! per drafted token. Each slot remembers the tokens its cache holds; an ask keeps the longest
//! prefix its history shares with them (what the target accepted), so a rejected draft
//! is rolled back, and a new sequence in the slot starts over, without being told.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::generate::LocalPipeline;
use super::gguf::GgufFile;
use super::stage::{ComputeDevice, ModelStage, StageError, StageInput, StageOutput};
use crate::speculate::{Draft, DraftAsk};
use crate::wire::{ActivationDType, LayerRange};

/// Prompt rows fed to the draft model in one pass at most (a long prompt catches up in
/// chunks, bounding the engine's scratch).
const CATCH_UP_ROWS: usize = 512;
/// Cached rows a slot drops by truncation at most; past this it starts over (a
/// sliding-window cache can drop only its spare positions, and a verifying trip never
/// rejects more).
const MAX_DROP: usize = crate::wire::batch::MAX_VERIFY_ROWS as usize;

/// What a draft model is checked and costed against: the target's vocabulary and the
/// weight bytes it reads a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftTarget {
    /// Its vocabulary's size.
    pub vocab_size: u32,
    /// Its vocabulary's digest ([`crate::model::ModelFacts::vocab_digest`]).
    pub vocab_digest: Option<String>,
    /// Weight bytes it reads a decode step ([`crate::model::ModelBytes::step_bytes`]).
    pub step_bytes: u64,
}

impl DraftTarget {
    /// The target `facts` describe.
    pub fn of(facts: &crate::model::ModelFacts) -> DraftTarget {
        DraftTarget {
            vocab_size: facts.vocab_size,
            vocab_digest: facts.vocab_digest.clone(),
            step_bytes: facts.bytes.step_bytes(),
        }
    }
}

/// A draft model. See the module docs.
#[derive(Debug)]
pub struct DraftModel {
    pipeline: LocalPipeline,
    /// Per slot: the tokens whose rows its cache holds.
    cached: Vec<Vec<u32>>,
    max_seq: usize,
    cost: f64,
    /// Why it stopped drafting, after a compute error.
    failed: Option<String>,
    /// Measured seconds per drafted token (a moving average), catching up included.
    per_token_s: Option<f64>,
}

/// A draft model's vocabulary must be the target's: the same size and the same tokens.
fn check_vocab(facts: &crate::model::ModelFacts, target: &DraftTarget) -> Result<(), StageError> {
    let target_vocab = target.vocab_size;
    if facts.vocab_size != target_vocab {
        return Err(StageError::BadInput(format!(
            "the draft model has {} tokens, the model {target_vocab}: they must share a \
                 vocabulary",
            facts.vocab_size
        )));
    }
    if facts.vocab_digest != target.vocab_digest {
        return Err(StageError::BadInput(format!(
            "the draft model's {target_vocab} tokens are not the model's (their vocabulary \
                 digests differ): they must share a vocabulary"
        )));
    }
    Ok(())
}

impl DraftModel {
    /// Checks from its header alone that `path` can draft for `target`: a GGUF model
    /// with the same vocabulary (another size, or other tokens, is refused). Returns its
    /// facts. [`DraftModel::load`] checks the same first.
    pub fn check(
        path: &Path,
        target: &DraftTarget,
    ) -> Result<crate::model::ModelFacts, StageError> {
        let bad = |e| StageError::BadInput(format!("the draft model: {e}"));
        let file = GgufFile::open(path).map_err(bad)?;
        let facts = file.facts().map_err(bad)?;
        check_vocab(&facts, target)?;
        Ok(facts)
    }

    /// Loads `path` as a draft for `target`, computing on `threads` threads; a different
    /// vocabulary (another size, or other tokens) is refused.
    pub fn load(
        path: &Path,
        max_seq_len: u32,
        threads: u32,
        target: &DraftTarget,
    ) -> Result<DraftModel, StageError> {
        let bad = |e| StageError::BadInput(format!("the draft model: {e}"));
        let file = GgufFile::open(path).map_err(bad)?;
        let facts = file.facts().map_err(bad)?;
        check_vocab(&facts, target)?;
        let target_bytes = target.step_bytes;
        let pipeline = LocalPipeline::load(
            &file,
            &[LayerRange::new(0, facts.block_count)],
            max_seq_len,
            Default::default(),
            ActivationDType::F32,
            ComputeDevice::Cpu,
            threads,
        )?;
        let cost = facts.bytes.step_bytes() as f64 / target_bytes.max(1) as f64;
        Ok(DraftModel {
            pipeline,
            cached: Vec::new(),
            max_seq: max_seq_len as usize,
            cost,
            failed: None,
            per_token_s: None,
        })
    }

    /// Why it stopped drafting (a compute error), if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// A compute error: it drafts no more (whatever its caches hold is unknown now).
    fn fail(&mut self, e: StageError) {
        eprintln!("swactor: the draft model failed and drafts no more: {e}");
        self.cached.clear();
        self.failed = Some(e.to_string());
    }

    fn stage(&mut self) -> &mut ModelStage {
        &mut self.pipeline.stages_mut()[0]
    }

    /// Trims `slot`'s cache to the longest prefix it shares with `history` but its last
    /// token (starting over past [`MAX_DROP`] dropped rows); returns the rows kept.
    fn trim(&mut self, slot: usize, history: &[u32]) -> Result<usize, StageError> {
        if slot >= self.cached.len() {
            self.cached.resize_with(slot + 1, Vec::new);
            self.stage().set_slots(slot + 1)?;
        }
        let want = history.len() - 1;
        let held = &self.cached[slot];
        let mut keep = held.iter().zip(&history[..want]).take_while(|(a, b)| a == b).count();
        if held.len() - keep > MAX_DROP {
            keep = 0;
        }
        if keep == 0 {
            self.stage().reset_slot(slot);
        } else {
            self.stage().truncate_slot(slot, keep)?;
        }
        self.cached[slot].truncate(keep);
        Ok(keep)
    }

    /// Feeds `tokens` to `slot`'s cache in chunks (their logits unused).
    fn feed(&mut self, slot: usize, tokens: &[u32]) -> Result<(), StageError> {
        let no = AtomicBool::new(false);
        for chunk in tokens.chunks(CATCH_UP_ROWS) {
            self.stage().forward_rows(&vec![slot; chunk.len()], StageInput::Tokens(chunk), &no)?;
            self.cached[slot].extend_from_slice(chunk);
        }
        Ok(())
    }

    fn run(&mut self, asks: &[DraftAsk]) -> Result<Vec<Vec<u32>>, StageError> {
        let mut out = vec![Vec::new(); asks.len()];
        // Each slot once, with room in the context for what it feeds. What its cache
        // lacks of the history rides in the first step with the last token (one pass
        // for every slot); only a long gap is fed ahead, in chunks.
        let mut active: Vec<usize> = Vec::new();
        let mut first: Vec<&[u32]> = Vec::new();
        for (i, a) in asks.iter().enumerate() {
            let fits = a.history.len() + a.k <= self.max_seq + 1;
            let fresh = !active.iter().any(|&j| asks[j].slot == a.slot);
            if a.k > 0 && !a.history.is_empty() && fits && fresh {
                let slot = usize::from(a.slot);
                let keep = self.trim(slot, &a.history)?;
                let ahead = (a.history.len() - keep).saturating_sub(CATCH_UP_ROWS);
                self.feed(slot, &a.history[keep..keep + ahead])?;
                active.push(i);
                first.push(&a.history[keep + ahead..]);
            }
        }
        let mut rows: Vec<u32> = first.concat();
        let mut slots: Vec<usize> = (active.iter().zip(&first))
            .flat_map(|(&i, f)| std::iter::repeat_n(usize::from(asks[i].slot), f.len()))
            .collect();
        let no = AtomicBool::new(false);
        while !active.is_empty() {
            let logits = match self.stage().forward_rows(&slots, StageInput::Tokens(&rows), &no)? {
                StageOutput::Logits(l) => l,
                StageOutput::Hidden(_) => {
                    return Err(StageError::BadInput("the draft model produced no logits".into()));
                }
            };
            let vocab = logits.len() / active.len().max(1);
            let mut at = 0;
            let mut still = Vec::new();
            let mut feed = Vec::new();
            for (row, &i) in active.iter().enumerate() {
                let slot = usize::from(asks[i].slot);
                let n = slots[at..].iter().take_while(|&&s| s == slot).count();
                self.cached[slot].extend_from_slice(&rows[at..at + n]);
                at += n;
                let t = crate::model::sampling::argmax(&logits[row * vocab..(row + 1) * vocab]);
                out[i].push(t);
                if out[i].len() < asks[i].k {
                    still.push(i);
                    feed.push(t);
                }
            }
            slots = still.iter().map(|&i| usize::from(asks[i].slot)).collect();
            (active, rows) = (still, feed);
        }
        Ok(out)
    }
}

impl Draft for DraftModel {
    fn draft(&mut self, asks: &[DraftAsk]) -> Vec<Vec<u32>> {
        if self.failed.is_none() {
            match timed(|| self.run(asks)) {
                (Ok(drafts), seconds) => {
                    let n = drafts.iter().map(Vec::len).sum::<usize>();
                    if n > 0 {
                        let per = seconds / n as f64;
                        self.per_token_s =
                            Some(self.per_token_s.map_or(per, |o| o + 0.25 * (per - o)));
                    }
                    return drafts;
                }
                (Err(e), _) => self.fail(e),
            }
        }
        vec![Vec::new(); asks.len()]
    }

    fn seconds_per_token(&self) -> Option<f64> {
        self.per_token_s
    }

    fn step_cost(&self) -> f64 {
        self.cost
    }

    fn warm(&mut self, slot: u16, history: &[u32]) {
        let fits = !history.is_empty() && history.len() <= self.max_seq;
        if self.failed.is_none() && fits {
            let slot = usize::from(slot);
            let caught_up = self
                .trim(slot, history)
                .and_then(|keep| self.feed(slot, &history[keep..history.len() - 1]));
            if let Err(e) = caught_up {
                self.fail(e);
            }
        }
    }
}

/// Runs `f`, returning its result and the seconds it took.
#[allow(clippy::disallowed_methods)] // the draft model's driver measures its own cost
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t0 = std::time::Instant::now();
    let out = f();
    (out, t0.elapsed().as_secs_f64())
}

/// The drafter `--speculate ngram` or `--draft-model FILE` asks for, drafting for a
/// target with `target`'s facts: `None` where neither drafts.
pub fn load_drafter(
    ngram: bool,
    model: Option<&Path>,
    (max_seq_len, threads): (u32, u32),
    target: &crate::model::ModelFacts,
) -> Result<Option<Box<dyn Draft>>, StageError> {
    Ok(match model {
        Some(path) => {
            let target = DraftTarget::of(target);
            Some(Box::new(DraftModel::load(path, max_seq_len, threads, &target)?))
        }
        None if ngram => Some(Box::new(crate::speculate::ngram::NgramDrafter::default())),
        None => None,
    })
}
