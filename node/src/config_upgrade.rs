//! `[upgrade]`: what a node does during a rolling upgrade of the mesh.

use meshmail_storage::model::format_switch::{BadPin, FormatRange};
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeSection {
    /// The newest store format this node supports, below its build's: the
    /// node then behaves as a build of that format would (it refuses a
    /// store of a newer one and never switches the store to one). For the
    /// first step of an upgrade whose new build must not yet count as
    /// supporting the new format, and for tests of upgrades. Unset: every
    /// format the build knows. Also `--pin-store-format`.
    #[serde(default)]
    pub pin_store_format: Option<u32>,
}

impl UpgradeSection {
    /// The formats this node supports, its pin applied.
    pub fn formats(&self) -> Result<FormatRange, BadPin> {
        FormatRange::pinned(self.pin_store_format)
    }
}
