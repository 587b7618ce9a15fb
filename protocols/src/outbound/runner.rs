//! The queue runner: an [`OutboundSupervisor`] keeps one [`QueueRunner`]
//! alive (restarts within a [`RestartBudget`]); the runner scans, every
//! `scan_interval` unless the store's queued count is 0 (see
//! [`EMPTY_SKIPS_MAX`]), the due index of each shard this node holds the
//! lease of, claims due items (a transaction per shard that checks the lease, so
//! two nodes never both claim an item under valid leases), groups them by
//! destination and message, and starts one delivery task per destination
//! chunk (at most `per_destination_max` at once per domain).
//!
//! Bounded everywhere: at most `in_flight_max` items in flight per node,
//! `due_per_shard_max` read per shard per scan, 256 shards per read
//! transaction.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use meshmail_actors::live::LiveGuard;
use meshmail_actors::restart::RestartBudget;
use meshmail_storage::StorageError;
use meshmail_storage::model::now_ms;
use meshmail_storage::model::outbound::{self, Fence, OutboundItem};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::deliver::{Job, Message, deliver_job};
use super::{InFlight, Outbound};

/// Shards read per scan transaction (each a short range read).
const SHARDS_PER_SCAN_TXN: usize = 256;
/// Claims of a taken-over shard looked at per scan.
const CLAIMS_PER_SHARD_MAX: usize = 1000;
/// Scans in a row skipped because the store's queued count is 0, at most.
/// A node reading the due index of its 1,024 shards every second spent
/// ~32 ms a second on it with nothing queued (~70 % of an idle node's
/// CPU, more under load) and held read snapshots of ~35 ms that postpone
/// the WAL's restart. The count is kept by the transactions that queue and
/// remove items; the full scan every this many ticks means that a count
/// that ever disagreed with the queue (a bug, a store edited by hand)
/// delays mail by a minute, never for good.
const EMPTY_SKIPS_MAX: u32 = 60;

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum RunnerMsg {
    Tick,
}

pub struct QueueRunner;

pub struct RunnerState {
    o: Arc<Outbound>,
    /// Scans skipped in a row (see [`EMPTY_SKIPS_MAX`]).
    skipped: u32,
    _live: LiveGuard,
}

impl Actor for QueueRunner {
    type Msg = RunnerMsg;
    type State = RunnerState;
    type Arguments = Arc<Outbound>;

    async fn pre_start(&self, me: ActorRef<RunnerMsg>, o: Arc<Outbound>) -> Result<RunnerState, ActorProcessingErr> {
        me.send_after(o.config.scan_interval, || RunnerMsg::Tick);
        Ok(RunnerState {
            o,
            skipped: 0,
            _live: LiveGuard::new("outbound_runner"),
        })
    }

    async fn handle(
        &self,
        me: ActorRef<RunnerMsg>,
        msg: RunnerMsg,
        st: &mut RunnerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RunnerMsg::Tick => {
                let started = std::time::Instant::now();
                match scan(&st.o, st.skipped < EMPTY_SKIPS_MAX).await {
                    Ok(Scan::Skipped) => st.skipped += 1,
                    Ok(Scan::Claimed(n)) => {
                        st.skipped = 0;
                        if n > 0 {
                            tracing::debug!(claimed = n, "outbound scan");
                        }
                    }
                    // Retried at the next tick; claims already taken stand.
                    Err(e) => tracing::warn!(error = %e, "outbound scan failed"),
                }
                st.o.pool.sweep(st.o.config.connection_idle_timeout);
                metrics::histogram!("meshmail_outbound_scan_seconds").record(started.elapsed().as_secs_f64());
                me.send_after(st.o.config.scan_interval, || RunnerMsg::Tick);
            }
        }
        Ok(())
    }
}

/// What one tick's scan did.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// Nothing is queued in the whole store: no shard was read.
    Skipped,
    /// The due index was read; this many items were claimed and started.
    Claimed(usize),
}

/// One scan. With `may_skip`, a store whose queued count is 0 is not
/// scanned (see [`EMPTY_SKIPS_MAX`]).
pub async fn scan(o: &Arc<Outbound>, may_skip: bool) -> Result<Scan, StorageError> {
    let queued = queued_count(o).await;
    update_depth_gauges(o, queued);
    if may_skip && queued.is_some_and(|n| n <= 0) {
        metrics::counter!("meshmail_outbound_scans_total", "result" => "skipped").increment(1);
        return Ok(Scan::Skipped);
    }
    metrics::counter!("meshmail_outbound_scans_total", "result" => "read").increment(1);
    let budget = o.config.in_flight_max.saturating_sub(o.in_flight());
    if budget == 0 {
        return Ok(Scan::Claimed(0));
    }
    let now = now_ms();
    let (candidates, found) = due_candidates(o, budget, now).await?;
    metrics::gauge!("meshmail_outbound_items", "state" => "due").set(found as f64);
    let mut claimed: Vec<(Fence, OutboundItem, InFlight)> = Vec::new();
    let until = now + o.config.claim_timeout.as_millis() as u64;
    for (shard, (epoch, ids)) in candidates {
        claimed.extend(claim_shard(o, shard, epoch, &ids, (now, until)).await);
    }
    let n = claimed.len();
    dispatch(o, claimed);
    Ok(Scan::Claimed(n))
}

