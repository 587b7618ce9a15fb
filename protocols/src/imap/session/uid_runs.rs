//! A selected mailbox's UID list packed for a parked session: runs of
//! consecutive UIDs as varint (gap, length) pairs. A mailbox nobody expunged
//! from is one run (a few bytes for any size, where the `Vec<u32>` takes 4
//! bytes a message); one with holes costs a few bytes per hole.

use meshmail_storage::ids::Uid;

/// Ascending UIDs, packed. Built by [`UidRuns::pack`], read back whole by
/// [`UidRuns::unpack`]; nothing reads it in between.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UidRuns {
    bytes: Vec<u8>,
    count: usize,
}

impl UidRuns {
    /// Packs `uids`, which must be strictly ascending (sequence order).
    pub fn pack(uids: &[Uid]) -> UidRuns {
        let mut bytes = Vec::new();
        // One past the last UID of the previous run (u64: a run may end
        // at u32::MAX).
        let mut prev_end: u64 = 0;
        let mut i = 0;
        while i < uids.len() {
            let start = uids[i];
            let mut len = 1u32;
            while i + (len as usize) < uids.len()
                && u64::from(uids[i + len as usize]) == u64::from(start) + u64::from(len)
            {
                len += 1;
            }
            debug_assert!(u64::from(start) >= prev_end, "UIDs must ascend");
            put_varint(&mut bytes, (u64::from(start) - prev_end) as u32);
            put_varint(&mut bytes, len);
            prev_end = u64::from(start) + u64::from(len);
            i += len as usize;
        }
        bytes.shrink_to_fit();
        UidRuns {
            bytes,
            count: uids.len(),
        }
    }

    /// The UIDs again, in order.
    pub fn unpack(&self) -> Vec<Uid> {
        let mut out = Vec::with_capacity(self.count);
        let mut pos = 0;
        let mut next: u64 = 0;
        while pos < self.bytes.len() {
            let start = next + u64::from(get_varint(&self.bytes, &mut pos));
            let end = start + u64::from(get_varint(&self.bytes, &mut pos));
            out.extend((start..end).map(|u| u as Uid));
            next = end;
        }
        out
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn packed_len(&self) -> usize {
        self.bytes.len()
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> u32 {
    let mut v = 0u32;
    let mut shift = 0;
    loop {
        let b = bytes[*pos];
        *pos += 1;
        v |= u32::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_mailbox_without_holes_packs_to_a_few_bytes() {
        let uids: Vec<Uid> = (1..=30_000).collect();
        let runs = UidRuns::pack(&uids);
        assert!(runs.packed_len() <= 4, "{} bytes", runs.packed_len());
        assert_eq!(runs.unpack(), uids);
    }

    #[test]
    fn edges_round_trip() {
        for uids in [
            vec![],
            vec![1],
            vec![u32::MAX],
            vec![1, u32::MAX],
            vec![u32::MAX - 1, u32::MAX],
        ] {
            assert_eq!(UidRuns::pack(&uids).unpack(), uids);
        }
    }

    proptest! {
        #[test]
        fn any_ascending_uids_round_trip(mut uids in proptest::collection::vec(1u32..=u32::MAX, 0..400)) {
            uids.sort_unstable();
            uids.dedup();
            let runs = UidRuns::pack(&uids);
            prop_assert_eq!(runs.unpack(), uids);
        }
    }
}
