#!/usr/bin/env python3
"""FETCH of flags, sizes and dates stays right while the node's hot-row
cache holds the mailbox: flag changes, appends and expunges by another
session show in the next FETCH of a session that read the mailbox before
(before and after its NOOP), CHANGEDSINCE picks exactly the changed
messages, and a COPY of over 2,000 messages (more changes than one refresh
applies) still gives every row.

    hot_cache.py IMAP_ADDR USER PASSWORD

Every answer is compared with a model kept here; prints "hot cache ok" and
the number of rows checked.
"""
import imaplib
import re
import sys

host, port = sys.argv[1].rsplit(":", 1)
USER, PASSWORD = sys.argv[2], sys.argv[3]
checked = 0
FLAG_SETS = ["", "\\Seen", "\\Seen \\Flagged", "$Label", "\\Answered $Label"]


def conn():
    c = imaplib.IMAP4(host, int(port))
    c.login(USER, PASSWORD)
    c.enable("CONDSTORE")
    return c


# uid -> (flags as a frozenset, size)
model = {}
next_uid = 1
# UIDs appended or whose flags really changed (a MODSEQ given).
touched = set()


def append(c, i):
    global next_uid
    flags = FLAG_SETS[i % len(FLAG_SETS)]
    msg = (f"From: a@example.org\r\nSubject: m {i}\r\n\r\n{'y' * (i * 13 % 400)}\r\n").encode()
    typ, data = c.append("INBOX", f"({flags})" if flags else "", None, msg)
    assert typ == "OK", data
    model[next_uid] = (frozenset(flags.split()), len(msg))
    touched.add(next_uid)
    next_uid += 1


FETCH_LINE = re.compile(rb"(\d+) \((.*)\)$")


def fetch(c, items, changed_since=None):
    """UID -> {item: value} for `UID FETCH 1:* (items RFC822.SIZE)`. The
    answer's lines are those with RFC822.SIZE: unsolicited updates of
    flags (which the session's sync may send beside) carry none, and must
    not hide a stale answer."""
    global checked
    arg = f"({items} RFC822.SIZE)" + (f" (CHANGEDSINCE {changed_since})" if changed_since else "")
    typ, data = c.uid("FETCH", "1:*", arg)
    assert typ == "OK", data
    out = {}
    for line in data:
        if line is None:
            continue
        if isinstance(line, tuple):
            line = line[0]
        m = FETCH_LINE.match(line)
        assert m, line
        body = m.group(2).decode()
        uid = int(re.search(r"UID (\d+)", body).group(1))
        row = {}
        f = re.search(r"FLAGS \(([^)]*)\)", body)
        if f:
            row["flags"] = frozenset(x for x in f.group(1).split() if x != "\\Recent")
        s = re.search(r"RFC822\.SIZE (\d+)", body)
        if s:
            row["size"] = int(s.group(1))
        ms = re.search(r"MODSEQ \((\d+)\)", body)
        if ms:
            row["modseq"] = int(ms.group(1))
        if "size" not in row:
            continue
        assert uid not in out, f"two answers for UID {uid}"
        out[uid] = row
        checked += 1
    return out


def check_flags(c, what, view_to=None):
    """`view_to`: the highest UID the session's view names (it learns of
    later appends at its next NOOP)."""
    got = {u: {k: r.get(k) for k in ("flags", "size")} for u, r in fetch(c, "UID FLAGS").items()}
    want = {u: {"flags": f, "size": s} for u, (f, s) in model.items() if view_to is None or u <= view_to}
    if got != want:
        diff = sorted(u for u in set(got) | set(want) if got.get(u) != want.get(u))[:10]
        raise AssertionError(f"{what}: {len(diff)}+ rows differ, e.g. "
                             + "; ".join(f"{u}: got {got.get(u)} want {want.get(u)}" for u in diff))
    # SEARCH on flags reads the same rows. The UID FETCH above brought the
    # session's view up to date (EXISTS, EXPUNGE after it): every message.
    global checked
    now = {u: f for u, (f, _) in model.items()}
    for key, flag in (("FLAGGED", "\\Flagged"), ("KEYWORD $Label", "$Label"), ("ANSWERED", "\\Answered")):
        typ, data = c.uid("SEARCH", key)
        assert typ == "OK", data
        hits = sorted(int(x) for x in data[0].split())
        expected = sorted(u for u, f in now.items() if flag in f)
        assert hits == expected, f"{what}: SEARCH {key}: {hits}, expected {expected}"
        checked += 1


def store(c, uids, op, flags):
    typ, data = c.uid("STORE", ",".join(map(str, uids)), op, f"({flags})")
    assert typ == "OK", data
    for u in uids:
        f, s = model[u]
        new = frozenset(flags.split())
        after = (f | new) if op.startswith("+") else (f - new)
        if after != f:
            touched.add(u)
        model[u] = (after, s)


a, b = conn(), conn()
for i in range(60):
    append(b, i)
a.select("INBOX")
b.select("INBOX")
check_flags(a, "first FETCH")
check_flags(a, "second FETCH, nothing changed")
highest = max(r["modseq"] for r in fetch(a, "UID MODSEQ").values())
touched.clear()

# Another session changes flags, appends and expunges; the first sees the
# flags at once (no NOOP: its view still names the expunged messages,
# which simply get no answer).
store(b, [2, 3, 5, 8, 13], "+FLAGS", "\\Flagged $Other")
store(b, [1, 2, 21], "-FLAGS", "\\Seen")
for i in range(60, 66):
    append(b, i)
store(b, [4, 9, 30], "+FLAGS", "\\Deleted")
typ, data = b.expunge()
assert typ == "OK", data
for u in (4, 9, 30):
    del model[u]
check_flags(a, "after another session's STORE, APPEND and EXPUNGE", view_to=60)
a.noop()
check_flags(a, "after NOOP")

# CHANGEDSINCE: exactly what changed after `highest`.
changed = fetch(a, "UID FLAGS", changed_since=highest)
want = touched - {4, 9, 30}
assert len(want) >= 10, sorted(want)
assert set(changed) == want, (sorted(changed), sorted(want))

# More changes than one refresh applies (2,000): COPY the mailbox onto
# itself until over 2,100 messages were added since the first session
# last looked.
before = len(model)
while len(model) - before <= 2100:
    uids = sorted(model)
    typ, data = b.uid("COPY", "1:*", "INBOX")
    assert typ == "OK", data
    for u in uids:
        model[next_uid] = model[u]
        next_uid += 1
store(b, [1, 2], "+FLAGS", "$Late")
a.noop()
check_flags(a, f"after COPYs adding {len(model) - before} messages")
a.logout()
b.logout()
print(f"hot cache ok: {checked} rows checked")
