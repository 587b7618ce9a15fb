//! `meshmail queue ...` and `meshmail dkim ...`: the outbound queue and the
//! DKIM keys, straight against the store (no node needed). A retry or a
//! bounce only marks the item; the node that owns its shard acts on it at
//! its next scan.

use anyhow::{Context, bail};
use meshmail_storage::model::dkim::{self, DkimAlgorithm};
use meshmail_storage::model::outbound::{self, OutboundItem};
use meshmail_storage::model::{domains, id_from_str, id_to_string, now_ms};

use crate::admin::open;
use crate::config::Config;

/// Items per page of `queue list` (one snapshot transaction each).
const PAGE: usize = 1000;

fn when(ms: u64) -> String {
    let now = now_ms();
    let date = mail_parser_date(ms);
    if ms <= now {
        format!("{date} (due)")
    } else {
        format!("{date} (in {} s)", (ms - now).div_ceil(1000))
    }
}

fn mail_parser_date(ms: u64) -> String {
    // RFC 3339 in UTC, without pulling a date crate into the binary.
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn state(i: &OutboundItem) -> &'static str {
    if i.bounce_requested.is_some() {
        "bouncing"
    } else if i.claim.as_ref().is_some_and(|c| c.until_ms > now_ms()) {
        "in-flight"
    } else {
        "queued"
    }
}

pub async fn list(cfg: &Config) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let mut after: Option<[u8; 16]> = None;
    let mut n = 0usize;
    loop {
        let a = after;
        let page = db
            .read("admin_queue_list", move |txn| async move {
                outbound::list_page(&txn, a.as_ref(), PAGE).await
            })
            .await?;
        for i in &page {
            n += 1;
            println!(
                "{}\t{} -> {}\t{}\t{} bytes\t{} attempts\tnext {}\t{}",
                id_to_string(&i.id),
                if i.sender.is_empty() { "<>" } else { &i.sender },
                i.recipient,
                state(i),
                i.body.size,
                i.attempts,
                when(i.next_attempt_ms),
                i.last_error.as_deref().unwrap_or("-"),
            );
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.id),
            _ => break,
        }
    }
    println!("{n} item(s) queued");
    Ok(())
}

pub async fn show(cfg: &Config, id: &str) -> anyhow::Result<()> {
    let id = id_from_str(id)?;
    let db = open(cfg).await?;
    let i = db
        .read(
            "admin_queue_show",
            move |txn| async move { outbound::get(&txn, &id).await },
        )
        .await?
        .context("no queued item with that id (delivered, bounced or never queued)")?;
    println!("id:            {}", id_to_string(&i.id));
    println!("acceptance:    {}", id_to_string(&i.acceptance_id));
    println!("sender:        {}", if i.sender.is_empty() { "<>" } else { &i.sender });
    println!("recipient:     {}", i.recipient);
    println!("state:         {}", state(&i));
    println!("size:          {} bytes (sha256 {})", i.body.size, i.body.hash);
    println!("queued:        {}", mail_parser_date(i.queued_ms));
    println!("attempts:      {}", i.attempts);
    match i.last_attempt_ms {
        Some(t) => println!("last attempt:  {}", mail_parser_date(t)),
        None => println!("last attempt:  never"),
    }
    println!("next attempt:  {}", when(i.next_attempt_ms));
    println!("last error:    {}", i.last_error.as_deref().unwrap_or("-"));
    println!("shard:         {}", i.shard);
    if let Some(c) = &i.claim {
        println!(
            "claimed by:    {}#{} epoch {} since {} until {}",
            c.fence.node,
            c.fence.generation,
            c.fence.epoch,
            mail_parser_date(c.started_ms),
            mail_parser_date(c.until_ms)
        );
    }
    println!(
        "options:       smtputf8={} 8bit={} requiretls={} tls-required-no={} delay-warned={}",
        i.smtputf8, i.eight_bit, i.require_tls, i.tls_optional, i.delay_warned
    );
    println!(
        "dsn:           ret={:?} envid={:?} notify={:?} orcpt={:?}",
        i.dsn.ret, i.dsn.envid, i.dsn.notify, i.dsn.orcpt
    );
    if let Some(r) = &i.bounce_requested {
        println!("bounce asked:  {r}");
    }
    Ok(())
}

