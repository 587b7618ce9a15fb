//! The TRANSACTION state's commands (RFC 1939 §5, §7) on the session's
//! [`Maildrop`], and QUIT's UPDATE state. Reads go to the store; the one
//! write, at QUIT, goes through the shard actor ([`Maildrop::update`]).

use std::sync::Arc;

use meshmail_actors::node::NodeCtx;

use super::maildrop::{Maildrop, Missing, body_of};
use super::refuse;
use crate::net::{Conn, ConnError};
use crate::pop3::wire::response::{self, Code, Stuffer, scan_line, uid_line};
use crate::pop3::wire::{Command, MessageNumber};

/// Bytes of a message encoded per write while RETR streams it: the reply
/// buffer never holds more than about this much of a message.
const SEND_CHUNK_BYTES: usize = 64 * 1024;

/// Runs one command of the TRANSACTION state (not QUIT, not the
/// AUTHORIZATION state's, which the dispatcher answers).
pub(super) async fn run(
    ctx: &Arc<NodeCtx>,
    conn: &mut Conn,
    drop: &mut Maildrop,
    cmd: Command,
) -> Result<(), ConnError> {
    let name = cmd.name();
    match cmd {
        Command::Stat => {
            let (count, octets) = drop.stat();
            conn.send(&response::ok(&format!("{count} {octets}")));
        }
        Command::List(None) => {
            let lines: Vec<String> = drop.sizes().into_iter().map(|(n, s)| scan_line(n, s)).collect();
            let (count, octets) = drop.stat();
            conn.send(&response::multi_line(
                &format!("{count} messages ({octets} octets)"),
                &lines,
            ));
        }
        Command::List(Some(n)) => answer(conn, name, drop.size(n).map(|s| scan_line(n as usize, s))),
        Command::Uidl(None) => {
            let lines: Vec<String> = drop.unique_ids().into_iter().map(|(n, id)| uid_line(n, &id)).collect();
            conn.send(&response::multi_line("Unique ids follow", &lines));
        }
        Command::Uidl(Some(n)) => answer(conn, name, drop.unique_id(n).map(|id| uid_line(n as usize, &id))),
        Command::Dele(n) => answer(conn, name, drop.dele(n).map(|()| "Marked to be deleted.".to_string())),
        Command::Noop => conn.send(&response::ok("")),
        Command::Rset => {
            drop.rset();
            let (count, octets) = drop.stat();
            conn.send(&response::ok(&format!(
                "Maildrop has {count} messages ({octets} octets)."
            )));
        }
        Command::Retr(n) => {
            if send_message(ctx, conn, drop, n, None).await? {
                drop.mark_retrieved(n);
            }
        }
        Command::Top(n, lines) => {
            send_message(ctx, conn, drop, n, Some(lines)).await?;
        }
        // The dispatcher answers QUIT, CAPA and the AUTHORIZATION state's.
        other => refuse(conn, other.name(), None, "Not in the TRANSACTION state."),
    }
    Ok(())
}

fn answer(conn: &mut Conn, name: &'static str, r: Result<String, Missing>) {
    match r {
        Ok(text) => conn.send(&response::ok(&text)),
        Err(m) => refuse(conn, name, None, &m.to_string()),
    }
}

/// RETR (`top` None) or TOP: reads the body, then answers `+OK` and the
/// stuffed message, or `-ERR` if it cannot be read. True when sent.
async fn send_message(
    ctx: &Arc<NodeCtx>,
    conn: &mut Conn,
    drop: &Maildrop,
    n: MessageNumber,
    top: Option<u32>,
) -> Result<bool, ConnError> {
    let name = if top.is_some() { "TOP" } else { "RETR" };
    let (uid, size) = match drop.target(n) {
        Ok(t) => t,
        Err(m) => {
            refuse(conn, name, None, &m.to_string());
            return Ok(false);
        }
    };
    let body = match body_of(&ctx.db, drop, uid).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            refuse(conn, name, None, "The message was removed by another session.");
            return Ok(false);
        }
        Err(e) => {
            tracing::warn!(uid, error = %e, "pop3: reading a message failed");
            refuse(
                conn,
                name,
                Some(Code::SysTemp),
                "Unable to read the message; try again later.",
            );
            return Ok(false);
        }
    };
    let bytes = match ctx.blobs.get(&ctx.db, &body).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(uid, error = %e, "pop3: message body unreadable");
            refuse(
                conn,
                name,
                Some(Code::SysTemp),
                "Unable to read the message; try again later.",
            );
            return Ok(false);
        }
    };
    conn.send(&response::ok(&match top {
        None => format!("{size} octets"),
        Some(_) => "Top of message follows".to_string(),
    }));
    let mut stuffer = top.map_or_else(Stuffer::retr, Stuffer::top);
    let mut buf = Vec::with_capacity(SEND_CHUNK_BYTES.min(bytes.len()) + 64);
    let mut sent = 0u64;
    for chunk in bytes.chunks(SEND_CHUNK_BYTES) {
        stuffer.push(chunk, &mut buf);
        sent += buf.len() as u64;
        conn.send(&buf);
        buf.clear();
        if stuffer.is_done() {
            break;
        }
        if bytes.len() > SEND_CHUNK_BYTES {
            conn.flush().await?;
        }
    }
    stuffer.finish(&mut buf);
    sent += buf.len() as u64;
    conn.send(&buf);
    metrics::counter!("meshmail_pop3_sent_bytes_total").increment(sent);
    Ok(true)
}

/// QUIT in the TRANSACTION state: the UPDATE state, then the answer
/// (RFC 1939 §6: `-ERR` when some deleted messages were not removed).
pub(super) async fn quit(ctx: &Arc<NodeCtx>, conn: &mut Conn, drop: &Maildrop) {
    match drop.update(ctx).await {
        Ok(done) => {
            metrics::counter!("meshmail_pop3_expunged_total").increment(done.expunged as u64);
            conn.send(&response::ok("meshmail POP3 signing off."));
        }
        Err(e) => {
            tracing::warn!(error = %e, "pop3: the UPDATE state failed");
            refuse(
                conn,
                "QUIT",
                Some(Code::SysTemp),
                "Some deleted messages were not removed; try again.",
            );
        }
    }
}
