//! Admin commands that talk to a running node about the mesh: its live
//! view (`meshmail status --node`) and drain (`meshmail node drain`).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use meshmail_mesh::status::NodeStatus;

use crate::admin::http_request;

/// Reads a node's `/status` into the struct the server serialized: a
/// missing or retyped field is an error naming the node, never a silent 0.
async fn node_status(addr: &str) -> anyhow::Result<NodeStatus> {
    let (code, body) = http_request("GET", addr, "/status").await?;
    if code != 200 {
        bail!("{addr}/status answered HTTP {code}");
    }
    parse_status(&body).with_context(|| format!("{addr}/status"))
}

pub fn parse_status(body: &str) -> anyhow::Result<NodeStatus> {
    serde_json::from_str(body).context("not a meshmail /status document")
}

/// Prints a running node's view of the mesh.
pub async fn live_status(addr: &str) -> anyhow::Result<()> {
    let s = node_status(addr).await?;
    print!("{}", render_status(addr, &s));
    Ok(())
}

fn render_status(addr: &str, s: &NodeStatus) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "live view of {}#{} ({addr}; backend {}, up {} s; settled: {}, draining: {})",
        s.node, s.generation, s.backend, s.uptime_s, s.settled, s.draining
    );
    let _ = writeln!(out, "members:");
    for m in &s.members {
        let _ = writeln!(
            out,
            "  {:<12} generation {:<4} link {:<5} {:<8} {}{}",
            m.node,
            m.generation,
            m.link.to_string(),
            m.status.to_string(),
            m.addr.as_deref().unwrap_or(""),
            if m.draining { "  (draining)" } else { "" }
        );
    }
    let _ = writeln!(
        out,
        "shards owned (of {}): this node runs {}, holds {} leases",
        s.shard_count, s.shards_owned, s.leases_held
    );
    for (node, n) in &s.owners {
        let _ = writeln!(out, "  {node:<12} {n}");
    }
    let _ = writeln!(out, "  unowned      {}", s.unowned);
    out
}

/// Asks a node to hand all its shards over and waits until it owns none.
pub async fn drain(addr: &str, timeout_s: u64) -> anyhow::Result<()> {
    let (code, body) = http_request("POST", addr, "/admin/drain").await?;
    if code != 202 {
        bail!("drain refused (HTTP {code}): {}", body.trim());
    }
    let start_owned = node_status(addr).await?.shards_owned;
    let bar = indicatif::ProgressBar::new(start_owned);
    bar.set_style(
        indicatif::ProgressStyle::with_template("draining {msg} [{bar:40}] {pos}/{len} shards handed over ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(addr.to_string());
    let started = Instant::now();
    loop {
        let s = node_status(addr).await?;
        let owned = s.shards_owned;
        // Not serving is not enough: every lease must be released in the store.
        let held = s.leases_held;
        bar.set_position(start_owned.saturating_sub(owned.max(held)));
        if owned == 0 && held == 0 {
            bar.finish();
            println!("{addr} owns no shards: safe to stop");
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(timeout_s) {
            bar.abandon();
            bail!("{addr} still owns {owned} shards after {timeout_s} s (the drain goes on)");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub async fn undrain(addr: &str) -> anyhow::Result<()> {
    let (code, body) = http_request("POST", addr, "/admin/undrain").await?;
    println!("{}", body.trim_end());
    if code != 200 {
        bail!("undrain failed (HTTP {code})");
    }
    Ok(())
}
