//! The stored form of a ledger entry: a compact, versioned binary record.
//!
//! Every acceptance writes one entry and keeps it, so its size is paid per
//! message for the life of the store: the JSON of the first builds took
//! ~190 bytes for a delivery (the 16-byte acceptance id alone became a
//! 50-character array of numbers); this form takes ~35.
//!
//! Version 1 (first byte `0x01`):
//!
//! | field | encoding |
//! |---|---|
//! | acceptance_id | 16 raw bytes |
//! | recorded_ms | LEB128 varint |
//! | state | one tag byte, then its fields (below) |
//!
//! | tag | state | fields |
//! |---|---|---|
//! | 0 | Delivered | account, mailbox (zigzag varints), uid, uid_validity (varints) |
//! | 1 | Queued | outbound_id (16 bytes) |
//! | 2 | Relayed | outbound_id (16 bytes), host (length + UTF-8), tls (0/1) |
//! | 3 | Bounced | reason (length + UTF-8) |
//! | 4 | Quarantined | quarantine_id (16 bytes) |
//! | 5 | Expunged | account, mailbox (zigzag), uid, expunged_ms (varints) |
//!
//! Entries of earlier builds are JSON objects (first byte `{`) and are
//! still read; nothing rewrites them (a ledger entry changes state rarely,
//! and is then written in the current form).

use super::ledger::{LedgerEntry, LedgerState};
use super::wire::{Decoded, Reader, bad, bytes, unzigzag, varint, zigzag};
use crate::error::{Result, StorageError};

/// The first byte of a version-1 entry.
pub const VERSION_1: u8 = 1;

const DELIVERED: u8 = 0;
const QUEUED: u8 = 1;
const RELAYED: u8 = 2;
const BOUNCED: u8 = 3;
const QUARANTINED: u8 = 4;
const EXPUNGED: u8 = 5;

pub fn encode(entry: &LedgerEntry) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.push(VERSION_1);
    out.extend_from_slice(&entry.acceptance_id);
    varint(&mut out, entry.recorded_ms);
    match &entry.state {
        LedgerState::Delivered {
            account,
            mailbox,
            uid,
            uid_validity,
        } => {
            out.push(DELIVERED);
            varint(&mut out, zigzag(*account));
            varint(&mut out, zigzag(*mailbox));
            varint(&mut out, u64::from(*uid));
            varint(&mut out, u64::from(*uid_validity));
        }
        LedgerState::Queued { outbound_id } => {
            out.push(QUEUED);
            out.extend_from_slice(outbound_id);
        }
        LedgerState::Relayed { outbound_id, host, tls } => {
            out.push(RELAYED);
            out.extend_from_slice(outbound_id);
            bytes(&mut out, host.as_bytes());
            out.push(u8::from(*tls));
        }
        LedgerState::Bounced { reason } => {
            out.push(BOUNCED);
            bytes(&mut out, reason.as_bytes());
        }
        LedgerState::Quarantined { quarantine_id } => {
            out.push(QUARANTINED);
            out.extend_from_slice(quarantine_id);
        }
        LedgerState::Expunged {
            account,
            mailbox,
            uid,
            expunged_ms,
        } => {
            out.push(EXPUNGED);
            varint(&mut out, zigzag(*account));
            varint(&mut out, zigzag(*mailbox));
            varint(&mut out, u64::from(*uid));
            varint(&mut out, *expunged_ms);
        }
    }
    out
}

/// Reads an entry of either form; damage is `StorageError::Corrupt`.
pub fn decode(raw: &[u8]) -> Result<LedgerEntry> {
    match raw.first() {
        Some(b'{') => super::decode("ledger entry", raw),
        Some(&VERSION_1) => decode_v1(raw).map_err(|d| corrupt(d.to_string())),
        Some(other) => Err(corrupt(format!("unknown ledger entry version {other}"))),
        None => Err(corrupt("empty ledger entry".into())),
    }
}

fn corrupt(detail: String) -> StorageError {
    StorageError::Corrupt {
        what: "ledger entry".into(),
        detail,
    }
}

