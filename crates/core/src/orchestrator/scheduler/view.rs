//! What the scheduler shows of its slots (`/slots`).

use super::{Scheduler, SeqId};

/// One slot as the scheduler sees it (`/slots`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlotView {
    /// The slot.
    pub id: u16,
    /// Whether a sequence holds it.
    pub is_processing: bool,
    /// The sequence holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<SeqId>,
    /// Its prompt's tokens.
    pub n_prompt_tokens: u32,
    /// Prompt tokens computed so far.
    pub n_prompt_tokens_processed: u32,
    /// Tokens generated so far.
    pub n_decoded: u32,
    /// Tokens its caches hold from before: the prompt tokens its sequence found cached,
    /// or, while free, the tokens a request sharing them would not compute again.
    pub n_prompt_tokens_cache: u32,
}

impl Scheduler {
    /// Every slot: free, or the sequence holding it and how far it is.
    pub fn slots(&self) -> Vec<SlotView> {
        let mut slots: Vec<SlotView> = (0..self.cfg.max_sequences)
            .map(|id| SlotView {
                id,
                is_processing: false,
                sequence: None,
                n_prompt_tokens: 0,
                n_prompt_tokens_processed: 0,
                n_decoded: 0,
                n_prompt_tokens_cache: self.warm.held(id),
            })
            .collect();
        for (id, seq) in &self.live {
            if let Some(v) = slots.get_mut(usize::from(seq.slot)) {
                v.is_processing = true;
                v.sequence = Some(*id);
                v.n_prompt_tokens = seq.prompt.len() as u32;
                v.n_prompt_tokens_processed = seq.prefilled as u32;
                v.n_decoded = seq.generated.len() as u32;
                v.n_prompt_tokens_cache = seq.cached;
            }
        }
        slots
    }
}
