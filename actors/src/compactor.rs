//! The compactor: background upkeep in bounded, resumable steps.
//!
//! Each tick does one step of each job, so no transaction is long and a
//! crash or restart resumes from the stored cursor instead of starting over:
//! - **change-log trim**: walks mailbox records (cursor `compact_mailboxes`),
//!   and for mailboxes of shards this node owns, drops change-log entries
//!   older than the newest `change_log_window` and raises the mailbox's
//!   change floor (QRESYNC below it needs a full resync). The trim
//!   transaction checks the shard's lease: only the owner compacts a shard.
//! - **blob orphan sweep** and **idempotency-marker expiry** are global, so
//!   only the owner of shard 0 runs them (one sweeper in a mesh).
//!
//! Expunged messages are removed (and their blob references released) in the
//! expunge transaction itself, so there is nothing left for it to purge.

use std::sync::Arc;
use std::time::Duration;

use meshmail_storage::ids::AccountId;
use meshmail_storage::model::mailboxes::Mailbox;
use meshmail_storage::model::{compaction, nodes, now_ms};
use meshmail_storage::{StorageError, Txn};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::live::LiveGuard;
use crate::node::NodeCtx;

#[derive(Debug, Clone, Copy)]
pub struct CompactorConfig {
    pub interval: Duration,
    /// Change-log entries kept per mailbox.
    pub change_log_window: u64,
    /// Mailbox records looked at per step.
    pub mailboxes_per_step: usize,
    /// Orphan blobs are deleted only when older than this.
    pub blob_grace: Duration,
    pub blobs_per_step: usize,
    /// Idempotency markers older than this are deleted.
    pub idempotency_ttl: Duration,
    pub markers_per_step: usize,
}

impl Default for CompactorConfig {
    fn default() -> Self {
        CompactorConfig {
            interval: Duration::from_secs(10),
            change_log_window: 10_000,
            mailboxes_per_step: 200,
            blob_grace: Duration::from_secs(3600),
            blobs_per_step: 1000,
            idempotency_ttl: Duration::from_secs(3600),
            markers_per_step: 1000,
        }
    }
}

/// What one step did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StepReport {
    pub mailboxes_seen: u64,
    pub changes_trimmed_mailboxes: u64,
    pub blobs_deleted: u64,
    pub markers_deleted: u64,
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum CompactorMsg {
    Tick,
}

pub struct Compactor;

pub struct CompactorArgs {
    pub ctx: Arc<NodeCtx>,
    pub config: CompactorConfig,
}

pub struct CompactorState {
    ctx: Arc<NodeCtx>,
    config: CompactorConfig,
    _live: LiveGuard,
}

impl Actor for Compactor {
    type Msg = CompactorMsg;
    type State = CompactorState;
    type Arguments = CompactorArgs;

    async fn pre_start(
        &self,
        me: ActorRef<CompactorMsg>,
        args: CompactorArgs,
    ) -> Result<CompactorState, ActorProcessingErr> {
        me.send_after(args.config.interval, || CompactorMsg::Tick);
        Ok(CompactorState {
            ctx: args.ctx,
            config: args.config,
            _live: LiveGuard::new("compactor"),
        })
    }

    async fn handle(
        &self,
        me: ActorRef<CompactorMsg>,
        msg: CompactorMsg,
        st: &mut CompactorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CompactorMsg::Tick => {
                match step(&st.ctx, &st.config).await {
                    Ok(r) => tracing::debug!(?r, "compaction step"),
                    // A failed step is retried at the next tick from the same cursor.
                    Err(e) => tracing::warn!(error = %e, "compaction step failed"),
                }
                me.send_after(st.config.interval, || CompactorMsg::Tick);
            }
        }
        Ok(())
    }
}

/// One bounded step of every job.
pub async fn step(ctx: &Arc<NodeCtx>, cfg: &CompactorConfig) -> Result<StepReport, StorageError> {
    let mut report = trim_change_logs(ctx, cfg).await?;
    if ctx.lease_epoch(0).is_some() {
        let sweep = ctx
            .blobs
            .sweep_step(&ctx.db, cfg.blob_grace, cfg.blobs_per_step)
            .await?;
        report.blobs_deleted = sweep.deleted;
        report.markers_deleted = expire_markers(ctx, cfg).await?;
    }
    metrics::counter!("meshmail_compactor_steps_total").increment(1);
    Ok(report)
}

async fn trim_change_logs(ctx: &Arc<NodeCtx>, cfg: &CompactorConfig) -> Result<StepReport, StorageError> {
    let limit = cfg.mailboxes_per_step;
    let page = ctx
        .db
        .read("compact_scan", move |txn| async move {
            compaction::mailbox_page(&txn, limit).await
        })
        .await?;
    let mut report = StepReport {
        mailboxes_seen: page.rows_read as u64,
        ..StepReport::default()
    };
    for (account, mb) in &page.mailboxes {
        if trim_one(ctx, cfg, *account, mb).await? {
            report.changes_trimmed_mailboxes += 1;
            metrics::counter!("meshmail_compactor_change_logs_trimmed_total").increment(1);
        }
    }
    let next = &page.next;
    ctx.db
        .run("compact_cursor", move |txn| async move {
            compaction::save_mailbox_walk(&txn, next)
        })
        .await?;
    Ok(report)
}

/// Trims one mailbox's change log if this node owns its shard.
async fn trim_one(
    ctx: &Arc<NodeCtx>,
    cfg: &CompactorConfig,
    account: AccountId,
    mb: &Mailbox,
) -> Result<bool, StorageError> {
    let shard = ctx.shard_of(account);
    let Some(epoch) = ctx.lease_epoch(shard) else {
        return Ok(false);
    };
    if mb.highest_modseq <= cfg.change_log_window {
        return Ok(false);
    }
    let cutoff = mb.highest_modseq - cfg.change_log_window;
    let (ctx2, mailbox) = (ctx.clone(), mb.id);
    ctx.db
        .run("compact_trim", move |txn: Txn| {
            let ctx = ctx2.clone();
            async move {
                let fenced =
                    nodes::check_lease(&txn, shard, &ctx.identity.name, ctx.identity.generation, epoch).await?;
                // Keep the modseqs above the cutoff: the newest `window` changes.
                compaction::trim_change_log(&fenced, account, mailbox, cutoff).await
            }
        })
        .await
}

/// Deletes idempotency markers older than the TTL (oldest first: UUIDv7 keys).
async fn expire_markers(ctx: &NodeCtx, cfg: &CompactorConfig) -> Result<u64, StorageError> {
    let cutoff = now_ms().saturating_sub(cfg.idempotency_ttl.as_millis() as u64);
    let limit = cfg.markers_per_step;
    ctx.db
        .run("compact_markers", move |txn| async move {
            compaction::expire_idempotency_markers(&txn, cutoff, limit).await
        })
        .await
}
