//! The primitives of the model's binary records (message rows,
//! [`super::message_codec`], and summaries, [`super::summary_codec`]):
//! LEB128 varints, zigzag integers, length-prefixed bytes, and a bounds-
//! checked reader whose errors ([`DecodeError`]) the codecs wrap as
//! `StorageError::Corrupt`. Decoding never panics on damaged input.

/// Longest string field accepted while decoding (flags, ids, summary
/// strings are far smaller; a record is one KV value of ≤ 100 KB).
pub(super) const FIELD_BYTES_MAX: usize = 100_000;

/// What was wrong with a damaged record, as the corrupt-row error says it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct DecodeError(String);

/// A decoding error saying `what` was found.
pub(super) fn bad(what: impl Into<String>) -> DecodeError {
    DecodeError(what.into())
}

pub(super) type Decoded<T> = std::result::Result<T, DecodeError>;

pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

pub(super) fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub(super) struct Reader<'a> {
    pub(super) raw: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(raw: &'a [u8], at: usize) -> Reader<'a> {
        Reader { raw, at }
    }

    pub(super) fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.raw.len());
        let end = end.ok_or_else(|| bad(format!("truncated at byte {}", self.at)))?;
        let s = &self.raw[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(super) fn byte(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn varint(&mut self) -> Decoded<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint longer than 64 bits"))
    }

    pub(super) fn bytes(&mut self) -> Decoded<&'a [u8]> {
        let n = self.varint()? as usize;
        if n > FIELD_BYTES_MAX {
            return Err(bad(format!("field of {n} bytes")));
        }
        self.take(n)
    }

    pub(super) fn text(&mut self) -> Decoded<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|e| bad(e.to_string()))
    }

    pub(super) fn array<const N: usize>(&mut self) -> Decoded<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    /// A count of items that follow, each at least one byte long: more
    /// than the bytes left is damage (and would be a huge allocation).
    pub(super) fn count(&mut self) -> Decoded<usize> {
        let n = self.varint()?;
        let left = (self.raw.len() - self.at) as u64;
        if n > left {
            return Err(bad(format!("{n} items in {left} bytes")));
        }
        Ok(n as usize)
    }

    pub(super) fn end(&self) -> Decoded<()> {
        if self.at != self.raw.len() {
            return Err(bad(format!("{} trailing bytes", self.raw.len() - self.at)));
        }
        Ok(())
    }
}
