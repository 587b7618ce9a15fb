//! Admin commands that work directly against the store (no running node
//! needed: the store is the truth).

use std::io::BufRead;

use anyhow::{Context, bail};
use meshmail_storage::model::{accounts, domains};

use crate::config::Config;

pub(crate) use crate::store::open;

pub async fn domain_add(cfg: &Config, domain: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let domain = domain.to_string();
    let d = db
        .run("admin_domain_add", move |txn| {
            let domain = domain.clone();
            async move {
                // A commit with an unknown outcome (FDB's 1021) may have
                // added it: the retry finds it and is done.
                if txn.maybe_committed()
                    && let Some(d) = domains::get(&txn, &domain).await?
                {
                    return Ok(d);
                }
                domains::add(&txn, &domain).await
            }
        })
        .await?;
    println!("added domain {}", d.name);
    Ok(())
}

pub async fn domain_list(cfg: &Config) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let list = db
        .read("admin_domain_list", |txn| async move { domains::list(&txn).await })
        .await?;
    for d in list {
        println!("{}", d.name);
    }
    Ok(())
}

pub async fn account_add(cfg: &Config, email: &str, password_stdin: bool) -> anyhow::Result<()> {
    if !password_stdin {
        bail!("give the password on standard input with --password-stdin (never on the command line)");
    }
    let mut password = String::new();
    std::io::stdin().lock().read_line(&mut password)?;
    let password = password.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        bail!("empty password on standard input");
    }
    accounts::normalize(email)?;
    // argon2id is deliberately slow: keep it off the async workers.
    let hash = tokio::task::spawn_blocking(move || accounts::hash_password(&password)).await??;
    let db = open(cfg).await?;
    let email = email.to_string();
    let account = db
        .run("admin_account_add", move |txn| {
            let (email, hash) = (email.clone(), hash.clone());
            async move {
                // After an unknown commit outcome (FDB's 1021) the retry may
                // find the account the first attempt added: its hash (salted,
                // so unique to this command) says it is ours, not a clash.
                if txn.maybe_committed()
                    && let Some(a) = accounts::get(&txn, &email).await?
                    && a.password_hash == hash
                {
                    return Ok(a);
                }
                accounts::add(&txn, &email, &hash).await
            }
        })
        .await?;
    println!("added account {} (id {})", account.email, account.id);
    Ok(())
}

/// Creates a JMAP bearer token for an existing account and prints it.
pub async fn token_create(cfg: &Config, user: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let token = meshmail_protocols::jmap::auth::new_token();
    let (u, t) = (user.trim().to_ascii_lowercase(), token.clone());
    db.run("admin_token_create", move |txn| {
        let (u, t) = (u.clone(), t.clone());
        async move {
            if accounts::get(&txn, &u).await?.is_none() {
                return Err(meshmail_storage::StorageError::NotFound(format!("account {u}")));
            }
            meshmail_storage::model::jmap::put_token(&txn, &t, &u)
        }
    })
    .await?;
    println!("{token}");
    Ok(())
}

pub async fn account_list(cfg: &Config) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let mut after: Option<String> = None;
    loop {
        // One bounded page per snapshot transaction.
        let a = after.clone();
        let page = db
            .read("admin_account_list", move |txn| {
                let a = a.clone();
                async move { accounts::list_page(&txn, a.as_deref(), 1000).await }
            })
            .await?;
        for acc in &page {
            println!("{}\t(id {})", acc.email, acc.id);
        }
        match page.last() {
            Some(last) if page.len() == 1000 => after = Some(last.email.clone()),
            _ => break,
        }
    }
    Ok::<(), anyhow::Error>(())
}