/// Due items (by shard, with the lease epoch they were read under) of the
/// shards this node serves, at most `budget` not already in flight here;
/// also their count.
async fn due_candidates(
    o: &Arc<Outbound>,
    budget: usize,
    now: u64,
) -> Result<(BTreeMap<u32, (u64, Vec<[u8; 16]>)>, usize), StorageError> {
    let ctx = &o.ctx;
    let owned: Vec<(u32, u64)> = (0..ctx.shard_count)
        .filter(|s| ctx.serves(*s))
        .filter_map(|s| ctx.lease_epoch(s).map(|e| (s, e)))
        .collect();
    let mut candidates: BTreeMap<u32, (u64, Vec<[u8; 16]>)> = BTreeMap::new();
    let mut found = 0usize;
    for chunk in owned.chunks(SHARDS_PER_SCAN_TXN) {
        for (shard, epoch, mut ids) in read_due(o, chunk, now).await? {
            ids.sort();
            ids.dedup();
            ids.retain(|id| !o.is_in_flight(id));
            ids.truncate(budget - found);
            found += ids.len();
            if !ids.is_empty() {
                candidates.insert(shard, (epoch, ids));
            }
            if found >= budget {
                break;
            }
        }
        if found >= budget {
            break;
        }
    }
    Ok((candidates, found))
}

/// One read of the due items of `chunk`'s shards (each with its lease
/// epoch). A shard whose epoch this node has not scanned yet has its
/// claimed items read too: claims of a previous owner are ours to finish.
async fn read_due(
    o: &Arc<Outbound>,
    chunk: &[(u32, u64)],
    now: u64,
) -> Result<Vec<(u32, u64, Vec<[u8; 16]>)>, StorageError> {
    let per_shard = o.config.due_per_shard_max.max(1);
    let rescan: Vec<(u32, u64, bool)> = {
        let seen = o.seen_epochs.lock().expect("seen_epochs");
        chunk.iter().map(|&(s, e)| (s, e, seen.get(&s) != Some(&e))).collect()
    };
    let r = rescan.clone();
    let rows: Vec<(u32, u64, Vec<[u8; 16]>)> = o
        .ctx
        .db
        .read("outbound_scan", move |txn| {
            let r = r.clone();
            async move {
                let mut out = Vec::new();
                for (shard, epoch, claims_too) in r {
                    let mut ids = outbound::due(&txn, shard, now, per_shard).await?;
                    if claims_too {
                        ids.extend(outbound::claimed(&txn, shard, CLAIMS_PER_SHARD_MAX).await?);
                    }
                    if !ids.is_empty() {
                        out.push((shard, epoch, ids));
                    }
                }
                Ok::<_, StorageError>(out)
            }
        })
        .await?;
    let mut seen = o.seen_epochs.lock().expect("seen_epochs");
    for (s, e, _) in &rescan {
        seen.insert(*s, *e);
    }
    Ok(rows)
}

/// Claims `ids` of `shard` under this node's fence at `epoch`, claims
/// lasting from `now` to `until`; returns the items claimed with their
/// in-flight guards. A refused claim (the lease moved, or the store
/// failed) claims nothing: the items stay due for whoever owns the shard.
async fn claim_shard(
    o: &Arc<Outbound>,
    shard: u32,
    epoch: u64,
    ids: &[[u8; 16]],
    (now, until): (u64, u64),
) -> Vec<(Fence, OutboundItem, InFlight)> {
    let ctx = &o.ctx;
    let fence = Fence {
        node: ctx.identity.name.clone(),
        generation: ctx.identity.generation,
        epoch,
    };
    // Registered before the claim commits, so a concurrent scan of
    // this node cannot start the same item twice.
    let guards: Vec<InFlight> = ids.iter().filter_map(|id| o.enter(*id, shard)).collect();
    if guards.is_empty() {
        return Vec::new();
    }
    let ids: Vec<[u8; 16]> = guards.iter().map(|g| g.id).collect();
    let f = fence.clone();
    let got = ctx
        .db
        .run("outbound_claim", move |txn| {
            let (f, ids) = (f.clone(), ids.clone());
            async move {
                let mut got = Vec::new();
                for id in ids {
                    if let Some(item) = outbound::claim(&txn, &id, &f, now, until).await? {
                        got.push(item);
                    }
                }
                Ok::<_, StorageError>(got)
            }
        })
        .await;
    match got {
        Ok(items) => {
            let mut guards: HashMap<[u8; 16], InFlight> = guards.into_iter().map(|g| (g.id, g)).collect();
            items
                .into_iter()
                .filter_map(|item| guards.remove(&item.id).map(|g| (fence.clone(), item, g)))
                .collect()
        }
        Err(e) => {
            tracing::debug!(shard, error = %e, "outbound claim refused");
            Vec::new()
        }
    }
}

