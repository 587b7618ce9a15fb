//! `meshmail dns records DOMAIN`: every DNS record an operator publishes
//! for a local domain, as zone-file lines ready to paste, from the
//! config's `[publish]` (and `hostname`, `[listen]`) and the domain's DKIM
//! key in the store (`meshmail dkim generate`).

use anyhow::bail;
use meshmail_storage::model::{dkim, domains};

use crate::admin::open;
use crate::config::Config;
use crate::day_one;

pub async fn records(cfg: &Config, domain: &str) -> anyhow::Result<()> {
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    let db = open(cfg).await?;
    let d = domain.clone();
    let (local, key) = db
        .read("admin_dns_records", move |txn| {
            let d = d.clone();
            async move {
                let local = domains::get(&txn, &d).await?.is_some();
                Ok::<_, meshmail_storage::StorageError>((local, dkim::get(&txn, &d).await?))
            }
        })
        .await?;
    if !local {
        bail!("{domain} is not a local domain (meshmail domain add {domain})");
    }
    let face = cfg.public_face();
    println!(
        "; DNS records for {domain}, from the config of {} (paste into the zone)",
        face.hostname
    );
    if key.is_none() {
        println!("; no DKIM key yet: run `meshmail dkim generate {domain}`, then this again");
    }
    let dkim = key.map(|k| (k.dns_name(), k.dns_txt()));
    for r in day_one::records(&face, &domain, dkim) {
        println!("; {}", r.why);
        println!("{}", r.zone_line());
    }
    println!(
        "; and: A/AAAA records for {host}; a certificate naming {host}, mta-sts.{domain} and \
         autoconfig.{domain} on the node's HTTPS listener",
        host = face.hostname
    );
    Ok(())
}