pub async fn verify_ledger(cfg: &Config, chunk: usize) -> anyhow::Result<bool> {
    use meshmail_storage::model::verify::verify_ledger;
    let db = open(cfg).await?;
    let bar = indicatif::ProgressBar::new_spinner().with_style(indicatif::ProgressStyle::with_template(
        "{spinner} verifying ledger: {pos} entries ({per_sec})",
    )?);
    let report = verify_ledger(&db, chunk, |n| bar.set_position(n)).await?;
    bar.finish_and_clear();
    println!("ledger entries: {}", report.entries);
    println!("delivered:      {}", report.delivered);
    println!("queued:         {}", report.queued);
    println!("bounced:        {}", report.bounced);
    println!("relayed:        {}", report.relayed);
    println!("quarantined:    {}", report.quarantined);
    println!("expunged:       {}", report.expunged);
    println!("discrepancies:  {}", report.problems.len());
    for p in report.problems.iter().take(100) {
        println!(
            "  {}: {}",
            meshmail_storage::model::id_to_string(&p.acceptance_id),
            p.detail
        );
    }
    if report.problems.len() > 100 {
        println!("  ... and {} more", report.problems.len() - 100);
    }
    Ok(report.is_clean())
}

pub async fn quarantine_list(cfg: &Config) -> anyhow::Result<()> {
    use meshmail_storage::model::quarantine;
    let db = open(cfg).await?;
    let items = db
        .read("admin_quarantine_list", |txn| async move {
            quarantine::list(&txn, 10_000).await
        })
        .await?;
    println!("{} item(s)", items.len());
    for q in items {
        println!(
            "{}\t{}\t{} bytes\t{} attempts\t{}",
            meshmail_storage::model::id_to_string(&q.id),
            q.recipient,
            q.body_size,
            q.attempts,
            q.reason
        );
    }
    Ok(())
}

pub async fn quarantine_show(cfg: &Config, id: &str) -> anyhow::Result<()> {
    use meshmail_storage::model::quarantine;
    let id = meshmail_storage::model::id_from_str(id)?;
    let db = open(cfg).await?;
    let item = db
        .read("admin_quarantine_show", move |txn| async move {
            quarantine::get(&txn, &id).await
        })
        .await?
        .ok_or_else(|| anyhow::anyhow!("no quarantined item with that id"))?;
    println!("id:          {}", meshmail_storage::model::id_to_string(&item.id));
    if let Some(a) = item.acceptance_id {
        println!("acceptance:  {}", meshmail_storage::model::id_to_string(&a));
    }
    println!("recipient:   {}", item.recipient);
    println!("reason:      {}", item.reason);
    println!("attempts:    {}", item.attempts);
    println!("quarantined: {} ms since epoch", item.quarantined_ms);
    println!("body:        sha256 {} ({} bytes)", item.body_hash, item.body_size);
    println!("request:     {}", item.request);
    Ok(())
}

pub async fn quarantine_drop(cfg: &Config, id: &str) -> anyhow::Result<()> {
    let id = meshmail_storage::model::id_from_str(id)?;
    let db = open(cfg).await?;
    meshmail_actors::quarantine::drop_item(&db, id).await?;
    println!("dropped; its acceptance is recorded as bounced");
    Ok(())
}

/// Redelivery must go through the shard actor (the single writer), so it
/// asks a running node over its HTTP admin API.
pub async fn quarantine_redeliver(id: &str, node: &str) -> anyhow::Result<()> {
    meshmail_storage::model::id_from_str(id)?;
    let (status, body) = http_post(node, &format!("/admin/quarantine/{id}/redeliver")).await?;
    println!("{}", body.trim_end());
    if status != 200 {
        bail!("redelivery failed (HTTP {status})");
    }
    Ok(())
}

async fn http_post(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    http_request("POST", addr, path).await
}

