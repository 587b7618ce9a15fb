//! Carrying out one planned fault (see `schedule.rs`) on the running mesh,
//! and lifting network faults when their time is up. A fault that cannot
//! be injected right now (too many nodes down, its node not serving) is
//! recorded as `skipped`, so the report shows plan and execution side by side.

use std::time::{Duration, Instant};

use crate::runner::Run;
use crate::schedule::{FaultKind, Planned};

/// A fault of the shared store in progress.
pub(crate) enum StoreFault {
    Lock(crate::store_outage::StoreLock),
    Disk(crate::disk::DiskFault),
    /// These `fdbserver` processes are down (restarted at the heal).
    Fdb(Vec<usize>),
}

/// A store fault to lift at `until`, and the load's refusals before it.
pub(crate) struct StoreOutage {
    until: Instant,
    node: usize,
    kind: FaultKind,
    fault: StoreFault,
    refusals_before: u64,
}

impl Run {
    pub(crate) async fn inject(&mut self, p: &Planned, now: Instant, max_down: usize) -> anyhow::Result<()> {
        let guard = p.kind.isolates() && self.down(now) >= max_down;
        let target = if guard {
            None
        } else {
            self.pick_serving(now, p.node, p.pick)
        };
        let Some(i) = target else {
            let why = if guard {
                format!("{} nodes down already", self.down(now))
            } else {
                "no eligible node serving".into()
            };
            let i = p.node.unwrap_or(0);
            if p.kind == FaultKind::Upgrade {
                // Every node must be upgraded: try again shortly instead.
                self.record("upgrade_deferred", i, why);
                self.deferred.push((now + Duration::from_secs(2), p.clone()));
                return Ok(());
            }
            self.record(
                "skipped",
                i,
                format!("{} at {:.1} s ({}): {why}", p.kind.name(), p.t_s, p.source),
            );
            return Ok(());
        };
        match p.kind {
            FaultKind::Kill | FaultKind::Upgrade => {
                let at = Instant::now();
                self.h.kill(i).await?;
                self.kill_times.push((at, i, self.h.elapsed_s()));
                let delay = p.duration_s;
                if p.kind == FaultKind::Upgrade {
                    crate::upgrade::upgrade_slot(&mut self.h.mesh, i);
                    self.record(
                        "upgrade",
                        i,
                        format!("SIGKILL, restart in {delay:.1} s on the new build"),
                    );
                } else {
                    self.record("kill", i, format!("SIGKILL, restart in {delay:.1} s"));
                }
                self.set_view(i);
                self.restarts.push((now + Duration::from_secs_f64(delay), i, 0));
                self.poll_shards("kill", i, now);
            }
            FaultKind::LinkDrop => {
                if self
                    .post_fault(i, "/admin/faults/drop-links", "link_drop", String::new())
                    .await
                {
                    self.poll_links("link_drop", i, now);
                }
            }
            FaultKind::Partition => self.transport_partition(i, p.duration_s, now).await,
            FaultKind::Pause => {
                let d = p.duration_s;
                self.h.mesh.pause(i)?;
                self.record("pause", i, format!("SIGSTOP for {d:.1} s"));
                self.set_view(i);
                self.resumes.push((now + Duration::from_secs_f64(d), i));
            }
            FaultKind::Starve => self.starve(i, p.duration_s, now),
            FaultKind::StoreLock | FaultKind::StoreSlow | FaultKind::DiskFull | FaultKind::BlobReadonly => {
                self.store_fault(p, i, now).await
            }
            FaultKind::FdbKill | FaultKind::FdbOutage => self.fdb_fault(p, i, now).await,
            FaultKind::ClockJump => {
                let offset = p.offset_s.unwrap_or(0.0);
                self.clock_jump(i, offset, p.duration_s, now).await;
            }
            kind => self.inject_net(kind, p, i, now).await,
        }
        Ok(())
    }

    /// The load's refusals so far (4xx/5xx answers).
    fn refusals(&self) -> u64 {
        self.h.load.as_ref().map_or(0, |l| l.summary().counters.refused)
    }

    /// A fault of the shared store for `seconds` (every node is affected):
    /// its write lock held elsewhere, its disk full, its blob directory
    /// read-only. Recorded against node `i`.
    async fn store_fault(&mut self, p: &Planned, i: usize, now: Instant) {
        let (kind, seconds) = (p.kind, p.duration_s);
        let data = self.h.mesh.data_dir.clone();
        let disk = |d: crate::disk::DiskFault| (d.describe(), StoreFault::Disk(d));
        let fault = match kind {
            FaultKind::StoreLock => {
                let db = data.join("meshmail.sqlite");
                let what = format!("{} write-locked", db.display());
                crate::store_outage::lock(&db, seconds + 5.0)
                    .await
                    .map(|l| (what, StoreFault::Lock(l)))
            }
            FaultKind::StoreSlow => {
                let db = data.join("meshmail.sqlite");
                let hold = p.netem.delay_ms.unwrap_or(300.0);
                let what = format!("{} write-locked {hold} ms of every {} ms", db.display(), 2.0 * hold);
                crate::store_outage::slow(&db, seconds + 5.0, hold)
                    .await
                    .map(|l| (what, StoreFault::Lock(l)))
            }
            FaultKind::DiskFull => crate::disk::DiskFault::fill(&data).map(disk),
            _ => crate::disk::DiskFault::blob_readonly(&data.join("blobs")).map(disk),
        };
        match fault {
            Ok((what, fault)) => {
                self.record(kind.name(), i, format!("{what} for {seconds:.1} s"));
                self.store_faults.push(StoreOutage {
                    until: now + Duration::from_secs_f64(seconds),
                    node: i,
                    kind,
                    fault,
                    refusals_before: self.refusals(),
                });
            }
            Err(e) => self.record("fault_error", i, format!("{}: {e:#}", kind.name())),
        }
    }

