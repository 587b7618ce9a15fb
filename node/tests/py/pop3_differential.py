#!/usr/bin/env python3
"""Differential POP3 test: the same messages are APPENDed over IMAP to
meshmail and to Dovecot (dovecot-pop3d, started on loopback by
dovecot_peer.py), then the same POP3 commands go to both and the answers
are compared.

    pop3_differential.py MESHMAIL_POP3 MESHMAIL_IMAP USER PASSWORD CORPUS_DIR ALLOWED_FILE [WORKDIR]

Compared: STAT, LIST (all and each), TOP n 0 and TOP n 5 (bytes), RETR
(bytes, byte-stuffed as on the wire), UIDL (the UID half and the layout:
UIDVALIDITY differs between any two servers), CAPA, the +OK/-ERR status
and RFC 2449 response code of a script of commands in both states, and
what QUIT's UPDATE state leaves behind (IMAP message count, \\Seen).

A difference passes only when ALLOWED_FILE lists it
(`<which> <ITEM> <RFC section> <why meshmail is right>`, <which> a message
number or `*`); any other fails the run. Prints
`pop3 differential: N messages, I items compared, D differ (A allowed)`.
"""
import os
import re
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dovecot_peer import Dovecot  # noqa: E402
from imap_wire import Conn  # noqa: E402

MESHMAIL_POP3, MESHMAIL_IMAP, USER, PASSWORD, CORPUS, ALLOWED = sys.argv[1:7]
WORKDIR = sys.argv[7] if len(sys.argv) > 7 else None

# Messages beyond the corpus for what it lacks: lines starting with "."
# (stuffing), a message that is all header, and a body line longer than
# 998 octets.
EXTRA = [
    b"Subject: dots\r\nFrom: a@example.net\r\n\r\n.one\r\n..two\r\n.\r\nend\r\n",
    b"Subject: header only\r\nFrom: a@example.net\r\n",
    b"Subject: long line\r\nFrom: a@example.net\r\n\r\n" + b"y" * 1500 + b"\r\nshort\r\n",
]

# Multi-line when the answer is +OK (RFC 1939 §§5-7, RFC 2449 §5).
MULTI = re.compile(rb"^(CAPA|LIST|UIDL|AUTH)$|^(RETR|TOP) ", re.I)

# (name, command) in the AUTHORIZATION state, then in TRANSACTION: each
# answer's status and response code are compared.
BEFORE_LOGIN = [
    ("stat-before-login", "STAT"),
    ("list-before-login", "LIST"),
    ("retr-before-login", "RETR 1"),
    ("pass-without-user", "PASS x"),
    ("user-no-arg", "USER"),
    ("unknown", "FOO"),
    ("noop-before-login", "NOOP"),
]
AFTER_LOGIN = [
    ("retr-0", "RETR 0"),
    ("retr-past-end", "RETR 99999"),
    ("list-past-end", "LIST 99999"),
    ("uidl-past-end", "UIDL 99999"),
    ("top-no-lines", "TOP 1"),
    ("top-bad-lines", "TOP 1 x"),
    ("stat-arg", "STAT 1"),
    ("noop", "NOOP"),
    ("dele-1", "DELE 1"),
    ("retr-deleted", "RETR 1"),
    ("list-deleted", "LIST 1"),
    ("uidl-deleted", "UIDL 1"),
    ("top-deleted", "TOP 1 0"),
    ("dele-again", "DELE 1"),
    ("stat-after-dele", "STAT"),
    ("rset", "RSET"),
    ("retr-after-rset", "RETR 1"),
    ("user-after-login", "USER x"),
    ("pass-after-login", "PASS x"),
    ("unknown-after-login", "FOO"),
]


class Pop3:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=60)
        self.buf = b""
        self.greeting = self.line()

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise ConnectionError("server closed the connection")
            self.buf += d
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def command(self, text):
        """(status line, body bytes as sent, stuffing and all, or None)."""
        self.s.sendall(text.encode() + b"\r\n")
        first = self.line()
        if not first.startswith(b"+OK") or not MULTI.match(text.encode()):
            return first, None
        body = b""
        while True:
            ln = self.line()
            if ln == b".\r\n":
                return first, body
            body += ln

    def login(self):
        assert self.command(f"USER {USER}")[0].startswith(b"+OK")
        first, _ = self.command(f"PASS {PASSWORD}")
        assert first.startswith(b"+OK"), first

    def close(self):
        self.s.close()


def status(first):
    """`+OK`, or `-ERR` with its response code (RFC 2449 §8) if any."""
    m = re.match(rb"^(\+OK|-ERR)(?: \[([^\]]+)\])?", first)
    return (m.group(1) + (b" [" + m.group(2) + b"]" if m.group(2) else b"")).decode() if m else first.decode()


def corpus():
    names = sorted(n for n in os.listdir(CORPUS) if n.endswith(".eml"))
    return [open(os.path.join(CORPUS, n), "rb").read() for n in names] + EXTRA


def imap(addr):
    c = Conn(addr)
    c.ok(f'LOGIN "{USER}" "{PASSWORD}"')
    return c


def load(addr, messages):
    c = imap(addr)
    for data in messages:
        c.ok("APPEND INBOX {}", (data,))
    c.close()


def imap_state(addr):
    """(messages in INBOX, their numbers with \\Seen)."""
    c = imap(addr)
    exists = [ln for ln in c.ok("SELECT INBOX") if ln.endswith(b" EXISTS\r\n")]
    count = int(exists[0].split()[1])
    seen = [ln for ln in c.ok("SEARCH SEEN") if ln.startswith(b"* SEARCH")]
    c.close()
    return count, seen[0].split()[2:]


