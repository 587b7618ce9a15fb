//! The script commands of an authenticated session (RFC 5804 §2.3–§2.12),
//! each answered from one operation of [`crate::managesieve::scripts`]
//! (shared with JMAP's SieveScript methods): one store transaction on the
//! account's records in `storage::model::sieve`, the records delivery
//! reads. A script is compiled before it is stored (PUTSCRIPT) or instead
//! (CHECKSCRIPT), so one that would fail at every delivery is refused with
//! its line and column and nothing changes. Here: the mapping of each
//! refusal to its response code (RFC 5804 §1.3).

use meshmail_storage::ids::AccountId;
use meshmail_storage::model::sieve::SCRIPTS_MAX;

use super::ManageSieve;
use crate::managesieve::scripts::{self, ScriptError};
use crate::managesieve::wire::Command;
use crate::managesieve::wire::response::{self, Code, Status};
use crate::net::Conn;
use crate::sieve::SCRIPT_BYTES_MAX;

/// The NO a script operation's refusal is answered with.
fn refusal(e: &ScriptError) -> (Option<Code>, String) {
    let code = match e {
        ScriptError::Invalid(_) => None,
        ScriptError::TooLarge => Some(Code::MaxSize),
        ScriptError::NotFound => Some(Code::NonExistent),
        ScriptError::AlreadyExists => Some(Code::AlreadyExists),
        ScriptError::Active => Some(Code::Active),
        ScriptError::TooMany => Some(Code::MaxScripts),
        ScriptError::Store(_) => Some(Code::TryLater),
    };
    let text = match e {
        ScriptError::Invalid(t) => t.clone(),
        ScriptError::TooLarge => format!("Scripts are limited to {SCRIPT_BYTES_MAX} bytes."),
        ScriptError::NotFound => "There is no script by that name.".into(),
        ScriptError::AlreadyExists => "A script by that name already exists.".into(),
        ScriptError::Active => "The active script cannot be deleted.".into(),
        ScriptError::TooMany => format!("Too many scripts for this account (at most {SCRIPTS_MAX})."),
        ScriptError::Store(_) => "The store is unavailable; try again later.".into(),
    };
    (code, text)
}

impl ManageSieve {
    /// Runs a script command for the logged-in `account` (`email`).
    pub(super) async fn script_command(&mut self, conn: &mut Conn, account: AccountId, email: &str, cmd: Command) {
        let db = self.shared.ctx.db.clone();
        let writes = matches!(
            cmd,
            Command::PutScript { .. }
                | Command::SetActive { .. }
                | Command::DeleteScript { .. }
                | Command::RenameScript { .. }
        );
        let done: Result<(), ScriptError> = match cmd {
            Command::HaveSpace { name, size } => {
                if size > SCRIPT_BYTES_MAX as u64 {
                    Err(ScriptError::TooLarge)
                } else {
                    db.read("managesieve_havespace", |txn| {
                        let name = name.clone();
                        async move { scripts::room_for(&txn, account, &name).await }
                    })
                    .await
                    .map_err(ScriptError::from)
                    .and_then(|room| if room { Ok(()) } else { Err(ScriptError::TooMany) })
                }
            }
            Command::PutScript { name, script } => scripts::put(&db, account, email, &name, &script, false)
                .await
                .map(|_| ()),
            Command::CheckScript { script } => match scripts::check(&script, email) {
                Ok(_) => return self.reply(conn, Status::Ok, None, "Script is valid."),
                Err(e) => Err(e),
            },
            Command::ListScripts => return self.list(conn, account).await,
            Command::GetScript { name } => return self.get(conn, account, name).await,
            Command::SetActive { name } => scripts::activate(&db, account, name.as_deref()).await,
            Command::DeleteScript { name } => scripts::delete(&db, account, &name).await,
            Command::RenameScript { old, new } => scripts::rename(&db, account, &old, &new).await,
            // The dispatcher answers the others before a login or after.
            _ => return self.reply(conn, Status::No, None, "Not allowed now."),
        };
        match done {
            Ok(()) => {
                if writes {
                    scripts::changed(&self.shared.ctx, account);
                }
                self.reply(conn, Status::Ok, None, "Done.")
            }
            Err(e) => self.refused(conn, &e),
        }
    }

    fn refused(&mut self, conn: &mut Conn, e: &ScriptError) {
        match e {
            ScriptError::Store(err) => tracing::warn!(error = %err, "managesieve: store operation failed"),
            ScriptError::Invalid(_) | ScriptError::TooLarge => {
                metrics::counter!("meshmail_managesieve_scripts_refused_total").increment(1);
            }
            _ => {}
        }
        let (code, text) = refusal(e);
        self.reply(conn, Status::No, code, &text);
    }

    async fn list(&mut self, conn: &mut Conn, account: AccountId) {
        let (scripts, active) = match scripts::list(&self.shared.ctx.db, account).await {
            Ok(l) => l,
            Err(e) => return self.refused(conn, &e),
        };
        let mut out = Vec::new();
        for s in &scripts {
            response::string(&mut out, s.name.as_bytes());
            if active.as_deref() == Some(s.name.as_str()) {
                out.extend_from_slice(b" ACTIVE");
            }
            out.extend_from_slice(b"\r\n");
        }
        conn.send(&out);
        self.reply(conn, Status::Ok, None, "Listscripts completed.");
    }

    async fn get(&mut self, conn: &mut Conn, account: AccountId, name: String) {
        match scripts::get(&self.shared.ctx.db, account, &name).await {
            Ok(script) => {
                let mut out = Vec::with_capacity(script.source.len() + 16);
                response::literal(&mut out, script.source.as_bytes());
                out.extend_from_slice(b"\r\n");
                conn.send(&out);
                self.reply(conn, Status::Ok, None, "Getscript completed.");
            }
            Err(e) => self.refused(conn, &e),
        }
    }
}
