"""Drives meshmail over IMAP for node/tests/export_import.rs.

  populate HOST PORT USER PASSWORD   APPENDs messages with flags, keywords
                                     and dates into nested folders
  dump HOST PORT USER PASSWORD       prints, as JSON, every folder (its
                                     levels joined by `/` whatever the
                                     server's separator) with its messages'
                                     SHA-256 of BODY[], FLAGS and
                                     INTERNALDATE (sorted, \\Recent left out)
"""
import base64
import hashlib
import imaplib
import json
import re
import sys
import time


def mutf7(name):
    """RFC 3501 modified UTF-7 (imaplib sends names as they are)."""
    out, run = [], []

    def flush():
        if run:
            b = base64.b64encode("".join(run).encode("utf-16-be")).decode().rstrip("=")
            out.append("&" + b.replace("/", ",") + "-")
            run.clear()

    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            run.append(ch)
    flush()
    return '"' + "".join(out) + '"'


FOLDERS = ["Work", "Work/Projects", "Lists.rust", "Ünïcode Ordner"]

MESSAGES = [
    # (folder, flags, date, bytes)
    ("INBOX", r"(\Seen \Answered)", "01-Feb-2024 10:00:00 +0000",
     b"From: a@example.net\r\nSubject: seen and answered\r\nMessage-ID: <p1@example.net>\r\n\r\nbody\r\n"),
    ("INBOX", r"(\Flagged $Label1 work)", "02-Feb-2024 11:30:05 +0100",
     b"From: b@example.net\r\nSubject: mbox quoting\r\n\r\nFrom the start of a line\r\n>From quoted once\r\n>>From twice\r\n"),
    ("Work", r"(\Deleted \Seen)", "15-Mar-2023 08:00:00 -0500",
     b"From: c@example.net\r\nSubject: deleted\r\n\r\nno final newline"),
    ("Work/Projects", r"($Label2 \Draft)", "29-Feb-2020 23:59:59 +0000",
     b"Subject: draft with keyword\nX-Mailer: lf-only\n\nline feeds only\n\n"),
    ("Work/Projects", r"()", "01-Jan-2021 00:00:00 +0000",
     b"Subject: identical twin\r\n\r\nsame bytes\r\n"),
    ("Work/Projects", r"(\Seen)", "01-Jan-2022 00:00:00 +0000",
     b"Subject: identical twin\r\n\r\nsame bytes\r\n"),
    ("Lists.rust", r"(\Seen)", "10-Oct-2025 10:10:10 +0000",
     b"Subject: dotted folder\r\n\r\nx\r\n"),
    ("Ünïcode Ordner", r"(\Flagged)", "05-Dec-2026 09:03:07 +0000",
     b"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nGr\xc3\xbc\xc3\x9fe\r\n"),
    ("Drafts", r"(\Draft \Seen)", "03-Mar-2024 03:03:03 +0000",
     b"Subject: in drafts\r\n\r\ndraft\r\n"),
]


def login(host, port, user, password):
    c = imaplib.IMAP4(host, int(port))
    c.login(user, password)
    return c


def populate(c):
    for f in FOLDERS:
        typ, data = c.create(mutf7(f))
        assert typ == "OK", (f, data)
    for folder, flags, date, raw in MESSAGES:
        typ, data = c.append(mutf7(folder), flags, '"' + date + '"', raw)
        assert typ == "OK", (folder, data)
    print("populated", len(MESSAGES))


LIST_RE = re.compile(rb'\((?P<attrs>[^)]*)\) (?P<delim>"[^"]*"|NIL) (?P<name>.+)$')
FLAGS_RE = re.compile(rb"FLAGS \((?P<flags>[^)]*)\)")
DATE_RE = re.compile(rb'INTERNALDATE "(?P<date>[^"]+)"')


def dump(c):
    typ, lines = c.list()
    assert typ == "OK", lines
    names = []
    for line in lines:
        m = LIST_RE.match(line)
        assert m, line
        if b"\\Noselect" in m.group("attrs"):
            continue
        delim = m.group("delim").decode().strip('"')
        names.append((m.group("name").decode(), delim))
    out = {}
    for name, delim in sorted(names):
        typ, data = c.select(name, readonly=True)
        assert typ == "OK", (name, data)
        msgs = []
        if int(data[0]) > 0:
            meta, bodies = {}, {}
            typ, data = c.fetch("1:*", "(FLAGS INTERNALDATE)")
            assert typ == "OK", data
            for line in data:
                seq = int(line.split()[0])
                f, d = FLAGS_RE.search(line), DATE_RE.search(line)
                assert f and d, line
                flags = sorted(x for x in f.group("flags").decode().split() if x != "\\Recent")
                epoch = imaplib.Internaldate2tuple(b'INTERNALDATE "' + d.group("date") + b'"')
                meta[seq] = (flags, int(time.mktime(epoch)))
            typ, data = c.fetch("1:*", "(BODY.PEEK[])")
            assert typ == "OK", data
            for item in data:
                if isinstance(item, tuple):
                    bodies[int(item[0].split()[0])] = hashlib.sha256(item[1]).hexdigest()
            assert meta.keys() == bodies.keys(), (meta.keys(), bodies.keys())
            msgs = [[bodies[s], meta[s][0], meta[s][1]] for s in meta]
        shown = name.strip('"')
        out[shown.replace(delim, "/") if delim and delim != "NIL" else shown] = sorted(msgs)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    mode, host, port, user, password = sys.argv[1:6]
    c = login(host, port, user, password)
    {"populate": populate, "dump": dump}[mode](c)
    c.logout()