def allowed_rules():
    rules = []
    for line in open(ALLOWED):
        line = line.strip()
        if line and not line.startswith("#"):
            who, item = line.split()[:2]
            rules.append((who, item))
    return rules


class Tally:
    def __init__(self):
        self.rules = allowed_rules()
        self.compared = self.differ = self.allowed = 0

    def check(self, number, item, ref, ours):
        self.compared += 1
        if ref == ours:
            return
        self.differ += 1
        ok = any(who in ("*", str(number)) and it == item for who, it in self.rules)
        self.allowed += ok
        print(f"{'ALLOWED' if ok else 'DIFF'} {number} {item}: dovecot={short(ref)} meshmail={short(ours)}")


def short(v, limit=200):
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."


def uidl_shape(line):
    """The UID half of a `%08Xu%08Xv` id, or the whole id if not so shaped."""
    uid = line.split()[-1].decode()
    return uid[:8] if re.fullmatch(r"[0-9a-fA-F]{16}", uid) else uid


def compare_messages(t, ref, ours, n):
    for cmd in ("STAT", "LIST"):
        a, b = ref.command(cmd), ours.command(cmd)
        t.check("*", cmd, (a[0].split()[:3], a[1]) if cmd == "STAT" else a[1], (b[0].split()[:3], b[1]) if cmd == "STAT" else b[1])
    a, b = ref.command("UIDL")[1], ours.command("UIDL")[1]
    t.check("*", "UIDL", [uidl_shape(ln) for ln in a.splitlines()], [uidl_shape(ln) for ln in b.splitlines()])
    for i in range(1, n + 1):
        t.check(i, "LIST_n", ref.command(f"LIST {i}")[0], ours.command(f"LIST {i}")[0])
        t.check(i, "UIDL_n", uidl_shape(ref.command(f"UIDL {i}")[0]), uidl_shape(ours.command(f"UIDL {i}")[0]))
        for item, cmd in (("TOP_0", f"TOP {i} 0"), ("TOP_5", f"TOP {i} 5"), ("RETR", f"RETR {i}")):
            t.check(i, item, ref.command(cmd)[1], ours.command(cmd)[1])
        # RETR's "+OK N octets": N must be what LIST said (RFC 1939 §7 asks
        # nothing of the text; both servers say it, so compare it).
        t.check(i, "RETR_status", ref.command(f"RETR {i}")[0], ours.command(f"RETR {i}")[0])


def compare_script(t, ref_addr, ours_addr):
    ref, ours = Pop3(ref_addr), Pop3(ours_addr)
    caps = [set(c.command("CAPA")[1].decode().split("\r\n")) - {""} for c in (ref, ours)]
    for cap in sorted(caps[0] | caps[1]):
        t.check("*", "CAPA:" + cap.replace(" ", "_"), cap in caps[0], cap in caps[1])
    # Each on a fresh connection: Dovecot's login process closes the
    # connection after its third bad command, and each answer alone is
    # what is compared here.
    for name, cmd in BEFORE_LOGIN:
        answers = []
        for addr in (ref_addr, ours_addr):
            c = Pop3(addr)
            answers.append(status(c.command(cmd)[0]))
            c.close()
        t.check("*", name, answers[0], answers[1])
    ref.login()
    ours.login()
    for name, cmd in AFTER_LOGIN:
        t.check("*", name, status(ref.command(cmd)[0]), status(ours.command(cmd)[0]))
    # The UPDATE state: message 2 deleted, message 3 retrieved (\Seen) and
    # message 4 only TOP'd; message 1 was RSET.
    for c in (ref, ours):
        assert c.command("DELE 2")[0].startswith(b"+OK")
        c.command("RETR 3")
        c.command("TOP 4 1")
    for c in (ref, ours):
        c.command("QUIT")
        c.close()


def main():
    messages = corpus()
    n = len(messages)
    work = WORKDIR or tempfile.mkdtemp(prefix="meshmail-dovecot-pop3-")
    t = Tally()
    with Dovecot(os.path.join(work, "dovecot"), {USER: PASSWORD}, pop3=True) as dove:
        ref_addr = f"127.0.0.1:{dove.pop3_port}"
        ref_imap = f"127.0.0.1:{dove.imap_port}"
        load(ref_imap, messages)
        load(MESHMAIL_IMAP, messages)
        ref, ours = Pop3(ref_addr), Pop3(MESHMAIL_POP3)
        ref.login()
        ours.login()
        compare_messages(t, ref, ours, n)
        for c in (ref, ours):
            c.command("QUIT")  # nothing deleted: RETR only marks \Seen
            c.close()
        before = [imap_state(a) for a in (ref_imap, MESHMAIL_IMAP)]
        t.check("*", "after_retr_all", before[0], before[1])
        # Clear \Seen on both, so the script's UPDATE state is what shows.
        for a in (ref_imap, MESHMAIL_IMAP):
            c = imap(a)
            c.ok("SELECT INBOX")
            c.ok("STORE 1:* -FLAGS.SILENT (\\Seen)")
            c.close()
        compare_script(t, ref_addr, MESHMAIL_POP3)
        after = [imap_state(a) for a in (ref_imap, MESHMAIL_IMAP)]
        t.check("*", "after_update", after[0], after[1])
    print(f"pop3 differential: {n} messages, {t.compared} items compared, {t.differ} differ ({t.allowed} allowed)")
    sys.exit(0 if t.differ == t.allowed else 1)


if __name__ == "__main__":
    main()