    /// `fdb_kill`: one `fdbserver` of the run's cluster (drawn by the
    /// plan's pick) SIGKILLed; `fdb_outage`: all of them. Restarted at the
    /// heal. Recorded against node `i`: every node is affected.
    async fn fdb_fault(&mut self, p: &Planned, i: usize, now: Instant) {
        let Some(fdb) = self.fdb.clone() else {
            self.record(
                "fault_error",
                i,
                format!("{}: needs [store] kind = \"fdb\"", p.kind.name()),
            );
            return;
        };
        let mut cluster = fdb.lock().await;
        let n = cluster.processes();
        let down: Vec<usize> = if p.kind == FaultKind::FdbKill {
            vec![(p.pick % n as u64) as usize]
        } else {
            (0..n).collect()
        };
        for &k in &down {
            cluster.kill(k).await;
        }
        drop(cluster);
        let seconds = p.duration_s;
        self.record(
            p.kind.name(),
            i,
            format!("fdbserver {down:?} of {n} SIGKILLed for {seconds:.1} s"),
        );
        self.store_faults.push(StoreOutage {
            until: now + Duration::from_secs_f64(seconds),
            node: i,
            kind: p.kind,
            fault: StoreFault::Fdb(down),
            refusals_before: self.refusals(),
        });
    }

    /// CPU starvation of node `i` for `seconds`.
    fn starve(&mut self, i: usize, seconds: f64, now: Instant) {
        let Some(pid) = self.h.mesh.slots[i].pid else { return };
        match crate::starve::Starvation::start(pid) {
            Ok(s) => {
                let detail = format!(
                    "{} threads pinned to CPU 0 at nice 19 beside a spinner, for {seconds:.1} s",
                    s.threads()
                );
                self.record("starve", i, detail);
                self.starving.push((now + Duration::from_secs_f64(seconds), i, s));
            }
            Err(e) => self.record("fault_error", i, format!("starve: {e:#}")),
        }
    }

    /// The transport's partition endpoint: node `i` has no links for `seconds`.
    async fn fdb_restart(&self, down: &[usize]) -> anyhow::Result<()> {
        let Some(fdb) = &self.fdb else { return Ok(()) };
        let mut cluster = fdb.lock().await;
        for &k in down {
            cluster.restart(k)?;
        }
        Ok(())
    }

    async fn transport_partition(&mut self, i: usize, seconds: f64, now: Instant) {
        let ms = (seconds * 1000.0) as u64;
        let path = format!("/admin/faults/partition?ms={ms}");
        if self.post_fault(i, &path, "partition", format!("{ms} ms")).await {
            let heal = now + Duration::from_millis(ms);
            self.isolated_until[i] = Some(heal);
            self.poll_links("partition", i, heal);
        }
    }

    /// A namespace fault on node `i` for `p.duration_s`.
    async fn inject_net(&mut self, kind: FaultKind, p: &Planned, i: usize, now: Instant) {
        let Some(net) = self.netns.as_ref() else {
            // No namespaces here: a partition (one-way or not) becomes the
            // transport's partition; shaping has no fallback.
            if matches!(kind, FaultKind::NetnsPartition | FaultKind::NetnsOneway) && self.transport_fallback {
                self.transport_partition(i, p.duration_s, now).await;
                return;
            }
            self.record(
                "skipped",
                i,
                format!("{}: no network namespaces in this run", kind.name()),
            );
            return;
        };
        let applied = net.apply(kind, i, &p.netem).await;
        match applied {
            Ok(detail) => {
                let until = now + Duration::from_secs_f64(p.duration_s);
                self.record(kind.name(), i, format!("{detail} for {:.1} s", p.duration_s));
                if kind.isolates() {
                    self.isolated_until[i] = Some(until);
                }
                self.heals.push((until, i, kind));
            }
            Err(e) => self.record("fault_error", i, format!("{}: {e:#}", kind.name())),
        }
    }

    /// Lifts the network faults whose time is up and measures their recovery.
    pub(crate) async fn heal_due(&mut self, now: Instant) {
        self.clock_jumps_due(now).await;
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.store_faults)
            .into_iter()
            .partition(|x| x.until <= now);
        self.store_faults = keep;
        for o in due {
            let ended = match o.fault {
                StoreFault::Lock(l) => {
                    l.end().await;
                    Ok(())
                }
                StoreFault::Disk(d) => d.end(),
                StoreFault::Fdb(down) => self.fdb_restart(&down).await,
            };
            let name = o.kind.name();
            if let Err(e) = ended {
                self.record("fault_error", o.node, format!("{name} heal: {e:#}"));
            }
            let refused = self.refusals().saturating_sub(o.refusals_before);
            *self.outage_refusals.entry(name).or_default() += refused;
            self.record("heal", o.node, format!("{name}: {refused} SMTP refusals during it"));
            self.poll_shards(name, o.node, Instant::now());
        }
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.starving).into_iter().partition(|x| x.0 <= now);
        self.starving = keep;
        for (_, i, s) in due {
            s.end();
            self.record("heal", i, "starve".into());
            self.poll_links("starve", i, Instant::now());
        }
        let due: Vec<_> = self.heals.iter().copied().filter(|x| x.0 <= now).collect();
        self.heals.retain(|x| x.0 > now);
        for (_, i, kind) in due {
            let Some(net) = self.netns.as_ref() else { continue };
            let healed = net.heal(i).await;
            match healed {
                Ok(()) => {
                    self.record("heal", i, kind.name().into());
                    self.poll_links(kind.name(), i, Instant::now());
                }
                Err(e) => self.record("fault_error", i, format!("heal: {e:#}")),
            }
        }
    }
}
