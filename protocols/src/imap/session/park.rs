//! Parked IDLE sessions (Dovecot calls this hibernation). A client in IDLE
//! may say nothing for 29 minutes, and most of a mail server's connections
//! are such clients. After `[imap] park_idle_after_secs` of quiet the
//! session gives up its actor (~10 KB of channels) and packs its state: the
//! UID list becomes runs, the connection's buffers are returned. A task then
//! waits on the socket, the change hint and the autologout timer, and wakes
//! the session in a new actor when one fires. The client sees one unbroken
//! IDLE: nothing is sent on parking or waking except the updates IDLE owes.

use async_trait::async_trait;
use meshmail_actors::session::{Parked, Session};
use meshmail_actors::shard::ChangeHint;

use super::uid_runs::UidRuns;
use super::{Imap, ImapSession, Next, Phase};
use crate::net::{Conn, ConnError};

/// What woke a parked session.
pub enum Wake {
    /// The client sent something (DONE, presumably) or closed.
    Client,
    /// The account changed: untagged updates are due.
    Change(ChangeHint),
    /// Autologout.
    TimedOut,
}

impl Wake {
    fn label(&self) -> &'static str {
        match self {
            Wake::Client => "client",
            Wake::Change(_) => "change",
            Wake::TimedOut => "timeout",
        }
    }
}

/// An IDLE session without its actor.
pub struct ParkedImap {
    imap: Imap,
    conn: Conn,
    /// IDLE's tag, for its tagged OK when DONE comes.
    tag: String,
    /// The selected mailbox's UIDs while parked (its `uids` is empty).
    uids: UidRuns,
}

impl ParkedImap {
    /// Packs a session whose connection already agreed to park
    /// (`Conn::try_park`).
    pub(super) fn pack(mut imap: Imap, conn: Conn, tag: String) -> Box<ParkedImap> {
        let mut uids = UidRuns::default();
        if let Phase::Selected(_, sel) = &mut imap.phase {
            uids = UidRuns::pack(&sel.uids);
            sel.uids = Vec::new();
            sel.pending_expunges.shrink_to_fit();
            sel.reported.shrink_to_fit();
            sel.announced.shrink_to_fit();
        }
        Box::new(ParkedImap { imap, conn, tag, uids })
    }

    /// The session as it was before [`ParkedImap::pack`].
    pub(super) fn unpack(self: Box<Self>) -> (Imap, Conn, String) {
        let ParkedImap {
            mut imap,
            conn,
            tag,
            uids,
        } = *self;
        if let Phase::Selected(_, sel) = &mut imap.phase {
            sel.uids = uids.unpack();
        }
        (imap, conn, tag)
    }
}

#[async_trait]
impl Parked for ParkedImap {
    fn kind(&self) -> &'static str {
        "imap_session"
    }

    async fn wake(self: Box<Self>) -> Box<dyn Session> {
        let wake = {
            let hints = self.imap.st.hints.as_ref();
            let hint = async move {
                match hints {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                h = hint => Wake::Change(h),
                r = self.conn.socket_readable() => match r {
                    Err(ConnError::TimedOut) => Wake::TimedOut,
                    // An error is the session's to see, on its next read.
                    Ok(()) | Err(_) => Wake::Client,
                },
            }
        };
        metrics::counter!("meshmail_imap_session_wakes_total", "reason" => wake.label()).increment(1);
        Box::new(ImapSession::resumed(self, wake))
    }
}

impl Imap {
    /// Carries on a parked IDLE in a new actor, where it left off.
    pub(super) async fn resume_idle(&mut self, conn: &mut Conn, tag: &str, wake: Wake) -> Result<Next, ConnError> {
        match wake {
            Wake::Client => {}
            Wake::Change(hint) => self.push_changes(conn, hint).await?,
            Wake::TimedOut => return Err(ConnError::TimedOut),
        }
        self.idle_wait(conn, tag).await
    }
}
