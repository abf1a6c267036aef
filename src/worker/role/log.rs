//! A stage's log of the rows it sent on: each slot's output rows from position 0, so that
//! a sequence resumed after a re-formation gets the rows of the positions this stage kept
//! without computing them again (`specs/reformation.md`). The last stage sends tokens,
//! not rows, and keeps no log.

/// Every slot's logged output rows (wire bytes, `row_bytes` per position).
#[derive(Debug, Default)]
pub struct RowLog {
    row_bytes: usize,
    slots: Vec<Vec<u8>>,
}

impl RowLog {
    /// A log of `slots` slots of `row_bytes` rows (`None`: a stage that keeps none).
    pub fn new(slots: usize, row_bytes: Option<usize>) -> RowLog {
        match row_bytes {
            Some(row_bytes) if row_bytes > 0 => {
                RowLog { row_bytes, slots: vec![Vec::new(); slots] }
            }
            _ => RowLog::default(),
        }
    }

    /// Whether this stage keeps a log.
    pub fn on(&self) -> bool {
        self.row_bytes > 0
    }

    /// Positions slot `slot` has logged (`None`: no log is kept).
    pub fn logged(&self, slot: usize) -> Option<u32> {
        self.on().then(|| self.slots.get(slot).map_or(0, |s| (s.len() / self.row_bytes) as u32))
    }

    /// Drops slot `slot`'s rows from position `len` on.
    pub fn truncate(&mut self, slot: usize, len: usize) {
        let rb = self.row_bytes;
        if let Some(s) = self.slots.get_mut(slot) {
            s.truncate(len.saturating_mul(rb));
        }
    }

    /// Empties every slot.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(Vec::clear);
    }

    /// Logs `rows` as slot `slot`'s rows from position `first`, where they continue its
    /// log (a log with a gap, after a block loaded without rows, stays short).
    pub fn record(&mut self, slot: usize, first: usize, rows: &[u8]) {
        let rb = self.row_bytes;
        if let Some(s) = self.slots.get_mut(slot)
            && rb > 0
        {
            if s.len() > first * rb {
                s.truncate(first * rb);
            }
            if s.len() == first * rb {
                s.extend_from_slice(rows);
            }
        }
    }

    /// Slot `slot`'s rows of positions `from .. from + n`, if logged.
    pub fn rows(&self, slot: usize, from: usize, n: usize) -> Option<&[u8]> {
        let rb = self.row_bytes;
        self.slots.get(slot)?.get(from * rb..(from + n) * rb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_logged_only_where_they_continue_the_log_and_go_with_a_truncation() {
        let mut log = RowLog::new(2, Some(2));
        log.record(0, 0, &[1, 1, 2, 2]);
        assert_eq!(log.logged(0), Some(2));
        log.record(0, 3, &[9, 9]);
        assert_eq!(log.logged(0), Some(2), "a gap is never logged");
        log.record(0, 1, &[3, 3]);
        assert_eq!(log.rows(0, 0, 2), Some(&[1, 1, 3, 3][..]), "a rewrite replaces the rest");
        log.truncate(0, 1);
        assert_eq!(log.rows(0, 0, 1), Some(&[1, 1][..]));
        assert_eq!(log.rows(0, 0, 2), None);
        assert_eq!(RowLog::new(2, None).logged(0), None);
    }
}
