//! Sequence sets: [`SequenceSet`] as a client writes it (`1:5,7,9:*`, or
//! `$` for the saved search result of RFC 5182), and [`IdSet`], a resolved
//! set of message numbers or UIDs kept as sorted disjoint ranges, which is
//! also what COPYUID/APPENDUID, ESEARCH ALL and VANISHED render.

use std::fmt;

/// One end of a range: a number or `*` (the largest number in use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqNumber {
    Value(u32),
    Star,
}

impl SeqNumber {
    fn resolve(self, largest: u32) -> u32 {
        match self {
            SeqNumber::Value(n) => n,
            SeqNumber::Star => largest,
        }
    }
}

/// A sequence set as written. Ranges may be reversed (`5:1` is `1:5`) and
/// overlap; numbers are non-zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SequenceSet {
    /// `$`: the saved search result (RFC 5182), which the session keeps as
    /// an [`IdSet`] of UIDs.
    Saved,
    /// Never empty.
    Ranges(Vec<(SeqNumber, SeqNumber)>),
}

impl SequenceSet {
    /// Parses `1:5,7,*` or `$`. None for anything else (empty items, zero,
    /// numbers over 2^32-1, other characters).
    pub fn parse(s: &[u8]) -> Option<SequenceSet> {
        if s == b"$" {
            return Some(SequenceSet::Saved);
        }
        let mut ranges = Vec::new();
        for item in s.split(|&b| b == b',') {
            let mut ends = item.splitn(2, |&b| b == b':');
            let a = parse_seq_number(ends.next()?)?;
            let b = match ends.next() {
                Some(e) => parse_seq_number(e)?,
                None => a,
            };
            ranges.push((a, b));
        }
        Some(SequenceSet::Ranges(ranges))
    }

    /// A set of one number.
    pub fn single(n: u32) -> SequenceSet {
        SequenceSet::Ranges(vec![(SeqNumber::Value(n), SeqNumber::Value(n))])
    }

    /// Does the set use `*`?
    pub fn has_star(&self) -> bool {
        match self {
            SequenceSet::Saved => false,
            SequenceSet::Ranges(r) => r.iter().any(|&(a, b)| a == SeqNumber::Star || b == SeqNumber::Star),
        }
    }

    /// The set with `*` standing for `largest` (the message count or the
    /// highest UID) and `$` for `saved` (empty when None). Numbers above
    /// `largest` stay: for message numbers the session checks
    /// `max() <= count` (RFC 9051: an invalid number is an error) or
    /// clamps; for UIDs they simply match nothing. In an empty mailbox
    /// (`largest == 0`) `*` adds nothing.
    pub fn resolve(&self, largest: u32, saved: Option<&IdSet>) -> IdSet {
        match self {
            SequenceSet::Saved => saved.cloned().unwrap_or_default(),
            SequenceSet::Ranges(ranges) => {
                let mut pairs: Vec<(u32, u32)> = ranges
                    .iter()
                    .map(|&(a, b)| {
                        let (a, b) = (a.resolve(largest), b.resolve(largest));
                        (a.min(b).max(1), a.max(b))
                    })
                    .filter(|&(a, b)| a <= b)
                    .collect();
                IdSet::from_pairs(&mut pairs)
            }
        }
    }

    /// Membership without building the set: `n` is in the set once `*` is
    /// `largest` and `$` is `saved`.
    pub fn contains(&self, n: u32, largest: u32, saved: Option<&IdSet>) -> bool {
        match self {
            SequenceSet::Saved => saved.is_some_and(|s| s.contains(n)),
            SequenceSet::Ranges(ranges) => {
                n != 0
                    && ranges.iter().any(|&(a, b)| {
                        let (a, b) = (a.resolve(largest), b.resolve(largest));
                        a.min(b) <= n && n <= a.max(b)
                    })
            }
        }
    }
}

fn parse_seq_number(s: &[u8]) -> Option<SeqNumber> {
    if s == b"*" {
        return Some(SeqNumber::Star);
    }
    parse_nz_u32(s).map(SeqNumber::Value)
}

