//! The chaos runner: starts a local mesh, kills and restarts nodes on a
//! randomized schedule, drops links, partitions and pauses nodes, records
//! every event, and checks at the end that nothing acknowledged was lost,
//! duplicated or left in an orphaned state. Load, the local mesh and the
//! end checks come from `meshmail-soak` (the arrow points chaos → soak).
//!
//! Architecture invariant: drives nodes only as processes and talks to them
//! only as a client (SMTP, IMAP, HTTP), never through internal APIs; sends
//! traffic only to loopback; every run is bounded in time and count.

pub mod attach;
pub mod clock_skew;
pub mod compare;
pub mod disk;
mod inject;
pub mod netns;
pub mod outbound;
mod prepare;
mod relay;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod schedule;
pub mod starve;
pub mod store_outage;
pub mod store_rig;
pub mod summary;
pub mod upgrade;
pub mod write_gap;
