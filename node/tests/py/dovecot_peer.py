"""Starts Debian's Dovecot (dovecot-imapd, dovecot-lmtpd, and with
`pop3=True` dovecot-pop3d) on loopback with a throwaway configuration, as
the reference server that meshmail's IMAP and POP3 answers and ingest speed
are compared with.

    with Dovecot(tmpdir, {"user@example.org": "secret"}, pop3=True) as d:
        d.imap_port, d.lmtp_port, d.pop3_port

Everything (config, sockets, mail, logs) lives under `tmpdir`; the system's
/etc/dovecot is not read. Run as root, mail is owned by the `dovecot`
user (Dovecot refuses mail access as uid 0); otherwise by the caller.
"""
import os
import pwd
import shutil
import socket
import subprocess
import time

CONFIG = """\
protocols = {protocols}
listen = 127.0.0.1
base_dir = {base}/run
state_dir = {base}/state
log_path = {base}/dovecot.log
info_log_path = {base}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{base}/mail/%u
mail_fsync = {fsync}
first_valid_uid = {uid}
last_valid_uid = 0
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {base}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={base}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
  unix_listener lmtp {{
    mode = 0666
  }}
}}
service anvil {{
  chroot =
}}
protocol imap {{
  mail_max_userip_connections = 1000
}}
protocol lmtp {{
  lmtp_save_to_detail_mailbox = no
}}
"""

# Only with pop3=True: without dovecot-pop3d, `protocols = pop3` stops
# Dovecot from starting, and the IMAP tests need no POP3.
POP3_CONFIG = """\
service pop3-login {{
  inet_listener pop3 {{
    address = 127.0.0.1
    port = {pop3_port}
  }}
  inet_listener pop3s {{
    port = 0
  }}
}}
protocol pop3 {{
  # Dovecot's default, spelled out: meshmail's UIDL has the same layout.
  pop3_uidl_format = %08Xu%08Xv
  # Also the default: RETR sets \\Seen at QUIT (meshmail does the same).
  pop3_no_flag_updates = no
  mail_max_userip_connections = 1000
}}
"""


def free_port():
    # Dovecot cannot report a port it picked itself, so the port comes from
    # the kernel here and is handed over; the short race is acceptable for
    # a test peer on loopback.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary():
    for path in ("/usr/sbin/dovecot", shutil.which("dovecot") or ""):
        if path and os.path.exists(path):
            return path
    return None


class Dovecot:
    def __init__(self, base, users, pop3=False, fsync=True):
        self.base = os.path.abspath(base)
        self.users = users
        self.imap_port = free_port()
        self.lmtp_port = free_port()
        self.pop3_port = free_port() if pop3 else None
        self.proc = None
        # Off only where Dovecot is a bulk source (migrate.py), not where
        # its speed is measured against meshmail's.
        self.fsync = "always" if fsync else "never"

    def __enter__(self):
        os.makedirs(self.base, exist_ok=True)
        # Test temp dirs are 0700; Dovecot's unprivileged processes must
        # reach the mail below them.
        d = self.base
        while d not in ("/", "") and os.stat(d).st_uid == os.geteuid() and os.stat(d).st_mode & 0o005 != 0o005:
            os.chmod(d, os.stat(d).st_mode | 0o755)
            d = os.path.dirname(d)
        for d in ("run", "state", "mail", "home"):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("dovecot")
        else:
            pw = pwd.getpwuid(os.geteuid())
        import grp
        group = grp.getgrgid(pw.pw_gid).gr_name
        with open(os.path.join(self.base, "passwd"), "w") as f:
            for u, p in self.users.items():
                f.write(f"{u}:{{PLAIN}}{p}\n")
        conf = os.path.join(self.base, "dovecot.conf")
        with open(conf, "w") as f:
            protocols = "imap lmtp pop3" if self.pop3_port else "imap lmtp"
            f.write(CONFIG.format(base=self.base, uid=pw.pw_uid, gid=pw.pw_gid, user=pw.pw_name,
                                  group=group, imap_port=self.imap_port, lmtp_port=self.lmtp_port,
                                  protocols=protocols, fsync=self.fsync))
            if self.pop3_port:
                f.write(POP3_CONFIG.format(pop3_port=self.pop3_port))
        for d in ("mail", "home"):
            os.chown(os.path.join(self.base, d), pw.pw_uid, pw.pw_gid)
        self.proc = subprocess.Popen([binary(), "-F", "-c", conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("dovecot exited: " + self.proc.stderr.read().decode() + self.log())
            try:
                with socket.create_connection(("127.0.0.1", self.imap_port), timeout=2) as s:
                    if s.recv(100).startswith(b"* OK"):
                        return self
            except OSError:
                # Not listening yet: the master forks the login processes
                # after binding; poll its greeting.
                time.sleep(0.05)
        raise RuntimeError("dovecot did not greet within 30 s\n" + self.log())

    def log(self):
        try:
            with open(os.path.join(self.base, "dovecot.log")) as f:
                return f.read()
        except OSError:
            return ""

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return False
