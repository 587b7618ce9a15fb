//! Wiring of the mesh into a node: the QUIC endpoint and ractor cluster
//! (when `[mesh] listen` is set), the control loop that places shards, and
//! the three seams between the mesh and the actors:
//! - [`Host`]: the mesh grants, drains and revokes shard leases on the
//!   node's actors;
//! - [`Router`]: the actors reach shards owned by other nodes through the
//!   owners' gateways;
//! - [`Gateway`]: requests from other nodes are served by this node's
//!   actors.
//!
//! Wire format between nodes: JSON of `meshmail_actors::remote::{Request,
//! Reply}`; casts are tagged `A:` (membership announcements) or `H:`
//! (change hints).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use meshmail_actors::delivery::{DeliveryError, Outcome};
use meshmail_actors::mailbox_ops::{MailboxOp, OpResult};
use meshmail_actors::node::NodeCtx;
use meshmail_actors::op_error::OpError;
use meshmail_actors::remote::{self, Reply, Request, Route, ShardRouter, WireDelivery, WireHint};
use meshmail_actors::shard::ChangeHint;
use meshmail_mesh::backoff::BackoffConfig;
use meshmail_mesh::cluster::{Cluster, GatewayHandler};
use meshmail_mesh::leases::Incarnation;
use meshmail_mesh::membership::MembershipConfig;
use meshmail_mesh::runtime::{ANNOUNCE_TAG, Announce, MeshRuntime, RuntimeConfig, Seed, ShardHost};
use meshmail_mesh::{MeshConfig, MeshEndpoint, NodeCredentials, NodeId};
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::nodes::Lease;

use crate::config::Config;
use crate::vitals::Vitals;

const HINT_TAG: &[u8] = b"H:";
/// A remote delivery waits this long for the owner's commit.
const REMOTE_DELIVERY_TIMEOUT: Duration = Duration::from_secs(35);
/// How often a forwarded request looks whether its target was declared
/// dead (membership publishes its view every round).
const PEER_GONE_POLL: Duration = Duration::from_millis(50);
const REMOTE_OP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a node renews its watches on the owners of watched accounts.
const WATCH_RENEW: Duration = Duration::from_secs(2);

