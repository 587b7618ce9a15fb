import shutil
R='/work/wt-ingest/'
def edit(p, old, new, count=1):
    s=open(R+p).read()
    assert old in s, (p, old[:60])
    s=s.replace(old,new,count); open(R+p,'w').write(s)

shutil.copy('/tmp/ingest-patch/directory.rs', R+'storage/src/model/directory.rs')
shutil.copy('/tmp/ingest-patch/route_cache.rs', R+'protocols/src/smtp/route_cache.rs')
edit('storage/src/model/mod.rs', "pub mod cluster;\n", "pub mod cluster;\npub mod directory;\n")
edit('storage/src/keyspace.rs', "/// Blob reference count (little-endian i64), by content hash.", """/// The directory version (little-endian i64, atomic adds): bumped by every
/// change to domains, accounts, aliases, quotas and vacation responses.
pub fn directory_version() -> Vec<u8> {
    pack(&("dirv",))
}

/// Blob reference count (little-endian i64), by content hash.""")
edit('storage/src/model/aliases.rs', """    put_record(txn, &keyspace::alias(&address), &alias)?;
    Ok(alias)""", """    put_record(txn, &keyspace::alias(&address), &alias)?;
    super::directory::bump(txn)?;
    Ok(alias)""")
edit('storage/src/model/aliases.rs', """    txn.clear(&key)?;
    Ok(existed)""", """    txn.clear(&key)?;
    super::directory::bump(txn)?;
    Ok(existed)""")
edit('storage/src/model/domains.rs', """    put_record(txn, &key, &d)?;
    Ok(d)""", """    put_record(txn, &key, &d)?;
    super::directory::bump(txn)?;
    Ok(d)""")
edit('storage/src/model/accounts.rs', """    mailboxes::create_defaults(txn, id).await?;
    Ok(account)""", """    mailboxes::create_defaults(txn, id).await?;
    super::directory::bump(txn)?;
    Ok(account)""")
edit('storage/src/model/quota.rs', """pub fn set(txn: &Txn, account: AccountId, quota: &Quota) -> Result<()> {
    if quota.is_unlimited() {""", """pub fn set(txn: &Txn, account: AccountId, quota: &Quota) -> Result<()> {
    super::directory::bump(txn)?;
    if quota.is_unlimited() {""")
edit('storage/src/model/jmap.rs', """pub fn put_vacation(txn: &Txn, account: AccountId, v: &Vacation) -> Result<()> {
    put_record(txn, &keyspace::vacation(account), v)""", """pub fn put_vacation(txn: &Txn, account: AccountId, v: &Vacation) -> Result<()> {
    super::directory::bump(txn)?;
    put_record(txn, &keyspace::vacation(account), v)""")

# protocols
edit('protocols/src/smtp/mod.rs', "pub mod routing;\n", "pub mod route_cache;\npub mod routing;\n")
edit('protocols/src/smtp/session.rs', """    /// Aliases, subaddressing, catch-alls.
    pub routing: super::routing::RoutingConfig,""", """    /// Aliases, subaddressing, catch-alls.
    pub routing: super::routing::RoutingConfig,
    /// Cached routes and per-account answers of acceptance (see
    /// [`super::route_cache`]).
    pub routes: Arc<super::route_cache::RouteCache>,""")
edit('protocols/src/smtp/session.rs', """            super::accept::resolve_recipient(&self.shared.ctx, &mailbox, submission, &self.shared.routing).await;""",
"""            super::accept::resolve_recipient_cached(&self.shared, &mailbox, submission).await;""")
edit('protocols/src/smtp/session.rs', """                if super::accept::all_over_quota(&self.shared.ctx, &found)""", """                if super::accept::all_over_quota_cached(&self.shared, &found)""")
edit('protocols/src/smtp/vacation.rs', """    let recipients = match resolve_recipient(ctx, &to.normalized(), true, &shared.routing).await? {""",
"""    let recipients = match super::accept::resolve_recipient_cached(shared, &to.normalized(), true).await? {""")
edit('protocols/src/smtp/vacation.rs', "use super::accept::{Accepted, RcptOutcome, accept_message, resolve_recipient, sender_allowed};",
     "use super::accept::{Accepted, RcptOutcome, accept_message, sender_allowed};")
edit('protocols/src/smtp/vacation.rs', """    let ctx = &shared.ctx;
    let vacation = ctx
        .db
        .read("vacation_get", move |txn| async move {
            jmap::get_vacation(&txn, account).await
        })
        .await?;
    let now = now_ms();
    if !in_period(&vacation, now) {
        return Ok(Some(Skip::Off));
    }""", """    let ctx = &shared.ctx;
    if shared.routes.knows(Fact::VacationOff, account) {
        return Ok(Some(Skip::Off));
    }
    let (vacation, version) = ctx
        .db
        .read("vacation_get", move |txn| async move {
            Ok::<_, StorageError>((jmap::get_vacation(&txn, account).await?, directory::version(&txn).await?))
        })
        .await?;
    let now = now_ms();
    if !vacation.is_enabled {
        // Only "off" is cached: a response with dates is on or off by the clock.
        shared.routes.put_fact(Fact::VacationOff, account, version);
    }
    if !in_period(&vacation, now) {
        return Ok(Some(Skip::Off));
    }""")
