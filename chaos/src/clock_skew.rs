//! A clock jump of one node (`fault = "clock_jump"`, `offset_s`): through
//! the node's fault endpoint its wall clock reads `offset_s` off (every
//! wall-time read of its data model goes through `meshmail_storage::clock`),
//! and the node is cut off from the mesh (the transport's partition) for
//! `duration_s`, longer than its peers' `dead_after_ms`, so they take its
//! shards over with higher lease epochs while its clock and its lease
//! cache still say it holds them.
//!
//! Checked when the fault ends: the node tries to commit a write under a
//! lease it held before the jump (`/admin/faults/fence-probe` with that
//! shard and epoch) once a peer's lease scan shows the shard has moved on;
//! the store must refuse it (`clock_skew_stale_commits` = 0, and at least
//! one such refusal so the check cannot pass unexercised). The node's own
//! `meshmail_lease_fenced_total` growth during the jump (the load's writes
//! it was refused too) is reported beside it, and the golden check (0
//! lost, 0 duplicated) runs at the end as always.

use std::time::{Duration, Instant};

use serde::Serialize;

use meshmail_soak::checks::Check;

use crate::runner::Run;

/// One clock jump in progress.
pub(crate) struct Jump {
    pub(crate) until: Instant,
    pub(crate) node: usize,
    /// (shard, epoch) the node held when its clock jumped.
    lease: Option<(u32, u64)>,
    fenced_before: u64,
}

/// What the clock jumps of a run showed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SkewFindings {
    /// Writes under a lost lease the store refused.
    pub fenced_probes: u64,
    /// Writes under a lost lease that committed: fencing broken under skew.
    pub stale_commits: u64,
    /// Jumps whose lease had not moved on when they ended (nothing to probe).
    pub unproven: u64,
    /// Growth of the skewed nodes' `meshmail_lease_fenced_total` during the jumps.
    pub fenced_commits: u64,
}

const HTTP_TIMEOUT: Duration = Duration::from_secs(3);

/// Sum of a counter's samples in a node's `/metrics` (None: no answer).
async fn counter(http: &str, name: &str) -> Option<u64> {
    let body = meshmail_soak::http::get(http, "/metrics", HTTP_TIMEOUT).await.ok()?;
    Some(
        body.lines()
            .filter(|l| l.split(['{', ' ']).next() == Some(name))
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum::<f64>() as u64,
    )
}

/// The leases in a node's `/status` lease scan: (shard, owner, epoch).
async fn leases(http: &str) -> Option<Vec<(u32, String, u64)>> {
    let body = meshmail_soak::http::get(http, "/status", HTTP_TIMEOUT).await.ok()?;
    let st: meshmail_mesh::status::NodeStatus = serde_json::from_str(&body).ok()?;
    Some(st.leases.into_iter().map(|l| (l.shard, l.node, l.epoch)).collect())
}

impl Run {
    /// Starts a clock jump of node `i`: skew, then partition for `seconds`.
    pub(crate) async fn clock_jump(&mut self, i: usize, offset_s: f64, seconds: f64, now: Instant) {
        let s = &self.h.mesh.slots[i];
        let (http, name) = (s.addrs.http.clone(), s.addrs.name.clone());
        let lease = leases(&http)
            .await
            .and_then(|ls| ls.into_iter().find(|l| l.1 == name).map(|l| (l.0, l.2)));
        let fenced_before = counter(&http, "meshmail_lease_fenced_total").await.unwrap_or(0);
        let offset = offset_s.round() as i64;
        let path = format!("/admin/faults/clock-jump?offset_s={offset}");
        if let Err(e) = meshmail_soak::http::post(&http, &path, HTTP_TIMEOUT).await {
            self.record("fault_error", i, format!("{path}: {e}"));
            return;
        }
        let ms = (seconds * 1000.0) as u64;
        let path = format!("/admin/faults/partition?ms={ms}");
        if let Err(e) = meshmail_soak::http::post(&http, &path, HTTP_TIMEOUT).await {
            self.record("fault_error", i, format!("{path}: {e}"));
            let _ = meshmail_soak::http::post(&http, "/admin/faults/clock-jump?offset_s=0", HTTP_TIMEOUT).await;
            return;
        }
        let held = lease.map_or("no lease held".into(), |(s, e)| {
            format!("holding shard {s} at epoch {e}")
        });
        self.record(
            "clock_jump",
            i,
            format!("clock {offset:+} s, partitioned {ms} ms, {held}"),
        );
        let until = now + Duration::from_millis(ms);
        self.isolated_until[i] = Some(until);
        self.clock_jumps.push(Jump {
            until,
            node: i,
            lease,
            fenced_before,
        });
    }

