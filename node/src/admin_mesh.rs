//! Admin commands that talk to a running node about the mesh: its live
//! view (`meshmail status --node`) and drain (`meshmail node drain`).

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::Value;

use crate::admin::http_request;

async fn node_status(addr: &str) -> anyhow::Result<Value> {
    let (code, body) = http_request("GET", addr, "/status").await?;
    if code != 200 {
        bail!("{addr}/status answered HTTP {code}");
    }
    Ok(serde_json::from_str(&body)?)
}

/// Prints a running node's view of the mesh.
pub async fn live_status(addr: &str) -> anyhow::Result<()> {
    let s = node_status(addr).await?;
    println!(
        "live view of {}#{} ({}; settled: {}, draining: {})",
        s["node"].as_str().unwrap_or("?"),
        s["generation"],
        addr,
        s["settled"],
        s["draining"]
    );
    println!("members:");
    for m in s["members"].as_array().into_iter().flatten() {
        println!(
            "  {:<12} generation {:<4} link {:<5} {:<8} {}{}",
            m["node"].as_str().unwrap_or("?"),
            m["generation"],
            m["link"].as_str().unwrap_or("?"),
            m["status"].as_str().unwrap_or("?"),
            m["addr"].as_str().unwrap_or(""),
            if m["draining"].as_bool() == Some(true) {
                "  (draining)"
            } else {
                ""
            }
        );
    }
    println!("shards owned (of {}):", s["shard_count"]);
    for (node, n) in s["owners"].as_object().into_iter().flatten() {
        println!("  {node:<12} {n}");
    }
    println!("  unowned      {}", s["unowned"]);
    Ok(())
}

/// Asks a node to hand all its shards over and waits until it owns none.
pub async fn drain(addr: &str, timeout_s: u64) -> anyhow::Result<()> {
    let (code, body) = http_request("POST", addr, "/admin/drain").await?;
    if code != 202 {
        bail!("drain refused (HTTP {code}): {}", body.trim());
    }
    let start_owned = node_status(addr).await?["shards_owned"].as_u64().unwrap_or(0);
    let bar = indicatif::ProgressBar::new(start_owned);
    bar.set_style(
        indicatif::ProgressStyle::with_template("draining {msg} [{bar:40}] {pos}/{len} shards handed over ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(addr.to_string());
    let started = Instant::now();
    loop {
        let s = node_status(addr).await?;
        let owned = s["shards_owned"].as_u64().unwrap_or(0);
        // Not serving is not enough: every lease must be released in the store.
        let held = s["leases_held"].as_u64().unwrap_or(0);
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