pub async fn retry(cfg: &Config, id: &str) -> anyhow::Result<()> {
    let id = id_from_str(id)?;
    let db = open(cfg).await?;
    db.run("admin_queue_retry", move |txn| async move {
        outbound::retry_now(&txn, &id).await
    })
    .await?
    .context("no queued item with that id")?;
    println!("due now: the node owning it tries at its next scan");
    Ok(())
}

pub async fn drop(cfg: &Config, id: &str) -> anyhow::Result<()> {
    let id = id_from_str(id)?;
    let db = open(cfg).await?;
    db.run("admin_queue_drop", move |txn| async move {
        outbound::drop_item(&txn, &id, "dropped by the operator (meshmail queue drop)").await
    })
    .await?
    .context("no queued item with that id")?;
    println!("dropped; its acceptance is recorded as bounced (no DSN sent)");
    Ok(())
}

pub async fn bounce(cfg: &Config, id: &str, reason: &str) -> anyhow::Result<()> {
    let id = id_from_str(id)?;
    let db = open(cfg).await?;
    let reason = reason.to_string();
    db.run("admin_queue_bounce", move |txn| {
        let reason = reason.clone();
        async move { outbound::request_bounce(&txn, &id, &reason).await }
    })
    .await?
    .context("no queued item with that id")?;
    println!("marked for bounce: the node owning it sends the DSN at its next scan");
    Ok(())
}

pub async fn dkim_generate(cfg: &Config, domain: &str, selector: &str, algorithm: &str) -> anyhow::Result<()> {
    let algorithm = match algorithm {
        "ed25519" => DkimAlgorithm::Ed25519,
        "rsa" => DkimAlgorithm::Rsa,
        other => bail!("unknown algorithm {other:?}: ed25519 or rsa"),
    };
    if selector.is_empty()
        || !selector
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        bail!("a selector is letters, digits, '-' and '.'");
    }
    let db = open(cfg).await?;
    let d = domain.to_ascii_lowercase();
    let exists = db
        .read("admin_dkim_domain", move |txn| {
            let d = d.clone();
            async move { domains::get(&txn, &d).await }
        })
        .await?;
    if exists.is_none() {
        bail!("{domain} is not a local domain (meshmail domain add {domain})");
    }
    let key = meshmail_protocols::outbound::dkim::generate(domain, selector, algorithm)?;
    let k = key.clone();
    db.run("admin_dkim_put", move |txn| {
        let k = k.clone();
        async move { dkim::put(&txn, &k) }
    })
    .await?;
    eprintln!(
        "stored a {} key for {}; publish this TXT record:",
        key.algorithm.key_type(),
        key.domain
    );
    println!("{}", zone_line(&key));
    Ok(())
}

/// The record as a zone-file line; TXT strings hold at most 255 octets
/// (RFC 1035 §3.3), so a long key is split into several (DKIM joins them).
fn zone_line(key: &dkim::DkimKey) -> String {
    let txt = key.dns_txt();
    let parts: Vec<String> = txt
        .as_bytes()
        .chunks(255)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect();
    format!("{}. IN TXT {}", key.dns_name(), parts.join(" "))
}

pub async fn dkim_show(cfg: &Config, domain: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let d = domain.to_string();
    let key = db
        .read("admin_dkim_show", move |txn| {
            let d = d.clone();
            async move { dkim::get(&txn, &d).await }
        })
        .await?
        .with_context(|| format!("no DKIM key for {domain} (meshmail dkim generate {domain})"))?;
    println!("domain:    {}", key.domain);
    println!("selector:  {}", key.selector);
    println!("algorithm: {}", key.algorithm.key_type());
    println!("created:   {}", mail_parser_date(key.created_ms));
    println!("{}", zone_line(&key));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(mail_parser_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(mail_parser_date(1_700_000_000_000), "2023-11-14T22:13:20Z");
    }
}
