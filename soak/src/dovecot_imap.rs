//! Debian's Dovecot IMAP (`dovecot-imapd`) as the peer of `bench mailbox`:
//! started on loopback with a throwaway configuration in a temporary
//! directory (config, sockets, maildirs, log), never reading /etc/dovecot.
//! `mail_fsync = always`, so that its APPEND OK means durable as ours does.
//! One user, with a plaintext password from a passwd-file (loopback only).
//!
//! Run as root, the mail is owned by the `dovecot` user (Dovecot refuses
//! mail access as uid 0); otherwise by the caller. The ownership and port
//! helpers are shared with the LMTP peer of `bench smtp`.

use std::path::{Path, PathBuf};
use std::process::Child;

use crate::dovecot_peer::mail_owner;

const CONFIG: &str = "\
protocols = imap
listen = 127.0.0.1
base_dir = {base}/run
state_dir = {base}/state
log_path = {base}/dovecot.log
info_log_path = {base}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{base}/mail/%u
mail_fsync = always
first_valid_uid = {uid}
last_valid_uid = 0
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {base}/passwd
}
userdb {
  driver = static
  args = uid={uid} gid={gid} home={base}/home/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = {port}
  }
  inet_listener imaps {
    port = 0
  }
}
service anvil {
  chroot =
}
protocol imap {
  mail_max_userip_connections = 1000
}
";

/// The Dovecot binary, if Dovecot's IMAP server is installed.
pub fn binary() -> Option<PathBuf> {
    ["/usr/sbin/dovecot", "/usr/local/sbin/dovecot"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .filter(|_| Path::new("/usr/lib/dovecot/imap").exists())
}

/// A running Dovecot IMAP server; stopped (and its directory removed) on drop.
pub struct DovecotImap {
    child: Child,
    pub addr: String,
    base: tempfile::TempDir,
    user: String,
}

impl DovecotImap {
    /// Starts Dovecot with one account `user` / `password`.
    pub fn start(bin: &Path, user: &str, password: &str) -> anyhow::Result<DovecotImap> {
        let (child, addr, base) =
            crate::dovecot_peer::start_throwaway(bin, "meshmail-dovecot-imap-", CONFIG, b"* OK", |root, _| {
                std::fs::write(root.join("passwd"), format!("{user}:{{PLAIN}}{password}\n"))?;
                Ok(())
            })?;
        Ok(DovecotImap {
            child,
            addr,
            base,
            user: user.to_string(),
        })
    }
}

impl DovecotImap {
    /// Fills the user's INBOX by writing maildir files directly (flags in
    /// the file names, `:2,S` for `\Seen`), owned like Dovecot's own mail:
    /// Dovecot serializes APPENDs to one maildir and slows down as it grows
    /// (30,000 pipelined APPENDs took over 25 minutes here), and the fill is
    /// not the measurement. Dovecot indexes the files at the next SELECT,
    /// which the bench makes before measuring. Call before any session has
    /// opened the INBOX.
    pub fn fill_inbox_maildir<'a>(&self, messages: impl Iterator<Item = (bool, &'a [u8])>) -> anyhow::Result<()> {
        let (uid, gid, _, _) = mail_owner()?;
        let inbox = self.base.path().join("mail").join(&self.user);
        for d in ["", "cur", "new", "tmp"] {
            std::fs::create_dir_all(inbox.join(d))?;
            std::os::unix::fs::chown(inbox.join(d), Some(uid), Some(gid))?;
        }
        // Distinct, increasing base names: Dovecot assigns UIDs in the
        // order it finds them, which need not be this one.
        for (i, (seen, raw)) in messages.enumerate() {
            let name = format!("{}.M{i}P1.bench:2,{}", 1_700_000_000 + i, if seen { "S" } else { "" });
            let path = inbox.join("cur").join(name);
            std::fs::write(&path, raw)?;
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
        }
        Ok(())
    }
}

impl Drop for DovecotImap {
    fn drop(&mut self) {
        super::dovecot_peer::stop(&mut self.child);
    }
}