/// A non-zero decimal u32 without sign or leading zero.
pub(crate) fn parse_nz_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || s[0] == b'0' || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = s.iter().fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
    u32::try_from(n).ok()
}

impl fmt::Display for SequenceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranges = match self {
            SequenceSet::Saved => return f.write_str("$"),
            SequenceSet::Ranges(r) => r,
        };
        let one = |n: SeqNumber| match n {
            SeqNumber::Value(v) => v.to_string(),
            SeqNumber::Star => "*".to_string(),
        };
        for (i, &(a, b)) in ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{}", one(a))?;
            } else {
                write!(f, "{}:{}", one(a), one(b))?;
            }
        }
        Ok(())
    }
}

/// A set of message numbers or UIDs: sorted, disjoint, non-adjacent
/// inclusive ranges, so `1:1000000` costs one pair. Its `Display` is the
/// compact IMAP form (`1:5,7,9:12`); an empty set displays as nothing,
/// which is not valid IMAP: callers check [`IdSet::is_empty`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    ranges: Vec<(u32, u32)>,
}

impl IdSet {
    pub fn new() -> IdSet {
        IdSet::default()
    }

    /// `lo..=hi` (empty when lo > hi).
    pub fn range(lo: u32, hi: u32) -> IdSet {
        IdSet {
            ranges: if lo <= hi { vec![(lo, hi)] } else { Vec::new() },
        }
    }

    /// Builds from arbitrary inclusive pairs (each with a <= b).
    fn from_pairs(pairs: &mut [(u32, u32)]) -> IdSet {
        pairs.sort_unstable();
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(pairs.len());
        for &(a, b) in pairs.iter() {
            match ranges.last_mut() {
                Some(last) if u64::from(a) <= u64::from(last.1) + 1 => last.1 = last.1.max(b),
                _ => ranges.push((a, b)),
            }
        }
        IdSet { ranges }
    }

    /// The ranges, sorted, disjoint and non-adjacent.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of members.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|&(a, b)| u64::from(b - a) + 1).sum()
    }

    pub fn min(&self) -> Option<u32> {
        self.ranges.first().map(|r| r.0)
    }

    pub fn max(&self) -> Option<u32> {
        self.ranges.last().map(|r| r.1)
    }

    /// Binary search over the ranges.
    pub fn contains(&self, n: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, b)| b < n);
        self.ranges.get(i).is_some_and(|&(a, _)| a <= n)
    }

    /// Adds `lo..=hi`.
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        if lo > hi {
            return;
        }
        // Ranges ending before lo-1 stay on the left, starting after hi+1 on the right.
        let left = self.ranges.partition_point(|&(_, b)| u64::from(b) + 1 < u64::from(lo));
        let right = self.ranges.partition_point(|&(a, _)| u64::from(a) <= u64::from(hi) + 1);
        let (mut a, mut b) = (lo, hi);
        if left < right {
            a = a.min(self.ranges[left].0);
            b = b.max(self.ranges[right - 1].1);
        }
        self.ranges.splice(left..right, [(a, b)]);
    }

    pub fn insert(&mut self, n: u32) {
        self.insert_range(n, n);
    }

    /// Removes one member (the saved result after an EXPUNGE).
    pub fn remove(&mut self, n: u32) {
        let i = self.ranges.partition_point(|&(_, b)| b < n);
        let Some(&(a, b)) = self.ranges.get(i) else {
            return;
        };
        if n < a {
            return;
        }
        let mut keep = Vec::with_capacity(2);
        if a < n {
            keep.push((a, n - 1));
        }
        if n < b {
            keep.push((n + 1, b));
        }
        self.ranges.splice(i..=i, keep);
    }

    /// The members within `lo..=hi`.
    pub fn clamp(&self, lo: u32, hi: u32) -> IdSet {
        IdSet {
            ranges: self
                .ranges
                .iter()
                .filter_map(|&(a, b)| {
                    let (a, b) = (a.max(lo), b.min(hi));
                    (a <= b).then_some((a, b))
                })
                .collect(),
        }
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..=b)
    }
}

