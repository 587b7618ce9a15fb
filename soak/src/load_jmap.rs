//! The load's JMAP readers (`jmap_readers`): what a webmail or phone client
//! does between writes. Each round, on a new connection to a node (the
//! load's `read_node`, or any), signs in as the next account in turn,
//! fetches the Session and asks Email/query + Email/get for the newest 20
//! messages in one request. A round fails on any transport error, HTTP
//! error, method error, or an Email without its id (counted in
//! `jmap_errors`, then the reader backs off), and counts in `jmap_rounds`
//! when it succeeds.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, ensure};
use serde::Deserialize;

use crate::cluster::{PASSWORD, account};
use crate::jmap_conn::{Conn, basic, check_ok};
use crate::load::Shared;

/// Messages each round asks for.
const NEWEST: usize = 20;
/// Failed rounds whose error is printed.
const ERRORS_SHOWN: u64 = 5;

#[derive(Deserialize)]
struct Session {
    #[serde(rename = "primaryAccounts")]
    primary_accounts: HashMap<String, String>,
}

#[derive(Deserialize)]
struct ApiResponse {
    #[serde(rename = "methodResponses")]
    method_responses: Vec<(String, MethodArgs, String)>,
}

/// The parts of Email/query and Email/get answers a round checks.
#[derive(Deserialize)]
struct MethodArgs {
    #[serde(default)]
    ids: Option<Vec<String>>,
    #[serde(default)]
    list: Option<Vec<EmailItem>>,
}

#[derive(Deserialize)]
struct EmailItem {
    id: Option<String>,
}

pub(crate) async fn reader(s: Arc<Shared>, i: usize) {
    let mut backoff = s.backoff();
    let mut next = i as u32;
    let interval = Duration::from_millis(s.cfg.reader_interval_ms);
    while s.gate().await {
        let user = account(next % s.cfg.accounts.max(1));
        next += 1;
        if !s.dial_token().await {
            break;
        }
        s.inflight.fetch_add(1, Ordering::Relaxed);
        let round = read_round(&s.read_target().http, &user).await;
        s.inflight.fetch_sub(1, Ordering::Relaxed);
        match round {
            Ok(()) => {
                s.count(|c| c.jmap_rounds += 1);
                backoff.reset();
                tokio::time::sleep(interval).await;
            }
            Err(e) => {
                let mut failed = 0;
                s.count(|c| {
                    c.jmap_errors += 1;
                    failed = c.jmap_errors;
                });
                // The first few say why (a node down, a refusal, a wrong
                // answer); the count says how often.
                if failed <= ERRORS_SHOWN {
                    eprintln!("load: JMAP reader {i}: {e:#}");
                }
                backoff.wait(s.deadline).await;
            }
        }
    }
}

async fn read_round(http: &str, user: &str) -> anyhow::Result<()> {
    let mut c = Conn::open(http).await?;
    let auth = basic(user, PASSWORD);
    let (status, body) = c.request("GET", "/.well-known/jmap", &auth, "").await?;
    check_ok(status, &body, "session")?;
    let session: Session = serde_json::from_slice(&body).context("the Session object")?;
    let account = session
        .primary_accounts
        .get("urn:ietf:params:jmap:mail")
        .context("no mail account in the Session")?;
    let (status, body) = c.request("POST", "/jmap/api", &auth, &newest_request(account)).await?;
    check_ok(status, &body, "Email/query + Email/get")?;
    let answer: ApiResponse = serde_json::from_slice(&body).context("the API response")?;
    let [(_, query, _), (_, get, _)] = &answer.method_responses[..] else {
        anyhow::bail!("expected two method responses");
    };
    let ids = query.ids.as_deref().context("Email/query without ids")?;
    let list = get.list.as_deref().context("Email/get without list")?;
    // In any order (RFC 8620 §5.1), each with the id it was asked by.
    ensure!(
        list.len() <= ids.len() && list.iter().all(|e| e.id.as_ref().is_some_and(|id| ids.contains(id))),
        "Email/get did not give back the ids Email/query found"
    );
    Ok(())
}

fn newest_request(account: &str) -> String {
    format!(
        r##"{{"using":["urn:ietf:params:jmap:core","urn:ietf:params:jmap:mail"],"methodCalls":[["Email/query",{{"accountId":"{account}","sort":[{{"property":"receivedAt","isAscending":false}}],"limit":{NEWEST}}},"q"],["Email/get",{{"accountId":"{account}","#ids":{{"resultOf":"q","name":"Email/query","path":"/ids"}},"properties":["id","messageId","mailboxIds"]}},"g"]]}}"##
    )
}