/// One HTTP/1.1 request to a node's HTTP listener (admin commands only:
/// small bodies, `Connection: close`).
pub(crate) async fn http_request(method: &str, addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to the node's HTTP listener at {addr}"))?;
    s.write_all(
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// `meshmail status`: the store's view of the mesh. Reads leases in bounded
/// pages (one snapshot each), so it is safe on a live system.
pub async fn status(cfg: &Config) -> anyhow::Result<()> {
    use std::collections::BTreeMap;

    use meshmail_storage::model::nodes;
    let db = open(cfg).await?;
    let members = db
        .read("admin_status_nodes", |txn| async move { nodes::list(&txn).await })
        .await?;
    println!("nodes ({}):", members.len());
    let now_ms = meshmail_storage::clock::now_ms();
    for n in &members {
        let name = n.name.clone();
        let seen = db
            .read("admin_status_seen", |txn| {
                let name = name.clone();
                async move { nodes::seen(&txn, &name).await }
            })
            .await?;
        let life = match (n.forgotten_ms, seen) {
            (Some(_), _) => "forgotten (left for good)".to_string(),
            (None, Some(s)) => format!("last seen {} ms ago", now_ms.saturating_sub(s.seen_ms)),
            (None, None) => "never seen".to_string(),
        };
        println!(
            "  {}\tgeneration {}\tstarted {} ms since epoch\t{life}\tbuild {}\tformats {}",
            n.name,
            n.generation,
            n.started_ms,
            n.build.as_deref().unwrap_or("(before builds were recorded)"),
            n.formats()
        );
    }
    print_store_format(&db, cfg).await?;
    // (node, generation) -> (shards, lowest epoch, highest epoch)
    let mut owners: BTreeMap<(String, u64), (u64, u64, u64)> = BTreeMap::new();
    let mut released = 0u64;
    let mut from = 0u32;
    loop {
        let page = db
            .read("admin_status_leases", move |txn| async move {
                nodes::list_leases(&txn, from, 1000).await
            })
            .await?;
        let Some(last) = page.last() else { break };
        from = last.shard + 1;
        for l in &page {
            if l.released {
                released += 1;
                continue;
            }
            let e = owners.entry((l.node.clone(), l.generation)).or_insert((0, u64::MAX, 0));
            e.0 += 1;
            e.1 = e.1.min(l.epoch);
            e.2 = e.2.max(l.epoch);
        }
        if page.len() < 1000 {
            break;
        }
    }
    println!("shard leases:");
    for ((node, generation), (count, lo, hi)) in &owners {
        let current = members.iter().any(|m| &m.name == node && m.generation == *generation);
        let note = if current {
            ""
        } else {
            "  (not the node's current generation: fenced)"
        };
        println!("  {node}#{generation}\t{count} shards\tepochs {lo}..={hi}{note}");
    }
    if released > 0 {
        println!("  released (no owner): {released}");
    }
    Ok(())
}

/// The store's format and, while a newer one waits, the nodes it waits
/// for (the cluster-wide switch, `storage::model::format_switch`).
async fn print_store_format(db: &meshmail_storage::Database, cfg: &Config) -> anyhow::Result<()> {
    use meshmail_storage::model::format_switch;
    let mine = cfg.upgrade.formats()?;
    let plan = db
        .read("admin_status_format", move |txn| async move {
            format_switch::plan(&txn, mine.max).await
        })
        .await?;
    let store = plan.store.unwrap_or(format_switch::LAST_MARKED_ON_OPEN);
    println!("store format: {store} (this build supports {mine})");
    if store < mine.max {
        if plan.holdouts.is_empty() {
            println!(
                "  switch to {}: every node supports it; a running node switches within 5 s",
                mine.max
            );
        } else {
            println!("  switch to {} waits for:", mine.max);
            for h in &plan.holdouts {
                let build = h.build.as_deref().unwrap_or("a build before builds were recorded");
                println!(
                    "    {}#{} ({build}, formats {}): restart it on a build that supports {}, or `meshmail node forget` it",
                    h.name, h.generation, h.formats, mine.max
                );
            }
        }
    }
    Ok(())
}

/// `meshmail node forget NAME`: see the command's help.
pub async fn node_forget(cfg: &Config, name: &str, silence_s: u64) -> anyhow::Result<()> {
    use meshmail_storage::model::nodes;
    let db = open(cfg).await?;
    match nodes::forget(&db, name, silence_s.saturating_mul(1000)).await? {
        Ok(f) => {
            println!(
                "forgot {}#{}: peers drop it within a round and no longer count it against quorum",
                f.record.name, f.record.generation
            );
            if f.leases_held > 0 {
                println!(
                    "it still held {} shard leases: the survivors take them over",
                    f.leases_held
                );
            }
            Ok(())
        }
        Err(refused) => anyhow::bail!("not forgetting: {refused}"),
    }
}