/// Groups claimed items by destination domain and, within it, by message
/// (same sender, body and envelope options: one SMTP transaction), then
/// spreads each domain's messages over at most `per_destination_max`
/// tasks, each reusing one connection for its share.
fn dispatch(o: &Arc<Outbound>, claimed: Vec<(Fence, OutboundItem, InFlight)>) {
    type MsgKey = (String, String, bool, bool, bool, String);
    let mut by_domain: BTreeMap<String, BTreeMap<MsgKey, Message>> = BTreeMap::new();
    for (fence, item, guard) in claimed {
        let domain = item.recipient_domain().to_ascii_lowercase();
        let key: MsgKey = (
            item.sender.clone(),
            item.body.hash.clone(),
            item.smtputf8,
            item.eight_bit,
            item.require_tls,
            format!("{:?}{:?}", item.dsn.ret, item.dsn.envid),
        );
        by_domain
            .entry(domain)
            .or_default()
            .entry(key)
            .or_insert_with(|| Message { items: Vec::new() })
            .items
            .push((fence, item, guard));
    }
    for (domain, messages) in by_domain {
        let messages: Vec<Message> = messages.into_values().collect();
        let tasks = messages.len().min(o.config.per_destination_max.max(1));
        let mut chunks: Vec<Vec<Message>> = (0..tasks).map(|_| Vec::new()).collect();
        for (i, m) in messages.into_iter().enumerate() {
            chunks[i % tasks].push(m);
        }
        for messages in chunks {
            let job = Job {
                domain: domain.clone(),
                messages,
            };
            let o = o.clone();
            let sem = o.destination(&domain);
            tokio::spawn(async move {
                // The per-destination cap: waits here, claim held.
                let Ok(_permit) = sem.acquire_owned().await else { return };
                deliver_job(&o, job).await;
            });
        }
    }
}

/// The store-wide queued count (None: it could not be read).
async fn queued_count(o: &Arc<Outbound>) -> Option<i64> {
    o.ctx
        .db
        .read("outbound_count", |txn| async move { outbound::count(&txn).await })
        .await
        .ok()
}

fn update_depth_gauges(o: &Arc<Outbound>, queued: Option<i64>) {
    metrics::gauge!("meshmail_outbound_items", "state" => "in_flight").set(o.in_flight() as f64);
    // The store-wide count is reported by one node only (the owner of
    // shard 0), so a sum over nodes stays right.
    if o.ctx.serves(0)
        && let Some(n) = queued
    {
        metrics::gauge!("meshmail_outbound_items", "state" => "queued").set(n as f64);
    }
}

/// Keeps one [`QueueRunner`] running.
pub struct OutboundSupervisor;

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum SupervisorMsg {}

pub struct SupervisorState {
    o: Arc<Outbound>,
    budget: RestartBudget,
    _live: LiveGuard,
}

impl Actor for OutboundSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<Outbound>;

    async fn pre_start(
        &self,
        me: ActorRef<SupervisorMsg>,
        o: Arc<Outbound>,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        Actor::spawn_linked(None, QueueRunner, o.clone(), me.get_cell()).await?;
        Ok(SupervisorState {
            o,
            budget: RestartBudget::default(),
            _live: LiveGuard::new("outbound_supervisor"),
        })
    }

    async fn handle_supervisor_evt(
        &self,
        me: ActorRef<SupervisorMsg>,
        evt: SupervisionEvent,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match evt {
            SupervisionEvent::ActorFailed(_, why) => {
                tracing::error!(error = %why, "outbound runner failed; restarting");
            }
            SupervisionEvent::ActorTerminated(_, _, reason) => {
                tracing::warn!(?reason, "outbound runner stopped; restarting");
            }
            // Started, process-group changes: nothing to do (and, unlike
            // ractor's default, never a reason to stop).
            _ => return Ok(()),
        }
        metrics::counter!("meshmail_actor_restarts_total", "kind" => "outbound_runner").increment(1);
        if !st.budget.allow() {
            return Err("outbound runner keeps failing: restart budget spent".into());
        }
        Actor::spawn_linked(None, QueueRunner, st.o.clone(), me.get_cell()).await?;
        Ok(())
    }
}

/// Starts the supervisor (and so the runner) for this node; the handle
/// ends when the supervisor stops (its restart budget spent), which the
/// node treats as fatal.
pub async fn start(
    o: Arc<Outbound>,
) -> Result<(ActorRef<SupervisorMsg>, tokio::task::JoinHandle<()>), ActorProcessingErr> {
    Ok(Actor::spawn(None, OutboundSupervisor, o).await?)
}
