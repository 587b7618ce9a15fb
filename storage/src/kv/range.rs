//! Range reads: options, key-range helpers, and a cursor that streams a range
//! in bounded chunks (never one unbounded read).

use super::{KeyValue, Txn};
use crate::error::Result;

/// How to read a range.
#[derive(Debug, Clone, Copy)]
pub struct RangeOptions {
    /// At most this many keys (clamped to `1..=RANGE_CHUNK_MAX`).
    pub limit: usize,
    /// Descending order when true.
    pub reverse: bool,
    /// Add no read conflict for the range.
    pub snapshot: bool,
}

impl RangeOptions {
    pub fn limit(limit: usize) -> Self {
        RangeOptions {
            limit,
            reverse: false,
            snapshot: false,
        }
    }

    pub fn reversed(mut self) -> Self {
        self.reverse = true;
        self
    }

    pub fn snapshot(mut self) -> Self {
        self.snapshot = true;
        self
    }
}

/// The first key that sorts after every key starting with `prefix`
/// (FDB's `strinc`). Trailing 0xff bytes are dropped first.
pub fn strinc(prefix: &[u8]) -> Vec<u8> {
    let mut out = prefix.to_vec();
    while let Some(&last) = out.last() {
        if last == 0xff {
            out.pop();
        } else {
            *out.last_mut().expect("non-empty") += 1;
            return out;
        }
    }
    // Every byte was 0xff: the range runs to the end of the keyspace.
    vec![0xff]
}

/// `[prefix, strinc(prefix))`: every key that starts with `prefix`.
pub fn prefix_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (prefix.to_vec(), strinc(prefix))
}

/// Streams a range in chunks. Each chunk is one bounded read; the cursor
/// remembers where it stopped, so a long walk can also be resumed in a new
/// transaction from [`RangeCursor::position`].
pub struct RangeCursor {
    txn: Txn,
    begin: Vec<u8>,
    end: Vec<u8>,
    chunk: usize,
    reverse: bool,
    done: bool,
}

impl RangeCursor {
    pub(super) fn new(txn: Txn, begin: &[u8], end: &[u8], chunk: usize, reverse: bool) -> Self {
        RangeCursor {
            txn,
            begin: begin.to_vec(),
            end: end.to_vec(),
            chunk: chunk.max(1),
            reverse,
            done: begin >= end,
        }
    }

    /// The next chunk, or `None` when the range is exhausted.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<KeyValue>>> {
        if self.done {
            return Ok(None);
        }
        let opts = RangeOptions {
            limit: self.chunk,
            reverse: self.reverse,
            snapshot: false,
        };
        let rows = self.txn.get_range(&self.begin, &self.end, opts).await?;
        if rows.len() < opts.limit.min(super::RANGE_CHUNK_MAX) {
            self.done = true;
        }
        if let Some((last, _)) = rows.last() {
            if self.reverse {
                self.end = last.clone();
            } else {
                self.begin = key_after(last);
            }
        } else {
            self.done = true;
        }
        Ok(if rows.is_empty() { None } else { Some(rows) })
    }

    /// The still-unread part of the range, to resume in another transaction.
    pub fn position(&self) -> (&[u8], &[u8]) {
        (&self.begin, &self.end)
    }
}

/// The smallest key strictly greater than `key`.
pub fn key_after(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strinc_skips_trailing_ff() {
        assert_eq!(strinc(b"ab"), b"ac".to_vec());
        assert_eq!(strinc(&[1, 0xff, 0xff]), vec![2]);
        assert_eq!(strinc(&[0xff]), vec![0xff]);
    }
}
