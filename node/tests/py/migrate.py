"""Dovecot as the source of `meshmail migrate`, for node/tests/migrate.rs.

  serve WORKDIR USER PASSWORD         starts Dovecot (py/dovecot_peer.py),
                                      prints `dovecot PORT`, and stops it
                                      when standard input closes
  populate HOST PORT USER PASSWORD N  creates nested folders and APPENDs N
                                      generated messages with flags, a
                                      keyword and distinct internal dates
  add HOST PORT USER PASSWORD K TAG   APPENDs K more (to INBOX and a nested
                                      folder), their bodies marked by TAG
  recreate HOST PORT USER PASSWORD F  deletes folder F (path with `/`) and
                                      creates it again with the same
                                      messages: a new UIDVALIDITY

The comparison of two servers is export_import.py's `dump` (folders with
the separator shown as `/`, per message the SHA-256 of BODY[], FLAGS and
INTERNALDATE).
"""
import imaplib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_import import mutf7  # noqa: E402

# `/` levels; the server's own separator is put in at run time. Drafts,
# Sent, Trash, Junk and Archive are also the folders meshmail gives every
# new account, so the two trees compare whole.
FOLDERS = ["Archive", "Archive/2024", "Archive/2024/Q1", "Archive/2024/Q2", "Work", "Work/Projects",
           "Sent", "Drafts", "Trash", "Junk", "Ünïcode Ordner"]
TARGETS = ["INBOX"] + FOLDERS
BASE_EPOCH = 1_700_000_000  # Nov 2023: past dates only (Dovecot replaces future ones)


def login(host, port, user, password):
    c = imaplib.IMAP4(host, int(port))
    c.login(user, password)
    return c


def separator(c):
    typ, data = c.list('""', '""')
    assert typ == "OK", data
    m = re.search(rb'\) "(.)"', data[0])
    return m.group(1).decode() if m else "/"


def wire(c, name):
    return mutf7(name.replace("/", separator(c)))


def message(i, tag=""):
    # Sizes vary (a few hundred bytes to ~6 KB); CRLF, as clients send.
    lines = "".join(f"line {k} of message {i}{tag}\r\n" for k in range(i % 200))
    return (f"From: sender{i % 17}@example.net\r\nTo: user@example.org\r\n"
            f"Subject: migrated message {i}{tag}\r\nMessage-ID: <m{i}{tag}@example.net>\r\n"
            f"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\n\r\nbody {i}{tag}\r\n{lines}").encode()


def flags(i):
    f = []
    if i % 2 == 0:
        f.append("\\Seen")
    if i % 7 == 0:
        f.append("\\Flagged")
    if i % 11 == 0:
        f.append("\\Answered")
    if i % 13 == 0:
        f.append("$Label1")
    return "(" + " ".join(f) + ")"


def date(i):
    return imaplib.Time2Internaldate(BASE_EPOCH + i * 61)


def append(c, folder, i, tag="", raw=None):
    typ, data = c.append(wire(c, folder), flags(i), date(i), raw or message(i, tag))
    assert typ == "OK", (folder, data)


def populate(c, n):
    for f in FOLDERS:
        typ, data = c.create(wire(c, f))
        assert typ == "OK", (f, data)
    for i in range(n):
        append(c, TARGETS[i % len(TARGETS)], i)
    # Two identical messages in one folder: both must arrive.
    twin = b"Subject: identical twin\r\n\r\nsame bytes\r\n"
    append(c, "Work/Projects", 1, raw=twin)
    append(c, "Work/Projects", 2, raw=twin)
    print("populated", n + 2, flush=True)


def add(c, k, tag):
    for i in range(k):
        append(c, ["INBOX", "Archive/2024/Q1"][i % 2], 100_000 + i, tag=tag)
    print("added", k, flush=True)


def recreate(c, folder):
    name = wire(c, folder)
    typ, _ = c.select(name, readonly=True)
    assert typ == "OK"
    typ, data = c.fetch("1:*", "(FLAGS INTERNALDATE BODY.PEEK[])")
    assert typ == "OK", data
    msgs = []
    for item in data:
        if isinstance(item, tuple):
            f = re.search(rb"FLAGS \(([^)]*)\)", item[0]).group(1).decode()
            d = re.search(rb'INTERNALDATE ("[^"]+")', item[0]).group(1).decode()
            f = " ".join(x for x in f.split() if x != "\\Recent")
            msgs.append((f"({f})", d, item[1]))
    c.close()
    assert c.delete(name)[0] == "OK"
    assert c.create(name)[0] == "OK"
    for f, d, raw in msgs:
        assert c.append(name, f, d, raw)[0] == "OK"
    print("recreated", folder, len(msgs), flush=True)


def serve(workdir, user, password):
    from dovecot_peer import Dovecot
    with Dovecot(workdir, {user: password}, fsync=False) as d:
        print("dovecot", d.imap_port, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "serve":
        serve(*sys.argv[2:5])
        sys.exit(0)
    host, port, user, password = sys.argv[2:6]
    started = time.time()
    c = login(host, port, user, password)
    if mode == "populate":
        populate(c, int(sys.argv[6]))
    elif mode == "add":
        add(c, int(sys.argv[6]), sys.argv[7])
    elif mode == "recreate":
        recreate(c, sys.argv[6])
    c.logout()
    print(f"{mode} took {time.time() - started:.1f} s", flush=True)
