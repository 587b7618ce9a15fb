#!/usr/bin/env python3
"""A FETCH stays right when the compactor trimmed the change log past what
the node's hot-row cache holds: session A reads the mailbox's flags (the
cache holds them as of that MODSEQ), session B changes the flags of 20
messages one STORE at a time, the compactor (change_log_window = 5)
drops all but the last 5 of those changes, and A's next FETCH must still
show all 20. Read from the log alone, the first 15 would be stale.

    hot_cache_trim.py IMAP_ADDR HTTP_ADDR USER PASSWORD

The node must run with `[compactor] interval_s = 1, change_log_window = 5`.
Waits (bounded) for two compactor steps that began after B's last STORE,
read from the node's /metrics. Prints "trimmed log ok".
"""
import imaplib
import re
import sys
import time
import urllib.request

host, port = sys.argv[1].rsplit(":", 1)
HTTP = sys.argv[2]
USER, PASSWORD = sys.argv[3], sys.argv[4]
MESSAGES, CHANGED = 30, 20


def conn():
    c = imaplib.IMAP4(host, int(port))
    c.login(USER, PASSWORD)
    typ, data = c.select("INBOX")
    assert typ == "OK", data
    return c


def metric(name):
    text = urllib.request.urlopen(f"http://{HTTP}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def flags_by_uid(c):
    """UID -> flags, from the lines that answer `UID FETCH 1:* (FLAGS
    RFC822.SIZE)`: the session's own flag updates carry no RFC822.SIZE and
    must not stand in for a stale answer."""
    typ, data = c.uid("FETCH", "1:*", "(FLAGS RFC822.SIZE)")
    assert typ == "OK", data
    out = {}
    for line in data:
        line = line[0] if isinstance(line, tuple) else line
        if line is None or b"RFC822.SIZE" not in line:
            continue
        uid = int(re.search(rb"UID (\d+)", line).group(1))
        flags = re.search(rb"FLAGS \(([^)]*)\)", line).group(1).decode().split()
        out[uid] = {f for f in flags if f != "\\Recent"}
    return out


a = conn()
for i in range(MESSAGES):
    typ, data = a.append("INBOX", "", None, f"Subject: m {i}\r\n\r\nbody {i}\r\n".encode())
    assert typ == "OK", data
a.noop()
before = flags_by_uid(a)
assert len(before) == MESSAGES and not any(before.values()), before

b = conn()
for uid in range(1, CHANGED + 1):
    typ, data = b.uid("STORE", str(uid), "+FLAGS", "(\\Flagged)")
    assert typ == "OK", data
b.logout()

# Two steps counted after B's last STORE: the second one began after the
# first ended, so it saw every change, and trimmed the log to the last 5.
steps = metric("meshmail_compactor_steps_total")
deadline = time.monotonic() + 30
while metric("meshmail_compactor_steps_total") < steps + 2:
    assert time.monotonic() < deadline, "the compactor did not step twice in 30 s"
    time.sleep(0.1)
assert metric("meshmail_compactor_change_logs_trimmed_total") >= 1, "no change log was trimmed"

after = flags_by_uid(a)
stale = sorted(u for u in range(1, CHANGED + 1) if "\\Flagged" not in after.get(u, set()))
assert not stale, f"UIDs {stale} lack the \\Flagged another session set"
wrong = sorted(u for u in range(CHANGED + 1, MESSAGES + 1) if after.get(u) != set())
assert not wrong, f"UIDs {wrong} changed though nothing touched them"
a.logout()
print(f"trimmed log ok: {len(after)} rows")