fn decode_v1(raw: &[u8]) -> Decoded<LedgerEntry> {
    let mut r = Reader::new(raw, 1);
    let acceptance_id = r.array::<16>()?;
    let recorded_ms = r.varint()?;
    let state = match r.byte()? {
        DELIVERED => LedgerState::Delivered {
            account: unzigzag(r.varint()?),
            mailbox: unzigzag(r.varint()?),
            uid: u32_field(&mut r, "uid")?,
            uid_validity: u32_field(&mut r, "uid_validity")?,
        },
        QUEUED => LedgerState::Queued {
            outbound_id: r.array::<16>()?,
        },
        RELAYED => LedgerState::Relayed {
            outbound_id: r.array::<16>()?,
            host: r.text()?,
            tls: flag(&mut r)?,
        },
        BOUNCED => LedgerState::Bounced { reason: r.text()? },
        QUARANTINED => LedgerState::Quarantined {
            quarantine_id: r.array::<16>()?,
        },
        EXPUNGED => LedgerState::Expunged {
            account: unzigzag(r.varint()?),
            mailbox: unzigzag(r.varint()?),
            uid: u32_field(&mut r, "uid")?,
            expunged_ms: r.varint()?,
        },
        tag => return Err(bad(format!("unknown ledger state tag {tag}"))),
    };
    r.end()?;
    Ok(LedgerEntry {
        acceptance_id,
        recorded_ms,
        state,
    })
}

fn u32_field(r: &mut Reader<'_>, name: &str) -> Decoded<u32> {
    u32::try_from(r.varint()?).map_err(|_| bad(format!("{name} out of range")))
}

fn flag(r: &mut Reader<'_>) -> Decoded<bool> {
    match r.byte()? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(bad(format!("flag byte {b}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(state: LedgerState) -> LedgerEntry {
        LedgerEntry {
            acceptance_id: [7; 16],
            recorded_ms: 1_764_800_000_000,
            state,
        }
    }

    fn every_state() -> Vec<LedgerState> {
        vec![
            LedgerState::Delivered {
                account: 3,
                mailbox: 12,
                uid: 40_000,
                uid_validity: 1_764_000_000,
            },
            LedgerState::Queued { outbound_id: [1; 16] },
            LedgerState::Relayed {
                outbound_id: [2; 16],
                host: "mx.example.net".into(),
                tls: true,
            },
            LedgerState::Bounced {
                reason: "550 5.1.1 no such user — ünïcode".into(),
            },
            LedgerState::Quarantined { quarantine_id: [3; 16] },
            LedgerState::Expunged {
                account: -1,
                mailbox: i64::MAX,
                uid: u32::MAX,
                expunged_ms: u64::MAX,
            },
        ]
    }

    #[test]
    fn every_state_round_trips_and_a_delivery_is_small() {
        for state in every_state() {
            let e = entry(state);
            assert_eq!(decode(&encode(&e)).unwrap(), e);
        }
        let delivered = encode(&entry(every_state().remove(0)));
        let json = super::super::encode(&entry(every_state().remove(0))).unwrap();
        assert!(delivered.len() <= 40, "{} bytes", delivered.len());
        assert!(json.len() > 4 * delivered.len(), "json {} bytes", json.len());
    }

    #[test]
    fn entries_of_earlier_builds_still_read() {
        for state in every_state() {
            let e = entry(state);
            let json = super::super::encode(&e).unwrap();
            assert_eq!(json[0], b'{');
            assert_eq!(decode(&json).unwrap(), e);
        }
    }

    #[test]
    fn damage_is_an_error() {
        let good = encode(&entry(every_state().remove(2)));
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "truncated at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        let mut bad_tag = good.clone();
        bad_tag[1 + 16 + 6] = 9;
        assert!(decode(&bad_tag).is_err());
        assert!(decode(&[9, 1, 2]).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut v = raw;
            if let Some(first) = v.first_mut() {
                *first = VERSION_1;
            }
            let _ = decode(&v);
        }
    }
}