impl FromIterator<u32> for IdSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> IdSet {
        let mut pairs: Vec<(u32, u32)> = iter.into_iter().map(|n| (n, n)).collect();
        IdSet::from_pairs(&mut pairs)
    }
}

impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}:{b}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_and_resolve() {
        let s = SequenceSet::parse(b"1:5,7,9:*").unwrap();
        assert_eq!(s.to_string(), "1:5,7,9:*");
        assert!(s.has_star());
        assert_eq!(s.resolve(12, None).to_string(), "1:5,7,9:12");
        // * below a range start reverses it: 9:* with 3 messages is 3:9.
        assert_eq!(SequenceSet::parse(b"9:*").unwrap().resolve(3, None).to_string(), "3:9");
        assert_eq!(s.resolve(3, None).to_string(), "1:9");
        assert!(s.contains(10, 12, None) && !s.contains(6, 12, None) && !s.contains(13, 12, None));
        assert_eq!(SequenceSet::parse(b"5:2").unwrap().resolve(0, None).to_string(), "2:5");
        assert_eq!(SequenceSet::parse(b"*").unwrap().resolve(0, None), IdSet::new());
        assert_eq!(SequenceSet::parse(b"$"), Some(SequenceSet::Saved));
        let saved: IdSet = [4, 5, 6].into_iter().collect();
        assert_eq!(SequenceSet::Saved.resolve(9, Some(&saved)).to_string(), "4:6");
        assert!(SequenceSet::Saved.contains(5, 9, Some(&saved)) && !SequenceSet::Saved.contains(5, 9, None));
        for bad in [
            &b""[..],
            b",",
            b"1,",
            b"0",
            b"1:0",
            b"01",
            b"4294967296",
            b"1::2",
            b"a",
            b"$,1",
            b"1:2:3",
            b"**",
        ] {
            assert_eq!(SequenceSet::parse(bad), None, "{bad:?}");
        }
        assert!(SequenceSet::parse(b"4294967295").is_some());
    }

    #[test]
    fn id_set_operations() {
        let mut s = IdSet::new();
        for n in [5, 3, 4, 10, 1, 12, 11] {
            s.insert(n);
        }
        assert_eq!(s.to_string(), "1,3:5,10:12");
        assert_eq!(s.len(), 7);
        s.insert_range(2, 9);
        assert_eq!(s.to_string(), "1:12");
        s.remove(6);
        s.remove(1);
        s.remove(100);
        assert_eq!(s.to_string(), "2:5,7:12");
        assert_eq!(s.clamp(4, 8).to_string(), "4:5,7:8");
        assert_eq!((s.min(), s.max()), (Some(2), Some(12)));
        s.insert(u32::MAX);
        s.insert(u32::MAX - 1);
        assert_eq!(s.to_string(), "2:5,7:12,4294967294:4294967295");
        assert_eq!(s.iter().take(3).collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    proptest! {
        #[test]
        fn render_parse_round_trip(members in proptest::collection::btree_set(1u32..200, 0..60), big in 1u32..=u32::MAX) {
            let mut set: IdSet = members.iter().copied().collect();
            set.insert(big);
            let text = set.to_string();
            let parsed = SequenceSet::parse(text.as_bytes()).unwrap();
            prop_assert_eq!(parsed.resolve(0, None), set.clone());
            prop_assert_eq!(parsed.to_string(), text);
            for n in members.iter().copied().chain([0, 1, 199, big]) {
                prop_assert_eq!(set.contains(n), n == big || members.contains(&n));
            }
        }

        #[test]
        fn insert_matches_a_btree_set(ops in proptest::collection::vec((0u32..100, 0u32..6, any::<bool>()), 0..80)) {
            let mut set = IdSet::new();
            let mut model = std::collections::BTreeSet::new();
            for (n, width, add) in ops {
                if add {
                    set.insert_range(n, n + width);
                    model.extend(n..=n + width);
                } else {
                    set.remove(n);
                    model.remove(&n);
                }
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            let rebuilt: IdSet = model.iter().copied().collect();
            prop_assert_eq!(set, rebuilt);
        }
    }
}
