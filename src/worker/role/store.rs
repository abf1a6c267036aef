//! A stage's prompt-cache store and the table's cache operations on it: blocks of this
//! stage's KV (and the rows it logged for them), saved from slots and loaded back; and
//! the keep of a resumed sequence.

use super::log::RowLog;
use crate::model::sampling::Sampler;
use crate::model::stage::ModelStage;
use crate::wire::PromptCachePlan;
use crate::wire::batch::{BatchTable, CacheOpKind};
use crate::wire::cache_ops::resume_hold;
use swactor_engine::transformer::KvBlock;

/// One stored block: the KV of its positions, and the rows this stage logged for them
/// where it had.
#[derive(Debug)]
struct Stored {
    kv: KvBlock,
    rows: Option<Vec<u8>>,
}

/// A stage's prompt-cache store: `blocks` blocks of `block_tokens` positions, allocated
/// as they are first written (so it holds at most the plan's bytes).
#[derive(Debug, Default)]
pub struct Store {
    block_tokens: usize,
    blocks: Vec<Option<Stored>>,
}

impl Store {
    /// The store a plan gives a stage (empty).
    pub fn new(plan: PromptCachePlan) -> Store {
        let blocks = (0..plan.blocks).map(|_| None).collect();
        Store { block_tokens: plan.block_tokens as usize, blocks }
    }

    /// Bytes its blocks hold now.
    pub fn bytes(&self) -> usize {
        let one = |s: &Stored| s.kv.bytes() + s.rows.as_ref().map_or(0, Vec::len);
        self.blocks.iter().flatten().map(one).sum()
    }

    /// Forgets every block (a new run's directory knows none).
    pub fn clear(&mut self) {
        self.blocks.iter_mut().for_each(|b| *b = None);
    }

    /// Runs a table's cache operations in order: saves copy a slot's block out, loads
    /// copy a stored block into the slot at the same positions, keeps cut a resumed slot
    /// to what this stage holds of it.
    pub fn run(
        &mut self,
        stage: &mut ModelStage,
        log: &mut RowLog,
        samplers: &mut [Option<Sampler>],
        table: &BatchTable,
    ) -> Result<(), String> {
        let b = self.block_tokens;
        for op in table.ops() {
            let (slot, start) = (op.slot as usize, op.slot_block as usize * b);
            if op.kind == CacheOpKind::Keep {
                let holds = stage.slot_position(slot) as u32;
                let hold = resume_hold(holds, log.logged(slot), op.slot_block) as usize;
                if hold < holds as usize {
                    stage.truncate_slot(slot, hold).map_err(|e| e.to_string())?;
                }
                log.truncate(slot, hold);
                if let Some(s) = samplers.get_mut(slot) {
                    *s = None;
                }
                continue;
            }
            let at = self
                .blocks
                .get_mut(op.store_block as usize)
                .ok_or_else(|| format!("store block {} does not exist", op.store_block))?;
            match op.kind {
                CacheOpKind::Keep => {}
                CacheOpKind::Save => {
                    // The old block is freed first: the store never holds more than its
                    // blocks.
                    *at = None;
                    let kv = stage.save_block(slot, start, b).map_err(|e| e.to_string())?;
                    let rows = log.rows(slot, start, b).map(<[u8]>::to_vec);
                    *at = Some(Stored { kv, rows });
                }
                CacheOpKind::Load => {
                    let block = at
                        .as_ref()
                        .filter(|s| s.kv.positions() == b)
                        .ok_or_else(|| format!("store block {} is empty", op.store_block))?;
                    stage.load_block(slot, &block.kv).map_err(|e| e.to_string())?;
                    if stage.slot_position(slot) != start + b {
                        return Err(format!(
                            "store block {} is not slot block {}",
                            op.store_block, op.slot_block
                        ));
                    }
                    log.truncate(slot, start);
                    if let Some(rows) = &block.rows {
                        log.record(slot, start, rows);
                    }
                }
            }
        }
        Ok(())
    }
}
