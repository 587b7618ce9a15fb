"""Drives meshmail over IMAP for node/tests/backup.rs.

  populate HOST PORT USER PASSWORD   creates folders and APPENDs messages
                                     with flags, some over the inline limit
                                     (their bodies go to the object store)
  dump HOST PORT USER PASSWORD       prints, as JSON, one [folder, SHA-256 of
                                     BODY[], sorted FLAGS (\\Recent left
                                     out), Subject] per message, sorted
"""
import hashlib
import imaplib
import json
import re
import sys

FOLDERS = ["Work", "Archive/2026"]
# (folder, flags, subject, body size): 200 KB is over the ~90 KB inline cap.
MESSAGES = [
    ("INBOX", r"(\Seen)", "small seen", 300),
    ("INBOX", r"(\Flagged $Important)", "large flagged", 200_000),
    ("Work", r"(\Seen \Answered)", "work answered", 2_000),
    ("Work", r"()", "work large unseen", 150_000),
    ("Archive/2026", r"(\Seen $Label1)", "archived", 500),
    ("Archive/2026", r"(\Deleted)", "archived large deleted", 120_000),
]

SUBJECT_RE = re.compile(rb"^Subject: (.*?)\r?$", re.M | re.I)
FLAGS_RE = re.compile(rb"FLAGS \((?P<flags>[^)]*)\)")


def login(host, port, user, password):
    c = imaplib.IMAP4(host, int(port))
    c.login(user, password)
    return c


def body(subject, size, user):
    head = f"From: p@example.net\r\nTo: {user}\r\nSubject: {subject} {user}\r\n\r\n".encode()
    line = (f"{subject} " * 8)[:76].encode() + b"\r\n"
    return head + (line * (size // len(line) + 1))[:size]


def populate(c, user):
    for f in FOLDERS:
        typ, data = c.create(f)
        assert typ == "OK", (f, data)
    for folder, flags, subject, size in MESSAGES:
        typ, data = c.append(folder, flags, None, body(subject, size, user))
        assert typ == "OK", (folder, data)
    print("populated", len(MESSAGES))


def dump(c, _user):
    typ, lines = c.list()
    assert typ == "OK", lines
    out = []
    for line in lines:
        name = line.decode().rsplit(' "/" ', 1)[-1].strip('"')
        typ, data = c.select(f'"{name}"', readonly=True)
        assert typ == "OK", (name, data)
        if int(data[0]) == 0:
            continue
        typ, data = c.fetch("1:*", "(FLAGS BODY.PEEK[])")
        assert typ == "OK", data
        for i, item in enumerate(data):
            if not isinstance(item, tuple):
                continue
            # FLAGS may come before the literal or after it (the next item).
            after = data[i + 1] if i + 1 < len(data) and isinstance(data[i + 1], bytes) else b""
            f = FLAGS_RE.search(item[0]) or FLAGS_RE.search(after)
            assert f, (item[0], after)
            flags = sorted(x for x in f.group("flags").decode().split() if x != "\\Recent")
            s = SUBJECT_RE.search(item[1])
            subject = s.group(1).decode() if s else ""
            out.append([name, hashlib.sha256(item[1]).hexdigest(), flags, subject])
    out.sort()
    print(json.dumps(out))


if __name__ == "__main__":
    mode, host, port, user, password = sys.argv[1:6]
    c = login(host, port, user, password)
    {"populate": populate, "dump": dump}[mode](c, user)
    c.logout()
