//! The mail protocols: SMTP/LMTP/submission, IMAP and JMAP, each with its
//! wire parser in its own module, separate from the session logic.
//!
//! Architecture invariant: a protocol session never writes to the store
//! directly; every write to a mailbox goes through that mailbox's shard
//! actor (`meshmail-actors`). Parsers never panic on network input and are
//! fuzzed. Not built yet: see docs/ARCHITECTURE.md.
