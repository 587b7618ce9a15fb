//! Debian's Dovecot LMTP (`dovecot-lmtpd`) as the peer of `bench smtp`:
//! started on loopback with a throwaway configuration in a temporary
//! directory (config, sockets, maildirs, log), never reading /etc/dovecot,
//! with `mail_fsync = always` so that its 250 means durable as ours does.
//! Any recipient is accepted (static userdb, `allow_all_users`), one maildir
//! per recipient.
//!
//! Run as root, the mail is owned by the `dovecot` user (Dovecot refuses
//! mail access as uid 0); otherwise by the caller.

use std::ffi::CString;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long Dovecot gets to greet on its LMTP port.
const START_TIMEOUT_S: u64 = 30;

const CONFIG: &str = "\
protocols = lmtp
listen = 127.0.0.1
base_dir = {base}/run
state_dir = {base}/state
log_path = {base}/dovecot.log
info_log_path = {base}/dovecot.log
ssl = no
mail_location = maildir:{base}/mail/%u
mail_fsync = always
first_valid_uid = {uid}
last_valid_uid = 0
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
passdb {
  driver = static
  args = nopassword=y
}
userdb {
  driver = static
  args = uid={uid} gid={gid} home={base}/home/%u allow_all_users=yes
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = {port}
  }
  unix_listener lmtp {
    mode = 0666
  }
  process_min_avail = 4
}
service anvil {
  chroot =
}
protocol lmtp {
  lmtp_save_to_detail_mailbox = no
}
";

/// The Dovecot binary, if installed.
pub fn binary() -> Option<PathBuf> {
    ["/usr/sbin/dovecot", "/usr/local/sbin/dovecot"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .filter(|_| Path::new("/usr/lib/dovecot/lmtp").exists())
}

/// A running Dovecot; stopped (and its directory removed) on drop.
pub struct DovecotLmtp {
    child: Child,
    pub addr: String,
    base: tempfile::TempDir,
}

impl DovecotLmtp {
    pub fn start(bin: &Path) -> anyhow::Result<DovecotLmtp> {
        let (child, addr, base) = start_throwaway(bin, "meshmail-dovecot-", CONFIG, b"220", |_, _| Ok(()))?;
        Ok(DovecotLmtp { child, addr, base })
    }

    /// Where the maildirs are (for its bytes on disk).
    pub fn mail_dir(&self) -> PathBuf {
        self.base.path().join("mail")
    }
}

impl Drop for DovecotLmtp {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Stops a Dovecot master: SIGTERM lets it stop its children (SIGKILL
/// would orphan them), SIGKILL only if it has not exited within 10 s.
pub(crate) fn stop(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts Dovecot from `template` (placeholders `{base}`, `{uid}`, `{gid}`,
/// `{user}`, `{group}`, `{port}`) in a throwaway directory its unprivileged
/// processes can reach, with `run`, `state`, `mail` and `home` below it;
/// `setup` (given the directory and the mail owner's name) writes what else
/// the config names. Returns once the port answers with `greeting`.
pub(crate) fn start_throwaway(
    bin: &Path,
    prefix: &str,
    template: &str,
    greeting: &[u8],
    setup: impl FnOnce(&Path, &str) -> anyhow::Result<()>,
) -> anyhow::Result<(Child, String, tempfile::TempDir)> {
    let base = tempfile::Builder::new().prefix(prefix).tempdir()?;
    let root = base.path();
    // Dovecot's unprivileged processes must reach the mail below it.
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))?;
    for d in ["run", "state", "mail", "home"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    let (uid, gid, user, group) = mail_owner()?;
    for d in ["mail", "home"] {
        std::os::unix::fs::chown(root.join(d), Some(uid), Some(gid))?;
    }
    setup(root, &user)?;
    let port = free_port()?;
    let conf = template
        .replace("{base}", &root.display().to_string())
        .replace("{uid}", &uid.to_string())
        .replace("{gid}", &gid.to_string())
        .replace("{user}", &user)
        .replace("{group}", &group)
        .replace("{port}", &port.to_string());
    let conf_path = root.join("dovecot.conf");
    std::fs::write(&conf_path, conf)?;
    let mut child = Command::new(bin)
        .arg("-F")
        .arg("-c")
        .arg(&conf_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting dovecot")?;
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_S);
    loop {
        if let Some(status) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                e.read_to_string(&mut err).ok();
            }
            let log = std::fs::read_to_string(root.join("dovecot.log")).unwrap_or_default();
            bail!("dovecot exited ({status}): {err}{log}");
        }
        if greets(&addr, greeting) {
            return Ok((child, addr, base));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("dovecot did not greet on {addr} within {START_TIMEOUT_S} s");
        }
        // The master binds, then forks its service processes: poll for the
        // greeting (there is no readiness line to wait for).
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn greets(addr: &str, greeting: &[u8]) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = vec![0u8; greeting.len()];
    s.read_exact(&mut buf).is_ok() && buf == greeting
}

/// Dovecot cannot report a port it picked, so the kernel picks one here and
/// it is handed over; the short race is acceptable on loopback.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// (uid, gid, user, group) that owns the mail: `dovecot` when run as root.
pub(crate) fn mail_owner() -> anyhow::Result<(u32, u32, String, String)> {
    // SAFETY: getpwnam/getpwuid/getgrgid return pointers into static
    // storage, read at once on this thread and not kept.
    unsafe {
        let pw = if libc::geteuid() == 0 {
            let name = CString::new("dovecot")?;
            libc::getpwnam(name.as_ptr())
        } else {
            libc::getpwuid(libc::geteuid())
        };
        if pw.is_null() {
            bail!("no dovecot user (is dovecot-core installed?)");
        }
        let user = std::ffi::CStr::from_ptr((*pw).pw_name).to_string_lossy().into_owned();
        let (uid, gid) = ((*pw).pw_uid, (*pw).pw_gid);
        let gr = libc::getgrgid(gid);
        if gr.is_null() {
            bail!("no group {gid}");
        }
        let group = std::ffi::CStr::from_ptr((*gr).gr_name).to_string_lossy().into_owned();
        Ok((uid, gid, user, group))
    }
}