    /// Ends the clock jumps whose time is up: the stale-lease probe, the
    /// fenced-commit count, the clock set right, the link recovery.
    pub(crate) async fn clock_jumps_due(&mut self, now: Instant) {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.clock_jumps)
            .into_iter()
            .partition(|j| j.until <= now);
        self.clock_jumps = keep;
        for j in due {
            let i = j.node;
            let s = &self.h.mesh.slots[i];
            if !s.is_running() {
                self.record("heal", i, "clock_jump: the node is gone (not probed)".into());
                self.skew.unproven += 1;
                continue;
            }
            let (http, name) = (s.addrs.http.clone(), s.addrs.name.clone());
            let detail = match j.lease {
                Some((shard, epoch)) => self.probe_stale(i, &http, &name, shard, epoch).await,
                None => {
                    self.skew.unproven += 1;
                    "held no lease: nothing to probe".into()
                }
            };
            if let Some(after) = counter(&http, "meshmail_lease_fenced_total").await {
                let grew = after.saturating_sub(j.fenced_before);
                self.skew.fenced_commits += grew;
                self.record(
                    "heal",
                    i,
                    format!("clock_jump: {detail}; {grew} fenced commits during it"),
                );
            }
            if let Err(e) = meshmail_soak::http::post(&http, "/admin/faults/clock-jump?offset_s=0", HTTP_TIMEOUT).await
            {
                self.record("fault_error", i, format!("clock-jump reset: {e}"));
            }
            self.poll_links("clock_jump", i, Instant::now());
        }
    }

    /// Once a peer sees `shard` past `epoch`, node `i` writes under `epoch`.
    async fn probe_stale(&mut self, i: usize, http: &str, name: &str, shard: u32, epoch: u64) -> String {
        let peers: Vec<String> = (0..self.h.mesh.slots.len())
            .filter(|&k| k != i && self.h.mesh.slots[k].is_running() && !self.h.mesh.slots[k].paused)
            .map(|k| self.h.mesh.slots[k].addrs.http.clone())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut moved = None;
        while moved.is_none() && Instant::now() < deadline {
            for p in &peers {
                if let Some(l) = leases(p).await.and_then(|ls| ls.into_iter().find(|l| l.0 == shard))
                    && (l.1 != name || l.2 > epoch)
                {
                    moved = Some(l);
                    break;
                }
            }
            if moved.is_none() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let Some((_, owner, now_epoch)) = moved else {
            self.skew.unproven += 1;
            return format!("shard {shard} did not move on from epoch {epoch}: not probed");
        };
        let path = format!("/admin/faults/fence-probe?shard={shard}&epoch={epoch}");
        match meshmail_soak::http::post(http, &path, HTTP_TIMEOUT).await {
            Ok(_) => {
                self.skew.stale_commits += 1;
                format!("STALE WRITE COMMITTED: shard {shard} epoch {epoch} (now {owner} epoch {now_epoch})")
            }
            Err(meshmail_soak::http::HttpError::Status { status: 409, .. }) => {
                self.skew.fenced_probes += 1;
                format!("write under shard {shard} epoch {epoch} refused (now {owner} epoch {now_epoch})")
            }
            Err(e) => {
                self.record("fault_error", i, format!("{path}: {e}"));
                self.skew.unproven += 1;
                format!("probe failed: {e}")
            }
        }
    }
}

/// The end checks of a run with clock jumps.
pub fn checks(f: &SkewFindings) -> Vec<Check> {
    vec![
        Check::zero(
            "clock_skew_stale_commits",
            f.stale_commits,
            "writes under a lost lease that committed on a skewed node",
        ),
        Check::at_least("clock_skew_fenced_probes", f.fenced_probes, 1),
        Check::info(
            "clock_skew_fenced_commits",
            f.fenced_commits,
            "commits the skewed nodes' store fence refused during the jumps",
        ),
        Check::info("clock_skew_unproven", f.unproven, "jumps with no moved lease to probe"),
    ]
}
