"""POP3 against a running node with Python's poplib, one scenario per run:

    pop3_suite.py SCENARIO SMTP POP3 POP3S IMAP HTTP USER PASSWORD

Messages reach the account over SMTP (smtplib, which dot-stuffs DATA) before
a scenario reads them over POP3; deletions are checked over IMAP (imaplib).
Every check is an assert: a failing one exits non-zero with its message.
"""
import base64
import imaplib
import os
import poplib
import shutil
import smtplib
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

SCENARIO, SMTP, POP3, POP3S, IMAP, HTTP, USER, PASSWORD = sys.argv[1:9]


def hp(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def message(n, body_lines):
    head = [f"From: sender{n}@example.net", f"To: {USER}", f"Subject: pop3 test {n}",
            f"Message-ID: <pop3-{n}@example.net>", "Date: Mon, 07 Dec 2026 12:00:00 +0000"]
    return "\r\n".join(head + [""] + body_lines) + "\r\n"


# Message 2 has lines that start with "." (stuffed on the wire, RFC 1939 §3)
# and a line that is only ".".
BODIES = [
    ["first body line", "second body line", "third body line"],
    [".dot at the start", "..two dots", ".", "after the lone dot", "end"],
    ["x" * 70 for _ in range(40)],
]
MESSAGES = [message(i + 1, b) for i, b in enumerate(BODIES)]


def deliver():
    with smtplib.SMTP(*hp(SMTP), timeout=60) as s:
        for m in MESSAGES:
            s.sendmail("sender@example.net", [USER], m.encode())


def login(p=None):
    p = p or poplib.POP3(*hp(POP3), timeout=60)
    p.user(USER)
    p.pass_(PASSWORD)
    return p


def imap_count():
    c = imaplib.IMAP4(*hp(IMAP))
    c.login(USER, PASSWORD)
    n = int(c.select("INBOX")[1][0])
    c.logout()
    return n


def live_pop3_sessions():
    text = urllib.request.urlopen(f"http://{HTTP}/metrics", timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith('meshmail_actors_live{kind="pop3_session"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_sessions_gone():
    # The node's own count of POP3 session actors: once 0, a dropped
    # session has finished whatever it would do on its way out.
    deadline = time.time() + 30
    while live_pop3_sessions() > 0:
        assert time.time() < deadline, "the POP3 session did not end"
        time.sleep(0.02)


def err_of(f, *args):
    try:
        f(*args)
    except poplib.error_proto as e:
        return e.args[0].decode()
    raise AssertionError(f"{f.__name__}{args} succeeded; expected -ERR")


def raw(sock_file, line):
    sock_file.write(line)
    sock_file.flush()
    return sock_file.readline()


def capa_and_logins():
    p = poplib.POP3(*hp(POP3), timeout=60)
    caps = p.capa()
    for c in ("TOP", "UIDL", "USER", "RESP-CODES", "PIPELINING", "STLS", "SASL"):
        assert c in caps, (c, caps)
    assert caps["SASL"] == ["PLAIN"], caps
    assert "USER" in caps  # loopback with plaintext allowed
    login(p)
    after = p.capa()
    assert "USER" not in after and "STLS" not in after and "UIDL" in after, after
    assert p.stat()[0] == 3, p.stat()
    p.quit()
    # AUTH PLAIN with an initial response (RFC 5034 §4).
    p = poplib.POP3(*hp(POP3), timeout=60)
    ir = base64.b64encode(f"\0{USER}\0{PASSWORD}".encode()).decode()
    assert p._shortcmd(f"AUTH PLAIN {ir}").startswith(b"+OK")
    assert p.stat()[0] == 3
    p.quit()
    # AUTH PLAIN after an empty challenge.
    p = poplib.POP3(*hp(POP3), timeout=60)
    p._putcmd("AUTH PLAIN")
    assert p._getline()[0].startswith(b"+"), "a continuation"
    assert p._shortcmd(ir).startswith(b"+OK")
    p.quit()
    # AUTH with no mechanism lists them; an unknown one is refused.
    p = poplib.POP3(*hp(POP3), timeout=60)
    assert b"PLAIN" in p._longcmd("AUTH")[1]
    assert "-ERR" in err_of(p._shortcmd, "AUTH CRAM-MD5")
    assert "-ERR" in err_of(p._shortcmd, "APOP user 0123456789abcdef")
    assert "-ERR" in err_of(p.stat)  # not logged in
    p.quit()
    print("capa_and_logins: ok")


def listing():
    # The node adds trace headers (Received, Authentication-Results) at
    # delivery: sizes are the stored message's, bodies the ones sent.
    p = login()
    count, octets = p.stat()
    resp, scan, _ = p.list()
    sizes = [int(l.split()[1]) for l in scan]
    assert count == 3 and octets == sum(sizes), (count, octets, sizes)
    assert p.list(2).split()[1:] == [b"2", str(sizes[1]).encode()], p.list(2)
    _, uid_lines, _ = p.uidl()
    uids = [l.split()[1].decode() for l in uid_lines]
    assert len(set(uids)) == 3, uids
    for u in uids:
        assert 1 <= len(u) <= 70 and all(0x21 <= ord(c) <= 0x7E for c in u), u
    assert p.uidl(3).split()[2].decode() == uids[2]
    headers = []
    for i, m in enumerate(MESSAGES):
        resp, lines, n = p.retr(i + 1)
        got = b"\r\n".join(lines) + b"\r\n"
        assert len(got) == sizes[i], (i, len(got), sizes[i])
        assert resp.startswith(f"+OK {sizes[i]} octets".encode()), resp
        head, body = got.split(b"\r\n\r\n", 1)
        sent_head, sent_body = m.encode().split(b"\r\n\r\n", 1)
        assert body == sent_body and head.endswith(sent_head), (i, got)
        headers.append(head.decode().split("\r\n"))
    # TOP n 0: the header and the blank line; TOP n 2: two body lines.
    _, top0, _ = p.top(2, 0)
    header = headers[1]
    assert [l.decode() for l in top0] == header + [""], top0
    _, top2, _ = p.top(2, 2)
    assert [l.decode() for l in top2] == header + ["", ".dot at the start", "..two dots"], top2
    assert "-ERR" in err_of(p.retr, 4)
    assert "-ERR" in err_of(p.top, 9, 0)
    p.quit()
    # The bytes on the wire: byte-stuffed, the lone "." sent as "..".
    with socket.create_connection(hp(POP3), timeout=60) as s:
        f = s.makefile("rwb")
        f.readline()
        assert raw(f, f"USER {USER}\r\n".encode()).startswith(b"+OK")
        assert raw(f, f"PASS {PASSWORD}\r\n".encode()).startswith(b"+OK")
        assert raw(f, b"RETR 2\r\n").startswith(b"+OK")
        wire = b""
        while not wire.endswith(b"\r\n.\r\n"):
            wire += f.readline()
        assert b"\r\n..dot at the start\r\n...two dots\r\n..\r\nafter" in wire, wire
    # UIDs are stable across sessions.
    p = login()
    assert [l.split()[1].decode() for l in p.uidl()[1]] == uids
    p.quit()
    print("listing: ok")


def dele_quit():
    p = login()
    assert p.dele(1).startswith(b"+OK")
    assert "-ERR" in err_of(p.dele, 1)  # already deleted
    assert "-ERR" in err_of(p.retr, 1)
    assert p.stat()[0] == 2
    assert [l.split()[0] for l in p.list()[1]] == [b"2", b"3"]  # numbers kept
    assert imap_count() == 3, "nothing is deleted before QUIT"
    assert p.quit().startswith(b"+OK")
    assert imap_count() == 2, "QUIT's UPDATE state removed message 1"
    p = login()
    assert p.stat()[0] == 2
    _, lines, _ = p.retr(1)
    assert b"Subject: pop3 test 2" in lines
    p.quit()
    print("dele_quit: ok")


def dele_rset():
    p = login()
    p.dele(1)
    p.dele(3)
    assert p.stat()[0] == 1
    assert p.rset().startswith(b"+OK")
    assert p.stat()[0] == 3
    p.quit()
    assert imap_count() == 3
    print("dele_rset: ok")


def dele_drop():
    p = login()
    p.dele(1)
    p.dele(2)
    assert p.stat()[0] == 1
    # Gone without QUIT: the session never reaches the UPDATE state.
    p.sock.shutdown(socket.SHUT_RDWR)
    p.sock.close()
    wait_sessions_gone()
    assert imap_count() == 3, "a session dropped before QUIT deleted messages"
    p = login()
    assert p.stat()[0] == 3
    p.quit()
    print("dele_drop: ok")


def stls():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    p = poplib.POP3(*hp(POP3), timeout=60)
    caps = p.capa()
    assert "STLS" in caps and "USER" not in caps and "SASL" not in caps, caps
    assert "[AUTH]" in err_of(p.user, USER), "plaintext USER refused before TLS"
    ir = base64.b64encode(f"\0{USER}\0{PASSWORD}".encode()).decode()
    assert "[AUTH]" in err_of(p._shortcmd, f"AUTH PLAIN {ir}")
    p.stls(ctx)
    caps = p.capa()
    assert "STLS" not in caps and "USER" in caps, caps
    assert "-ERR" in err_of(p._shortcmd, "STLS")
    login(p)
    assert p.stat()[0] == 3
    p.quit()
    # POP3S: TLS from the first byte (RFC 8314).
    p = poplib.POP3_SSL(*hp(POP3S), context=ctx, timeout=60)
    assert "STLS" not in p.capa()
    login(p)
    assert p.stat()[0] == 3
    p.quit()
    print("stls: ok")


def bad_login():
    p = poplib.POP3(*hp(POP3), timeout=60)
    p.user(USER)
    assert "[AUTH]" in err_of(p.pass_, "wrong password")
    assert "-ERR" in err_of(p.pass_, PASSWORD), "PASS needs a USER first"
    p.user("nobody@example.org")
    assert "[AUTH]" in err_of(p.pass_, "whatever")
    bad = base64.b64encode(f"\0{USER}\0nope".encode()).decode()
    assert "[AUTH]" in err_of(p._shortcmd, f"AUTH PLAIN {bad}")
    # The third failure closes the connection, as IMAP's does: one more
    # line saying so, then the end of the stream.
    assert p.file.readline().startswith(b"-ERR Too many failed logins"), "the closing line"
    assert p.file.readline() == b"", "the server closed the connection"
    print("bad_login: ok")


def long_lines():
    with socket.create_connection(hp(POP3), timeout=60) as s:
        f = s.makefile("rwb")
        assert f.readline().startswith(b"+OK")
        assert raw(f, b"USER " + b"a" * 100_000 + b"\r\n").startswith(b"-ERR"), "over-long line"
        assert raw(f, b"NOOP " + b"b" * 300 + b"\r\n").startswith(b"-ERR")
        assert raw(f, b"CAPA\r\n").startswith(b"+OK"), "the session goes on"
        while f.readline() != b".\r\n":
            pass
        assert raw(f, f"USER {USER}\r\n".encode()).startswith(b"+OK")
        assert raw(f, f"PASS {PASSWORD}\r\n".encode()).startswith(b"+OK")
        assert raw(f, b"DELE 1\r\n").startswith(b"+OK")
        # Bad commands until the server gives up (20, as Dovecot): it
        # closes the connection, without the UPDATE state.
        answers = []
        for _ in range(30):
            try:
                line = raw(f, b"XYZZY\r\n")
            except OSError:
                break
            if not line:
                break
            answers.append(line)
        assert len(answers) == 19 and all(a.startswith(b"-ERR") for a in answers), answers
        assert answers[-1].startswith(b"-ERR Too many bad commands"), answers[-1]
    wait_sessions_gone()
    assert imap_count() == 3, "a session closed for bad commands deleted messages"
    print("long_lines: ok")


def big_inbox():
    # More messages than one read of the maildrop at login (1,000 rows):
    # numbering, sizes and UIDLs must run on across the page boundary.
    extra = 1_005
    c = imaplib.IMAP4(*hp(IMAP))
    c.login(USER, PASSWORD)
    for i in range(extra):
        c.append("INBOX", None, None, f"Subject: bulk {i}\r\n\r\nbody {i}\r\n".encode())
    c.logout()
    total = len(MESSAGES) + extra
    p = login()
    count, octets = p.stat()
    _, scan, _ = p.list()
    assert count == total and len(scan) == total, (count, len(scan))
    assert [int(l.split()[0]) for l in scan] == list(range(1, total + 1))
    assert octets == sum(int(l.split()[1]) for l in scan)
    ids = [l.split()[1] for l in p.uidl()[1]]
    assert len(set(ids)) == total and ids == sorted(ids), "unique, in UID order"
    last = b"\r\n".join(p.retr(total)[1])
    assert last.endswith(f"body {extra - 1}".encode()), last
    assert b"Subject: bulk 0" in b"\r\n".join(p.top(len(MESSAGES) + 1, 0)[1])
    p.dele(1)
    p.dele(total)
    p.quit()
    assert imap_count() == total - 2
    print("big_inbox: ok")


def dele_newest():
    # Run once per node of a mesh (POP3 on one, IMAP on the other): at least
    # one run's expunge crosses the mesh to the shard's owner. Counts are
    # relative, as the messages of earlier runs remain.
    p = login()
    count = p.stat()[0]
    assert count >= len(MESSAGES) and imap_count() == count, count
    newest = b"\r\n".join(p.retr(count)[1])
    assert newest.endswith(MESSAGES[-1].encode().split(b"\r\n\r\n", 1)[1].rstrip(b"\r\n")), newest[-80:]
    p.dele(count)
    assert imap_count() == count, "nothing is deleted before QUIT"
    assert p.quit().startswith(b"+OK")
    assert imap_count() == count - 1, "QUIT's expunge reached the shard's owner"
    print("dele_newest: ok")


def run_fetchmail(workdir, server, port, extra, keep):
    """One fetchmail run against the node; (exit code, output)."""
    out_dir = os.path.join(workdir, "got")
    os.makedirs(out_dir, exist_ok=True)
    rc = os.path.join(workdir, "fetchmailrc")
    with open(rc, "w") as f:
        # Each message goes to a file of its own through the MDA; %T is
        # fetchmail's recipient, unused: the file name comes from mktemp.
        f.write(f'poll {server} protocol pop3 port {port}\n'
                f'  user "{USER}" password "{PASSWORD}" is "{USER}" here {extra}\n'
                f'  {"keep" if keep else "nokeep"} fetchall\n'
                f'  mda "sh -c \'cat > $(mktemp {out_dir}/m.XXXXXX)\'"\n')
    os.chmod(rc, 0o600)
    env = dict(os.environ, HOME=workdir, FETCHMAILHOME=workdir)
    proc = subprocess.run(["fetchmail", "-f", rc, "--nodetach", "--nosyslog", "-v",
                           "--pidfile", os.path.join(workdir, "pid"), "--idfile", os.path.join(workdir, "ids")],
                          env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def fetched(workdir):
    d = os.path.join(workdir, "got")
    return [open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))] if os.path.isdir(d) else []


def fetchmail():
    # The client many phones-era setups still run: plaintext POP3 on
    # loopback with --keep, then POP3S deleting, then nothing left.
    with tempfile.TemporaryDirectory(prefix="fetchmail-") as workdir:
        fetchmail_in(workdir)
    print("fetchmail: ok")


def fetchmail_in(workdir):
    host, port = hp(POP3)
    code, out = run_fetchmail(workdir, host, port, "sslproto ''", keep=True)
    assert code == 0, f"fetchmail (keep) exited {code}:\n{out}"
    got = fetched(workdir)
    assert len(got) == len(MESSAGES), (len(got), out)
    for m in MESSAGES:
        body = m.encode().split(b"\r\n\r\n", 1)[1].replace(b"\r\n", b"\n")
        subject = m.split("\r\n")[2].encode()
        assert any(subject in g and g.endswith(body) for g in got), (subject, out)
    assert imap_count() == len(MESSAGES), "keep left every message"
    shutil.rmtree(os.path.join(workdir, "got"))
    host, port = hp(POP3S)
    code, out = run_fetchmail(workdir, host, port, "ssl no sslcertck", keep=False)
    assert code == 0, f"fetchmail (POP3S, delete) exited {code}:\n{out}"
    assert len(fetched(workdir)) == len(MESSAGES), out
    assert imap_count() == 0, "fetchmail's DELE and QUIT emptied INBOX"
    code, out = run_fetchmail(workdir, host, port, "ssl no sslcertck", keep=False)
    assert code == 1, f"fetchmail with no mail exits 1, got {code}:\n{out}"


SCENARIOS = {f.__name__: f for f in (capa_and_logins, listing, dele_quit, dele_rset, dele_drop, stls, bad_login,
                                      long_lines, big_inbox, dele_newest, fetchmail)}

if __name__ == "__main__":
    deliver()
    SCENARIOS[SCENARIO]()
