#!/usr/bin/env python3
"""A session holding a big INBOX in the hot-row cache, another session
expunging N messages from its start, then the first session's next
`UID FETCH 1:* (UID FLAGS)`: the refresh applies N flag changes and N
expunges (keep 2 N under 2,000, or the cache reloads instead).

    expunge_then_fetch.py IMAP_PORT N  ->  ms of that FETCH, and the warm one
"""
import imaplib
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])


def conn():
    c = imaplib.IMAP4("127.0.0.1", port)
    c.login("u@example.org", "pw")
    c.select("INBOX")
    return c


def timed_fetch(c):
    t = time.perf_counter()
    typ, data = c.uid("FETCH", "1:*", "(UID FLAGS)")
    assert typ == "OK", data
    return (time.perf_counter() - t) * 1000, len(data)


a, b = conn(), conn()
timed_fetch(a)
warm, _ = timed_fetch(a)
typ, data = b.store(f"1:{n}", "+FLAGS.SILENT", "(\\Deleted)")
assert typ == "OK", data
typ, data = b.expunge()
assert typ == "OK"
after, rows = timed_fetch(a)
print(f"warm FETCH {warm:.1f} ms; after {n} expunged by another session {after:.1f} ms ({rows} lines)")