/// Starts the mesh of this node. Returns once the first lease round ran
/// (so "ready" means the node serves what placement gives it), or after
/// `READY_MAX` if the mesh is slow to settle.
pub async fn start(cfg: &Config, ctx: &Arc<NodeCtx>, vitals: &mut Vitals) -> anyhow::Result<MeshRuntime> {
    let me = Incarnation::new(ctx.identity.name.clone(), ctx.identity.generation);
    let m = &cfg.mesh;
    let seeds = m
        .seeds
        .iter()
        .map(|s| s.parse::<Seed>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Ranges and cross-field rules (dead_after_ms >= 3 x keep_alive_ms, ...)
    // were checked by `Config::validate()`.
    let config = RuntimeConfig {
        seeds,
        advertise: m.advertise.or(m.listen),
        membership: MembershipConfig::new(
            Duration::from_millis(m.suspect_after_ms),
            Duration::from_millis(m.dead_after_ms),
            BackoffConfig::new(
                Duration::from_millis(m.redial_min_ms),
                Duration::from_millis(m.redial_max_ms),
            ),
        ),
        moves_per_round: m.moves_per_round,
        drain_deadline: Duration::from_millis(m.drain_deadline_ms),
        ..RuntimeConfig::default()
    };
    let host = Arc::new(Host(ctx.clone()));
    let (endpoint, ca_pem) = match m.listen {
        None => (None, Vec::new()),
        Some(bind) => {
            let dir = m.cluster_dir.clone().unwrap_or_else(|| cfg.data_dir.join("cluster"));
            let id = NodeId::new(ctx.identity.name.clone()).context("the node name is not a valid mesh node id")?;
            let creds = NodeCredentials::load(&dir, &id).with_context(|| {
                format!(
                    "loading the mesh certificate of {id} from {} (create it with `meshmail cluster init` \
                     and `meshmail cluster cert {id}`)",
                    dir.display()
                )
            })?;
            let ca_pem = std::fs::read(dir.join(meshmail_mesh::ca::CA_CERT_FILE))?;
            let mut mc = MeshConfig::new(bind, ctx.identity.generation);
            mc.keep_alive = Duration::from_millis(m.keep_alive_ms);
            mc.idle_timeout = Duration::from_millis(m.idle_timeout_ms);
            let endpoint = MeshEndpoint::bind(&creds, mc).with_context(|| format!("binding the mesh on {bind}"))?;
            (Some(endpoint), ca_pem)
        }
    };
    let mut config = config;
    if config
        .advertise
        .is_none_or(|a| a.port() == 0 || a.ip().is_unspecified())
        && let Some(e) = &endpoint
    {
        // Bound to port 0 (tests) or a wildcard: advertise what we got.
        let bound = e.local_addr()?;
        config.advertise = Some(match config.advertise {
            Some(a) if !a.ip().is_unspecified() => std::net::SocketAddr::new(a.ip(), bound.port()),
            _ => bound,
        });
    }
    let runtime = MeshRuntime::new(ctx.db.clone(), me, ctx.shard_count, endpoint.clone(), host, config);
    if let Some(endpoint) = &endpoint {
        let gateway = Arc::new(Gateway {
            ctx: ctx.clone(),
            runtime: runtime.clone(),
        });
        let cluster = Cluster::start(endpoint, &ca_pem, gateway).await?;
        runtime.set_cluster(cluster.clone());
        ctx.set_router(Arc::new(Router {
            runtime: runtime.clone(),
            cluster,
            me: ctx.identity.name.clone(),
        }));
        vitals.watch("mesh acceptor", endpoint.spawn_acceptor());
        vitals.watch(
            "lease renewal watch",
            tokio::spawn(renew_watches(ctx.clone(), runtime.clone())),
        );
    }
    vitals.watch("mesh runtime", runtime.spawn());
    const READY_MAX: Duration = Duration::from_secs(30);
    let started = Instant::now();
    while !runtime.converged() && started.elapsed() < READY_MAX {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(runtime)
}

/// The mesh's hold on the node's actors.
struct Host(Arc<NodeCtx>);

#[async_trait]
impl ShardHost for Host {
    async fn grant(&self, lease: &Lease) {
        self.0.grant(lease.shard, lease.epoch);
    }

    async fn drain(&self, shard: u32) {
        self.0.drain(shard).await;
    }

    fn revoke(&self, shard: u32) {
        self.0.revoke(shard);
    }
}

/// The actors' way to other nodes' shards.
struct Router {
    runtime: MeshRuntime,
    cluster: Cluster,
    me: String,
}

/// Why a request could not go to (or come back from) a shard's owner.
/// Each is retried by the caller (`Route::Retry`), on the new owner once
/// the mesh has one.
#[derive(Debug, thiserror::Error)]
enum RemoteError {
    #[error("shard {0} has no owner yet")]
    NoOwner(u32),
    #[error("shard {0} is moving")]
    Moving(u32),
    #[error("request not encoded: {0}")]
    Encode(serde_json::Error),
    #[error(transparent)]
    Call(#[from] meshmail_mesh::MeshError),
    #[error("{node}#{generation} was declared dead while the request waited")]
    Gone { node: String, generation: u64 },
    #[error("malformed reply from {node}: {source}")]
    Malformed { node: String, source: serde_json::Error },
}

impl Router {
    /// The owner of `shard` to send to, or why there is none now.
    fn target(&self, shard: u32) -> Result<(String, u64), RemoteError> {
        match self.runtime.owner(shard) {
            None => {
                self.runtime.refresh_soon();
                Err(RemoteError::NoOwner(shard))
            }
            Some(l) if l.node == self.me => {
                // Ours in the store but not (yet, or no longer) served here.
                self.runtime.refresh_soon();
                Err(RemoteError::Moving(shard))
            }
            Some(l) => Ok((l.node, l.generation)),
        }
    }

    /// Sends `req` to incarnation (`node`, `generation`) and waits for its
    /// answer at most `timeout`, or until membership declares that
    /// incarnation dead or superseded: a request to a node that died must
    /// fail over after the failure detector's `dead_after` (1 s), not wait
    /// for the dead QUIC connection's idle timeout (4 s).
    async fn send(&self, node: &str, generation: u64, req: &Request, timeout: Duration) -> Result<Reply, RemoteError> {
        let body = serde_json::to_vec(req).map_err(RemoteError::Encode)?;
        let call = self.cluster.call(node, generation, body, timeout);
        let gone = async {
            while !self.runtime.peer_gone(node, generation) {
                tokio::time::sleep(PEER_GONE_POLL).await;
            }
        };
        let answer = tokio::select! {
            answer = call => answer?,
            () = gone => {
                metrics::counter!("meshmail_remote_abandoned_total").increment(1);
                return Err(RemoteError::Gone { node: node.into(), generation });
            }
        };
        serde_json::from_slice(&answer).map_err(|source| RemoteError::Malformed {
            node: node.into(),
            source,
        })
    }
}

#[async_trait]
impl ShardRouter for Router {
    async fn deliver(&self, shard: u32, req: WireDelivery) -> Route<Result<Outcome, DeliveryError>> {
        let (node, generation) = match self.target(shard) {
            Ok(t) => t,
            Err(why) => return Route::Retry(why.to_string()),
        };
        let started = Instant::now();
        // Never past the delivery's own deadline (the client's patience:
        // `[smtp] delivery_timeout_s`), plus a moment for the answer.
        let timeout = match req.deadline_in_ms {
            0 => REMOTE_DELIVERY_TIMEOUT,
            ms => (Duration::from_millis(ms) + Duration::from_millis(500)).min(REMOTE_DELIVERY_TIMEOUT),
        };
        // Deliveries are idempotent by acceptance id: any failure may retry.
        let result = self
            .send(&node, generation, &Request::Deliver { shard, req }, timeout)
            .await;
        metrics::histogram!("meshmail_remote_delivery_seconds").record(started.elapsed().as_secs_f64());
        match result {
            Ok(Reply::Delivered(r)) => Route::Done(r),
            Ok(Reply::NotOwner) => {
                self.runtime.refresh_soon();
                Route::Retry(format!("{node} no longer owns shard {shard}"))
            }
            Ok(other) => Route::Done(Err(DeliveryError::Temporary(format!("unexpected reply {other:?}")))),
            Err(e) => {
                metrics::counter!("meshmail_remote_errors_total", "kind" => "deliver").increment(1);
                Route::Retry(e.to_string())
            }
        }
    }

    async fn op(&self, shard: u32, account: AccountId, op: MailboxOp) -> Route<Result<OpResult, OpError>> {
        let (node, generation) = match self.target(shard) {
            Ok(t) => t,
            Err(why) => return Route::Retry(why.to_string()),
        };
        if !self.cluster.reachable(&node, generation) {
            return Route::Retry(format!("no link to {node}"));
        }
        match self
            .send(
                &node,
                generation,
                &Request::Op { shard, account, op },
                REMOTE_OP_TIMEOUT,
            )
            .await
        {
            Ok(Reply::Op(r)) => Route::Done(r),
            Ok(Reply::NotOwner) => {
                self.runtime.refresh_soon();
                Route::Retry(format!("{node} no longer owns shard {shard}"))
            }
            Ok(other) => Route::Done(Err(OpError::Failed(format!("unexpected reply {other:?}")))),
            // Sent, outcome unknown: an operation is not idempotent (a COPY
            // twice is two copies), so the client is told to check.
            Err(e) => {
                metrics::counter!("meshmail_remote_errors_total", "kind" => "op").increment(1);
                Route::Done(Err(OpError::Unavailable(format!(
                    "the mailbox's node did not answer ({e}); check and retry"
                ))))
            }
        }
    }

    fn push_hint(&self, node: &str, generation: u64, hint: WireHint) {
        let mut msg = HINT_TAG.to_vec();
        if serde_json::to_writer(&mut msg, &hint).is_ok() {
            self.cluster.cast(node, generation, msg);
        }
    }
}

/// Serves other nodes' requests with this node's actors.
struct Gateway {
    ctx: Arc<NodeCtx>,
    runtime: MeshRuntime,
}

#[async_trait]
impl GatewayHandler for Gateway {
    async fn call(&self, request: Vec<u8>) -> Vec<u8> {
        let reply = match serde_json::from_slice::<Request>(&request) {
            Ok(req) => remote::serve(&self.ctx, req).await,
            Err(e) => Reply::Malformed(e.to_string()),
        };
        serde_json::to_vec(&reply).unwrap_or_default()
    }

    fn cast(&self, message: Vec<u8>) {
        if let Some(body) = message.strip_prefix(ANNOUNCE_TAG) {
            if let Ok(a) = serde_json::from_slice::<Announce>(body) {
                self.runtime.receive_announce(a);
            }
        } else if let Some(body) = message.strip_prefix(HINT_TAG)
            && let Ok(h) = serde_json::from_slice::<WireHint>(body)
        {
            self.ctx.hints.publish_local(ChangeHint {
                account: h.account,
                mailbox: h.mailbox,
                uid: h.uid,
                modseq: h.modseq,
                committed_at: Instant::now(),
            });
        }
    }
}

/// Keeps the owners of watched accounts informed (their watches expire
/// unless renewed). When an account's owner changes, its sessions get a
/// hint at once: they may have missed changes during the move.
async fn renew_watches(ctx: Arc<NodeCtx>, runtime: MeshRuntime) {
    let mut last_owner: HashMap<AccountId, (String, u64)> = HashMap::new();
    let Some(cluster) = runtime.cluster() else { return };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(WATCH_RENEW) => {}
            _ = ctx.hints.new_account.notified() => {}
        }
        let mut by_owner: HashMap<(String, u64), Vec<AccountId>> = HashMap::new();
        let accounts = ctx.hints.watched_accounts();
        last_owner.retain(|a, _| accounts.contains(a));
        for account in accounts {
            let Some(owner) = runtime.owner(ctx.shard_of(account)) else {
                continue;
            };
            let key = (owner.node.clone(), owner.generation);
            if last_owner.insert(account, key.clone()).is_some_and(|prev| prev != key) {
                ctx.hints.publish_local(ChangeHint {
                    account,
                    mailbox: 0,
                    uid: 0,
                    modseq: 0,
                    committed_at: Instant::now(),
                });
            }
            if owner.node != ctx.identity.name {
                by_owner.entry(key).or_default().push(account);
            }
        }
        for ((node, generation), accounts) in by_owner {
            let req = Request::Watch {
                node: ctx.identity.name.clone(),
                generation: ctx.identity.generation,
                accounts,
            };
            if let Ok(body) = serde_json::to_vec(&req)
                && let Err(e) = cluster.call(&node, generation, body, Duration::from_secs(5)).await
            {
                tracing::debug!(%node, error = %e, "mesh: watch renewal failed");
            }
        }
    }
}
