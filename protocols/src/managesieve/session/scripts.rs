//! The script commands of an authenticated session (RFC 5804 §2.3–§2.12):
//! each one store transaction on the account's records in
//! `storage::model::sieve`, the records delivery reads. A script is
//! compiled before it is stored (PUTSCRIPT) or instead (CHECKSCRIPT), so
//! one that would fail at every delivery is refused with its line and
//! column and nothing changes.

use meshmail_storage::ids::AccountId;
use meshmail_storage::model::sieve::{self as store, SCRIPTS_MAX};
use meshmail_storage::{Database, StorageError};

use super::ManageSieve;
use crate::managesieve::wire::Command;
use crate::managesieve::wire::response::{self, Code, Status};
use crate::net::Conn;
use crate::sieve::{self, SCRIPT_BYTES_MAX, SieveError};

/// What a script command's transaction found, when it is not a plain OK.
enum Refusal {
    NonExistent,
    AlreadyExists,
    Active,
    MaxScripts,
}

impl Refusal {
    fn answer(&self) -> (Code, &'static str) {
        match self {
            Refusal::NonExistent => (Code::NonExistent, "There is no script by that name."),
            Refusal::AlreadyExists => (Code::AlreadyExists, "A script by that name already exists."),
            Refusal::Active => (Code::Active, "The active script cannot be deleted."),
            Refusal::MaxScripts => (Code::MaxScripts, "Too many scripts for this account."),
        }
    }
}

/// The answer to a compile error: the line and column first, as clients
/// show it next to the script (Dovecot's `line N: ...` shape).
fn compile_error_text(e: &SieveError) -> (Option<Code>, String) {
    let text = e.to_string();
    match e.pos() {
        Some(pos) => {
            let what = text.strip_prefix(&format!("{pos}: ")).unwrap_or(&text);
            (None, format!("line {}, column {}: {what}", pos.line, pos.col))
        }
        None => (Some(Code::MaxSize), text),
    }
}

/// Whether one more script may be stored under `name`.
async fn room_for(txn: &meshmail_storage::kv::Txn, account: AccountId, name: &str) -> Result<bool, StorageError> {
    Ok(store::get(txn, account, name).await?.is_some() || store::list(txn, account).await?.len() < SCRIPTS_MAX)
}

impl ManageSieve {
    /// Runs a script command for the logged-in `account` (`email`).
    pub(super) async fn script_command(&mut self, conn: &mut Conn, account: AccountId, email: &str, cmd: Command) {
        let db = self.shared.ctx.db.clone();
        let done: Result<Result<(), Refusal>, StorageError> = match cmd {
            Command::HaveSpace { name, size } => {
                if size > SCRIPT_BYTES_MAX as u64 {
                    let text = format!("Scripts are limited to {SCRIPT_BYTES_MAX} bytes.");
                    return self.reply(conn, Status::No, Some(Code::MaxSize), &text);
                }
                db.read("managesieve_havespace", |txn| {
                    let name = name.clone();
                    async move {
                        let room = room_for(&txn, account, &name).await?;
                        Ok::<_, StorageError>(room.then_some(()).ok_or(Refusal::MaxScripts))
                    }
                })
                .await
            }
            Command::PutScript { name, script } => {
                let Some(text) = self.compiled(conn, email, &script) else {
                    return;
                };
                db.run("managesieve_putscript", |txn| {
                    let (name, text) = (name.clone(), text.clone());
                    async move {
                        if !room_for(&txn, account, &name).await? {
                            return Ok(Err(Refusal::MaxScripts));
                        }
                        store::put(&txn, account, &name, &text).await?;
                        Ok::<_, StorageError>(Ok(()))
                    }
                })
                .await
            }
            Command::CheckScript { script } => {
                if self.compiled(conn, email, &script).is_some() {
                    self.reply(conn, Status::Ok, None, "Script is valid.");
                }
                return;
            }
            Command::ListScripts => return self.list(conn, account).await,
            Command::GetScript { name } => return self.get(conn, account, name).await,
            cmd @ (Command::SetActive { .. } | Command::DeleteScript { .. } | Command::RenameScript { .. }) => {
                change(&db, account, cmd).await
            }
            // The dispatcher answers the others before a login or after.
            _ => return self.reply(conn, Status::No, None, "Not allowed now."),
        };
        self.answer(conn, done);
    }

