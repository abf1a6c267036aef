//! The merge loops of both vocabularies, `O(n log n)` in a word's length.
//!
//! Symbols form a doubly linked list over the word; every adjacent pair that could merge
//! waits in a priority queue. The best pair is popped, checked to be still current (its
//! symbols alive, adjacent and unchanged: a merge next to it may have made it stale), and
//! merged; the merged symbol's two new pairs are pushed. Every merge pushes at most two
//! pairs, so a word of `n` symbols costs at most `3n` queue operations (llama.cpp's
//! `llm_tokenizer_bpe` and the `tokenizers` crate work the same way). The order of merges
//! is the quadratic loop's: best pair first, the leftmost of equal pairs first.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

/// No neighbour.
const NONE: usize = usize::MAX;

/// The merges of a BPE vocabulary: a pair of tokens to its rank and the merged token.
pub(super) type MergeTable = HashMap<(u32, u32), (usize, u32)>;

/// One symbol of a BPE word: its token (`None` for a character the vocabulary lacks,
/// which no merge names) and its neighbours.
#[derive(Clone, Copy)]
struct BpeSymbol {
    id: Option<u32>,
    prev: usize,
    next: usize,
}

/// Merges the symbols of one BPE word, lowest rank first, leftmost on ties. Returns the
/// symbols left, in order. `work` counts queue operations (pushes and pops).
pub(super) fn merge_bpe(
    initial: &[Option<u32>],
    merges: &MergeTable,
    work: &mut u64,
) -> Vec<Option<u32>> {
    let n = initial.len();
    let mut symbols: Vec<BpeSymbol> = initial
        .iter()
        .enumerate()
        .map(|(i, &id)| BpeSymbol {
            id,
            prev: if i == 0 { NONE } else { i - 1 },
            next: if i + 1 == n { NONE } else { i + 1 },
        })
        .collect();
    // Ordered by rank, then by the left symbol's position: the leftmost on ties.
    let mut queue: BinaryHeap<Reverse<(usize, usize, u32, u32)>> = BinaryHeap::new();
    let push = |queue: &mut BinaryHeap<_>, symbols: &[BpeSymbol], left: usize, work: &mut u64| {
        let Some(&BpeSymbol { id: Some(a), next, .. }) = symbols.get(left) else { return };
        let Some(&BpeSymbol { id: Some(b), .. }) = symbols.get(next) else { return };
        if let Some(&(rank, _)) = merges.get(&(a, b)) {
            queue.push(Reverse((rank, left, a, b)));
            *work += 1;
        }
    };
    for left in 0..n.saturating_sub(1) {
        push(&mut queue, &symbols, left, work);
    }
    while let Some(Reverse((_, left, a, b))) = queue.pop() {
        *work += 1;
        let right = symbols[left].next;
        // Stale: the left symbol was merged away or grew, or the right one changed.
        if symbols[left].id != Some(a) || right == NONE || symbols[right].id != Some(b) {
            continue;
        }
        let Some(&(_, merged)) = merges.get(&(a, b)) else { continue };
        let after = symbols[right].next;
        symbols[left].id = Some(merged);
        symbols[left].next = after;
        symbols[right].id = None;
        symbols[right].prev = NONE;
        symbols[right].next = NONE;
        if after != NONE {
            symbols[after].prev = left;
        }
        let before = symbols[left].prev;
        if before != NONE {
            push(&mut queue, &symbols, before, work);
        }
        push(&mut queue, &symbols, left, work);
    }
    let mut out = Vec::new();
    let mut at = if n == 0 { NONE } else { 0 };
    while at != NONE {
        out.push(symbols[at].id);
        at = symbols[at].next;
    }
    out
}

/// One symbol of a SentencePiece text: a byte range of the text, and its neighbours.
#[derive(Clone, Copy)]
struct SpmSymbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

/// A candidate SentencePiece merge: the pair starting at symbol `left`, whose joined
/// text (`len` bytes) is a token of this score.
struct SpmPair {
    score: f32,
    left: usize,
    len: usize,
}

impl Ord for SpmPair {
    /// Higher scores first, then the leftmost pair (scores are never NaN).
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for SpmPair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SpmPair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SpmPair {}

/// Merges the characters of `text`: the adjacent pair whose joined text is the
/// highest-scoring token first (leftmost on ties), until no joined pair is a token.
/// Returns the byte ranges of the symbols left, in order. `score` gives a text's score
/// when it is a token; `work` counts queue operations.
pub(super) fn merge_spm(
    text: &str,
    score: &dyn Fn(&str) -> Option<f32>,
    work: &mut u64,
) -> Vec<(usize, usize)> {
    let mut symbols: Vec<SpmSymbol> = text
        .char_indices()
        .map(|(start, c)| SpmSymbol { start, len: c.len_utf8(), prev: NONE, next: NONE })
        .collect();
    let n = symbols.len();
    for (i, s) in symbols.iter_mut().enumerate() {
        s.prev = if i == 0 { NONE } else { i - 1 };
        s.next = if i + 1 == n { NONE } else { i + 1 };
    }
    let mut queue: BinaryHeap<SpmPair> = BinaryHeap::new();
    let push =
        |queue: &mut BinaryHeap<SpmPair>, symbols: &[SpmSymbol], left: usize, work: &mut u64| {
            let Some(l) = symbols.get(left) else { return };
            let Some(r) = symbols.get(l.next) else { return };
            let len = l.len + r.len;
            if let Some(s) = text.get(l.start..l.start + len).and_then(score) {
                queue.push(SpmPair { score: s, left, len });
                *work += 1;
            }
        };
    for left in 0..n.saturating_sub(1) {
        push(&mut queue, &symbols, left, work);
    }
    while let Some(SpmPair { left, len, .. }) = queue.pop() {
        *work += 1;
        let right = symbols[left].next;
        // Stale: either symbol merged away or grew since the pair was queued.
        if symbols[left].len == 0 || right == NONE || symbols[left].len + symbols[right].len != len
        {
            continue;
        }
        let after = symbols[right].next;
        symbols[left].len = len;
        symbols[left].next = after;
        symbols[right] = SpmSymbol { start: symbols[right].start, len: 0, prev: NONE, next: NONE };
        if after != NONE {
            symbols[after].prev = left;
        }
        let before = symbols[left].prev;
        if before != NONE {
            push(&mut queue, &symbols, before, work);
        }
        push(&mut queue, &symbols, left, work);
    }
    let mut out = Vec::new();
    let mut at = if n == 0 { NONE } else { 0 };
    while at != NONE {
        out.push((symbols[at].start, symbols[at].len));
        at = symbols[at].next;
    }
    out
}
