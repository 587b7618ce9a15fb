//! The cluster-wide switch to a new store format, so a mesh upgrades one
//! node at a time without downtime.
//!
//! Formats up to 3 changed only what a build reads, and a build marked the
//! store with its format when it opened it ([`super::cluster`]). From
//! format 4 on, a format changes what older builds can read (format 4:
//! version-4 message rows, `message_codec`), so marking on open would make
//! every node still running the previous build unable to read what the
//! new one writes. Instead:
//!
//! 1. a new build reads every format but writes the store's current one
//!    ([`crate::kv::Database::write_format`]), so while any node of the old
//!    build runs, nothing it cannot read is written;
//! 2. every node records the formats it supports in its node record
//!    ([`super::nodes::Registration`]); records of builds before that field
//!    count as formats 1..=3;
//! 3. each node of a new build tries [`try_switch`] periodically: once
//!    every registered node (forgotten ones aside) supports the next
//!    format, the store's format fact rises to it, and every node writes
//!    it from its next read of the fact (within 5 s; writing the older
//!    form meanwhile is harmless, since new builds read both).
//!
//! Fencing: the switch reads every node record and the fact in one
//! transaction, and a registration reads the fact and writes its record in
//! one ([`super::nodes::register`]), so a node of an old build starting
//! concurrently either registers first (and the switch waits for it) or
//! sees the new format and refuses to start. The switching node must still
//! be its name's current incarnation: a superseded one does not decide.
//!
//! The wait is on every *registered* node, not only the live ones: a dead
//! node of the old build that comes back must not find a store it cannot
//! read, so it blocks the switch until it is restarted on the new build or
//! `meshmail node forget` removes it.

use serde::{Deserialize, Serialize};

use super::cluster::{self, STORE_FORMAT};
use super::nodes::{self, NodeRecord};
use crate::error::Result;
use crate::kv::{Database, Txn};

/// The format whose message rows are version 4 (flags as tokens).
pub const TOKEN_FLAGS_FORMAT: u32 = 4;

/// The newest format a build marks when it opens a store. Later formats
/// are switched on only by [`try_switch`].
pub const LAST_MARKED_ON_OPEN: u32 = 3;

/// The store formats a node reads and may write, both ends included.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct FormatRange {
    pub min: u32,
    pub max: u32,
}

impl FormatRange {
    /// What builds from before node records named their formats supported.
    pub const BEFORE_RECORDS: FormatRange = FormatRange { min: 1, max: 3 };
    /// Everything this build supports.
    pub const BUILD: FormatRange = FormatRange {
        min: 1,
        max: STORE_FORMAT,
    };

    /// This build's range, its top lowered to `pin` (a node pinned to the
    /// format of the release it replaces, during an upgrade's first step or
    /// in tests of one). A pin outside what this build can be is refused.
    pub fn pinned(pin: Option<u32>) -> std::result::Result<FormatRange, BadPin> {
        match pin {
            None => Ok(Self::BUILD),
            Some(p) if (LAST_MARKED_ON_OPEN..=STORE_FORMAT).contains(&p) => Ok(FormatRange { max: p, ..Self::BUILD }),
            Some(p) => Err(BadPin(p)),
        }
    }

    pub fn is_pinned(&self) -> bool {
        self.max < Self::BUILD.max
    }
}

impl std::fmt::Display for FormatRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..={}", self.min, self.max)
    }
}

/// A pin this build cannot honour.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("pin_store_format = {0}: this build can be pinned to formats {LAST_MARKED_ON_OPEN}..={STORE_FORMAT}")]
pub struct BadPin(pub u32);

/// A node the switch waits for: it does not support the next format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holdout {
    pub name: String,
    pub generation: u64,
    pub build: Option<String>,
    pub formats: FormatRange,
}

/// Where the store stands against the format `want`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchPlan {
    /// The store's format now (None: a store that never recorded one).
    pub store: Option<u32>,
    /// The highest format every registered node supports, capped at `want`.
    pub target: u32,
    /// Registered, not forgotten nodes whose formats stop below `want`.
    pub holdouts: Vec<Holdout>,
}

/// What [`try_switch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchOutcome {
    /// The store already has `format` (or a newer one): nothing to do.
    AlreadyAt { format: u32 },
    /// The store's format rose from `from` to `to`.
    Switched { from: u32, to: u32 },
    /// Some nodes do not support the next format yet.
    Waiting { store: u32, holdouts: Vec<Holdout> },
    /// The caller is not its name's current incarnation: it must not decide.
    Superseded,
}

/// Reads the store's format and every node record (with read conflicts:
/// the switch must conflict with a registration) and works out how far the
/// store may go towards `want`.
pub async fn plan(txn: &Txn, want: u32) -> Result<SwitchPlan> {
    let store = cluster::store_format(txn).await?;
    let records = nodes::list(txn).await?;
    Ok(plan_of(store, &records, want))
}

fn plan_of(store: Option<u32>, records: &[NodeRecord], want: u32) -> SwitchPlan {
    let live: Vec<&NodeRecord> = records.iter().filter(|r| r.forgotten_ms.is_none()).collect();
    let target = live.iter().map(|r| r.formats().max).fold(want, u32::min);
    let holdouts = live
        .iter()
        .filter(|r| r.formats().max < want)
        .map(|r| Holdout {
            name: r.name.clone(),
            generation: r.generation,
            build: r.build.clone(),
            formats: r.formats(),
        })
        .collect();
    SwitchPlan {
        store,
        target,
        holdouts,
    }
}

/// Raises the store's format towards `mine.max` if every registered node
/// supports it; `(name, generation)` is the caller, which must be its
/// name's current incarnation. On `Switched`, the caller raises its own
/// write format at once ([`Database::raise_write_format`]).
pub async fn try_switch(db: &Database, name: &str, generation: u64, mine: FormatRange) -> Result<SwitchOutcome> {
    db.run("cluster_format_switch", |txn| async move {
        let store = cluster::store_format(&txn).await?;
        let records = nodes::list(&txn).await?;
        let now = store.unwrap_or(LAST_MARKED_ON_OPEN);
        if now >= mine.max {
            return Ok(SwitchOutcome::AlreadyAt { format: now });
        }
        if !records.iter().any(|r| r.name == name && r.generation == generation) {
            return Ok(SwitchOutcome::Superseded);
        }
        let plan = plan_of(store, &records, mine.max);
        if plan.target <= now {
            return Ok(SwitchOutcome::Waiting {
                store: now,
                holdouts: plan.holdouts,
            });
        }
        cluster::mark_store_format(&txn, plan.target)?;
        Ok(SwitchOutcome::Switched {
            from: now,
            to: plan.target,
        })
    })
    .await
}

#[cfg(test)]
#[path = "format_switch_tests.rs"]
mod tests;
