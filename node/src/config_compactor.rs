//! `[compactor]`: how often the compactor runs and how much change history
//! each mailbox keeps.

use std::time::Duration;

use meshmail_actors::compactor::CompactorConfig;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactorSection {
    /// Seconds between compactor steps (each step is bounded: a page of
    /// mailboxes, a page of orphan blobs, a page of expired markers).
    #[serde(default = "d_interval")]
    pub interval_s: u64,
    /// Change-log entries kept per mailbox. A client resyncing (QRESYNC,
    /// CONDSTORE, JMAP `/changes`) from further back than this gets a full
    /// resync instead of the changes; so does a node's IMAP cache.
    #[serde(default = "d_window")]
    pub change_log_window: u64,
}

impl Default for CompactorSection {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl CompactorSection {
    /// The compactor's settings (ranges checked by `Config::validate()`).
    pub fn settings(&self) -> CompactorConfig {
        CompactorConfig {
            interval: Duration::from_secs(self.interval_s),
            change_log_window: self.change_log_window,
            ..CompactorConfig::default()
        }
    }
}

fn d_interval() -> u64 {
    CompactorConfig::default().interval.as_secs()
}
fn d_window() -> u64 {
    CompactorConfig::default().change_log_window
}