edit('protocols/src/smtp/accept.rs', """/// Whether every target of a RCPT is a local account already at its quota""", """/// [`resolve_recipient`] through the listener's route cache: one read
/// transaction (with the directory version) on a miss, none on a hit.
pub async fn resolve_recipient_cached(
    shared: &SmtpShared,
    mailbox: &Mailbox,
    submission: bool,
) -> Result<RcptOutcome, StorageError> {
    let address = mailbox.to_string();
    let route = match shared.routes.route(&address) {
        Some(route) => route,
        None => {
            let (a, cfg) = (address.clone(), shared.routing.clone());
            let (route, version) = shared
                .ctx
                .db
                .read("smtp_rcpt", move |txn| {
                    let (a, cfg) = (a.clone(), cfg.clone());
                    async move {
                        let version = directory::version(&txn).await?;
                        Ok::<_, StorageError>((routing::route(&txn, &a, &cfg).await?, version))
                    }
                })
                .await?;
            shared.routes.put_route(&address, version, &route);
            route
        }
    };
    Ok(outcome_of(route, mailbox, submission))
}

/// [`all_over_quota`], skipping accounts the route cache knows have no quota.
pub async fn all_over_quota_cached(shared: &SmtpShared, targets: &[Recipient]) -> Result<bool, StorageError> {
    let mut unknown = Vec::new();
    for t in targets {
        match t {
            Recipient::Local { account, .. } if shared.routes.knows(Fact::Unlimited, *account) => {
                // No quota: this target is not full, so not all of them are.
                return Ok(false);
            }
            Recipient::Local { account, .. } => unknown.push(*account),
            Recipient::Remote { .. } => return Ok(false),
        }
    }
    if unknown.is_empty() {
        return Ok(false);
    }
    let (full, unlimited, version) = shared
        .ctx
        .db
        .read("smtp_rcpt_quota", move |txn| {
            let accounts = unknown.clone();
            async move {
                let version = directory::version(&txn).await?;
                let mut unlimited = Vec::new();
                let mut full = true;
                for a in accounts {
                    let q = quota::get(&txn, a).await?;
                    if q.is_unlimited() {
                        unlimited.push(a);
                        full = false;
                    } else if !quota::is_full(&q, &quota::usage(&txn, a).await?) {
                        full = false;
                    }
                }
                Ok::<_, StorageError>((full, unlimited, version))
            }
        })
        .await?;
    for a in unlimited {
        shared.routes.put_fact(Fact::Unlimited, a, version);
    }
    Ok(full)
}

/// Whether every target of a RCPT is a local account already at its quota""")
edit('protocols/src/smtp/accept.rs', """        .await?;
    Ok(match route {
        Route::Targets { targets, via_alias, .. } => {""", """        .await?;
    Ok(outcome_of(route, mailbox, submission))
}

fn outcome_of(route: Route, mailbox: &Mailbox, submission: bool) -> RcptOutcome {
    match route {
        Route::Targets { targets, via_alias, .. } => {""")
edit('protocols/src/smtp/accept.rs', """        Route::Unknown => RcptOutcome::Unknown,
        Route::Misconfigured(why) => RcptOutcome::Misconfigured(why),
    })
}""", """        Route::Unknown => RcptOutcome::Unknown,
        Route::Misconfigured(why) => RcptOutcome::Misconfigured(why),
    }
}""")
edit('protocols/src/smtp/accept.rs', "use meshmail_storage::model::{domains, id_to_string, new_id, now_ms, quota, secrets};",
     "use meshmail_storage::model::{directory, domains, id_to_string, new_id, now_ms, quota, secrets};")
edit('protocols/src/smtp/accept.rs', "use super::reply::Reply;\n", "use super::reply::Reply;\nuse super::route_cache::Fact;\n")
# node
edit('node/src/serve.rs', """            routing: routing.clone(),
            inbound_auth: cfg.smtp.inbound_auth(),""", """            routing: routing.clone(),
            routes: routes.clone(),
            inbound_auth: cfg.smtp.inbound_auth(),""")
edit('node/src/serve.rs', """        routing: cfg.smtp.routing().unwrap_or_default(),
        inbound_auth: None,""", """        routing: cfg.smtp.routing().unwrap_or_default(),
        routes: Default::default(),
        inbound_auth: None,""")
edit('node/src/serve.rs', "    let routing = cfg.smtp.routing()?;\n", "    let routing = cfg.smtp.routing()?;\n    // One route cache for the SMTP-family listeners of this node.\n    let routes = Arc::new(meshmail_protocols::smtp::route_cache::RouteCache::default());\n")
edit('protocols/src/smtp/vacation.rs', "use meshmail_storage::model::{jmap, new_id, now_ms};", "use meshmail_storage::model::{directory, jmap, new_id, now_ms};")
edit('protocols/src/smtp/vacation.rs', "use super::address::Mailbox;\n", "use super::address::Mailbox;\nuse super::route_cache::Fact;\n")