    fn answer(&mut self, conn: &mut Conn, done: Result<Result<(), Refusal>, StorageError>) {
        match done {
            Ok(Ok(())) => self.reply(conn, Status::Ok, None, "Done."),
            Ok(Err(r)) => {
                let (code, text) = r.answer();
                self.reply(conn, Status::No, Some(code), text);
            }
            Err(e) => self.store_failed(conn, &e),
        }
    }

    fn store_failed(&mut self, conn: &mut Conn, e: &StorageError) {
        tracing::warn!(error = %e, "managesieve: store operation failed");
        self.reply(
            conn,
            Status::No,
            Some(Code::TryLater),
            "The store is unavailable; try again later.",
        );
    }

    /// The script's text when it compiles; else the NO is queued.
    fn compiled(&mut self, conn: &mut Conn, email: &str, script: &[u8]) -> Option<String> {
        let ctx = sieve::Context {
            own_addresses: vec![email.to_ascii_lowercase()],
        };
        if let Err(e) = sieve::compile(script, &ctx) {
            metrics::counter!("meshmail_managesieve_scripts_refused_total").increment(1);
            let (code, text) = compile_error_text(&e);
            self.reply(conn, Status::No, code, &text);
            return None;
        }
        // compile() refuses invalid UTF-8 with its position.
        String::from_utf8(script.to_vec()).ok()
    }

    async fn list(&mut self, conn: &mut Conn, account: AccountId) {
        let listed = self
            .shared
            .ctx
            .db
            .read("managesieve_listscripts", |txn| async move {
                let scripts = store::list(&txn, account).await?;
                let active = store::active_ref(&txn, account).await?.map(|a| a.name);
                Ok::<_, StorageError>((scripts, active))
            })
            .await;
        let (scripts, active) = match listed {
            Ok(l) => l,
            Err(e) => return self.store_failed(conn, &e),
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
        let got = self
            .shared
            .ctx
            .db
            .read("managesieve_getscript", |txn| {
                let name = name.clone();
                async move { store::get(&txn, account, &name).await }
            })
            .await;
        match got {
            Ok(Some(script)) => {
                let mut out = Vec::with_capacity(script.source.len() + 16);
                response::literal(&mut out, script.source.as_bytes());
                out.extend_from_slice(b"\r\n");
                conn.send(&out);
                self.reply(conn, Status::Ok, None, "Getscript completed.");
            }
            Ok(None) => {
                let (code, text) = Refusal::NonExistent.answer();
                self.reply(conn, Status::No, Some(code), text);
            }
            Err(e) => self.store_failed(conn, &e),
        }
    }
}

/// SETACTIVE, DELETESCRIPT and RENAMESCRIPT: one transaction each.
async fn change(db: &Database, account: AccountId, cmd: Command) -> Result<Result<(), Refusal>, StorageError> {
    match cmd {
        Command::SetActive { name } => {
            db.run("managesieve_setactive", |txn| {
                let name = name.clone();
                async move {
                    if let Some(n) = &name
                        && store::get(&txn, account, n).await?.is_none()
                    {
                        return Ok(Err(Refusal::NonExistent));
                    }
                    store::activate(&txn, account, name.as_deref()).await?;
                    Ok::<_, StorageError>(Ok(()))
                }
            })
            .await
        }
        Command::DeleteScript { name } => {
            db.run("managesieve_deletescript", |txn| {
                let name = name.clone();
                async move {
                    let active = store::active_ref(&txn, account).await?;
                    if active.is_some_and(|a| a.name == name) {
                        return Ok(Err(Refusal::Active));
                    }
                    let existed = store::delete(&txn, account, &name).await?;
                    Ok::<_, StorageError>(existed.then_some(()).ok_or(Refusal::NonExistent))
                }
            })
            .await
        }
        Command::RenameScript { old, new } => {
            let renamed = db
                .run("managesieve_renamescript", |txn| {
                    let (old, new) = (old.clone(), new.clone());
                    async move { store::rename(&txn, account, &old, &new).await }
                })
                .await;
            match renamed {
                Ok(()) => Ok(Ok(())),
                Err(StorageError::NotFound(_)) => Ok(Err(Refusal::NonExistent)),
                Err(StorageError::AlreadyExists(_)) => Ok(Err(Refusal::AlreadyExists)),
                Err(e) => Err(e),
            }
        }
        // script_command sends only the three commands above here.
        _ => Ok(Ok(())),
    }
}
