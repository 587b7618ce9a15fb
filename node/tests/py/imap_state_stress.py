#!/usr/bin/env python3
"""Concurrent IMAP state tracking: SESSIONS sessions of one account share
two mailboxes and do random STORE/EXPUNGE/APPEND/FETCH/COPY for SECONDS
seconds. A checker per session keeps that session's view the way a
state-tracking client does (sequence numbers from EXISTS/EXPUNGE, UIDs
from FETCH, the keyword list from untagged FLAGS) and counts every
inconsistency:

- EXISTS that shrinks the mailbox, EXPUNGE or FETCH of a sequence number
  the session does not have;
- a FETCH UID that contradicts what the session knows, or UIDs out of order;
- a FETCH FLAGS naming a keyword no untagged FLAGS announced;
- `FETCH 1:* (UID)` not answering exactly the session's view (fewer only
  with `[EXPUNGEISSUED]`);
- a NO or BAD to a valid command.

    imap_state_stress.py IMAP_ADDR USER PASSWORD [SESSIONS] [SECONDS]

Prints `state stress: N sessions, C commands, E errors` and exits 1 on any
error (the first few are printed).
"""
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imap_wire import Conn, parse  # noqa: E402

ADDR, USER, PASSWORD = sys.argv[1:4]
SESSIONS = int(sys.argv[4]) if len(sys.argv) > 4 else 20
SECONDS = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
MAILBOXES = ["INBOX", "Shared"]
KEYWORDS = [f"$Tag{k}" for k in range(12)]
SYSTEM = {"\\answered", "\\flagged", "\\deleted", "\\seen", "\\draft"}


class Checker:
    def __init__(self, name):
        self.name = name
        self.errors = []
        self.uids = []
        self.allowed = set(SYSTEM)
        self.commands = 0

    def error(self, what):
        self.errors.append(f"{self.name}: {what}")

    def reset(self):
        self.uids = []
        self.allowed = set(SYSTEM)

    def untagged(self, line):
        vals = parse(line)
        if len(vals) < 3 or not all(isinstance(v, bytes) for v in vals[:2]):
            return
        if vals[1].upper() == b"FLAGS" and isinstance(vals[2], list):
            self.allowed = {bytes(f).decode().lower() for f in vals[2]}
            return
        if not vals[1].isdigit() or not isinstance(vals[2], bytes):
            return
        n, kind = int(vals[1]), vals[2].upper()
        if kind == b"EXISTS":
            if n < len(self.uids):
                self.error(f"EXISTS {n} below the {len(self.uids)} messages known")
            self.uids.extend([None] * (n - len(self.uids)))
        elif kind == b"EXPUNGE":
            if not 1 <= n <= len(self.uids):
                self.error(f"EXPUNGE {n} of {len(self.uids)}")
            else:
                del self.uids[n - 1]
        elif kind == b"RECENT":
            if n > len(self.uids):
                self.error(f"RECENT {n} above EXISTS {len(self.uids)}")
        elif kind == b"FETCH":
            self.fetch(n, vals[3] if len(vals) > 3 else [])

    def fetch(self, n, items):
        if not 1 <= n <= len(self.uids):
            self.error(f"FETCH of sequence {n} with {len(self.uids)} messages")
            return
        d = {bytes(items[k]).upper(): items[k + 1] for k in range(0, len(items) - 1, 2)}
        if b"UID" in d:
            uid = int(d[b"UID"])
            known = self.uids[n - 1]
            if known is not None and known != uid:
                self.error(f"sequence {n} is UID {known}, FETCH says {uid}")
            self.uids[n - 1] = uid
            before = [u for u in self.uids[:n - 1] if u is not None]
            after = [u for u in self.uids[n:] if u is not None]
            if (before and before[-1] >= uid) or (after and after[0] <= uid):
                self.error(f"UID {uid} at sequence {n} is out of order")
        if b"FLAGS" in d:
            for f in d[b"FLAGS"]:
                name = bytes(f).decode().lower()
                if name != "\\recent" and name not in self.allowed:
                    self.error(f"FETCH FLAGS shows {name}, never announced by FLAGS")


def run(conn, chk, text, literals=(), may_fail=False):
    untagged, tagged = conn.command(text, literals)
    chk.commands += 1
    for ln in untagged:
        chk.untagged(ln)
    status = tagged.split(b" ", 2)[1]
    if status != b"OK" and not may_fail:
        chk.error(f"{text!r} -> {tagged.decode(errors='replace').strip()}")
    return untagged, status


def select(conn, chk, mailbox):
    chk.reset()
    run(conn, chk, f"SELECT {mailbox}")


def verify_view(conn, chk):
    """`FETCH 1:* (UID)` must answer every message of the view as it is
    when the FETCH lines come (EXISTS may follow them, EXPUNGE may not
    come in between)."""
    had = len(chk.uids)
    untagged, tagged = conn.command("FETCH 1:* (UID)")
    chk.commands += 1
    # Distinct sequence numbers: flag changes of other sessions may come as
    # extra FETCH responses for messages already answered.
    answered, expected = set(), None
    for ln in untagged:
        vals = parse(ln)
        if len(vals) > 2 and isinstance(vals[2], bytes) and vals[2].upper() == b"FETCH":
            if expected is None:
                expected = len(chk.uids)
            if int(vals[1]) <= expected:
                answered.add(int(vals[1]))
        chk.untagged(ln)
    seen = len(answered)
    if tagged.split(b" ", 2)[1] != b"OK":
        if had or chk.uids:
            chk.error(f"FETCH 1:* refused with messages present: {tagged!r}")
        return
    # Fewer answers are right only when the server says why (RFC 9051 §7.1
    # EXPUNGEISSUED: another session expunged them; EXPUNGE comes later).
    short_ok = b"[EXPUNGEISSUED]" in tagged and seen < (expected or 0)
    if seen != (expected or 0) and not short_ok:
        chk.error(f"FETCH 1:* answered {seen} messages, the view had {expected}")


def message(rng, k):
    return (f"From: s{k}@example.org\r\nTo: {USER}\r\nSubject: stress {k} {rng.random()}\r\n"
            f"Message-ID: <stress-{k}-{rng.random()}@test>\r\n\r\nbody {k}\r\n").encode()


def session(idx, deadline, results):
    rng = random.Random(idx)
    chk = Checker(f"session {idx}")
    results[idx] = chk
    try:
        conn = Conn(ADDR)
        run(conn, chk, f'LOGIN "{USER}" "{PASSWORD}"')
        mailbox = MAILBOXES[idx % 2]
        select(conn, chk, mailbox)
        while time.time() < deadline:
            known = [u for u in chk.uids if u is not None]
            op = rng.random()
            if op < 0.2:
                flags = " ".join(rng.sample(KEYWORDS, rng.randint(0, 2)))
                target = rng.choice(MAILBOXES)
                run(conn, chk, f"APPEND {target} ({flags}) {{}}", (message(rng, idx),))
            elif op < 0.45 and known:
                uid = rng.choice(known)
                mode = rng.choice(["+FLAGS", "-FLAGS", "FLAGS"])
                flags = " ".join(rng.sample(KEYWORDS + ["\\Seen", "\\Flagged"], rng.randint(1, 2)))
                run(conn, chk, f"UID STORE {uid} {mode} ({flags})")
            elif op < 0.55 and known:
                uid = rng.choice(known)
                run(conn, chk, f"UID STORE {uid} +FLAGS.SILENT (\\Deleted)")
                run(conn, chk, f"UID EXPUNGE {uid}")
            elif op < 0.75:
                lo = rng.randint(1, max(1, len(chk.uids)))
                if chk.uids:
                    run(conn, chk, f"FETCH {lo}:* (UID FLAGS)")
                else:
                    run(conn, chk, "NOOP")
            elif op < 0.85 and known:
                uid = rng.choice(known)
                run(conn, chk, f"UID COPY {uid} {rng.choice(MAILBOXES)}")
            elif op < 0.95:
                verify_view(conn, chk)
            else:
                mailbox = MAILBOXES[(MAILBOXES.index(mailbox) + 1) % 2]
                select(conn, chk, mailbox)
        verify_view(conn, chk)
        run(conn, chk, "LOGOUT", may_fail=True)
        conn.close()
    except Exception as e:  # a dropped connection is an error too
        chk.error(f"{type(e).__name__}: {e}")


def main():
    setup = Conn(ADDR)
    setup.ok(f'LOGIN "{USER}" "{PASSWORD}"')
    setup.command("CREATE Shared")
    for mb in MAILBOXES:
        for k in range(10):
            setup.ok(f"APPEND {mb} ($Tag0) {{}}", (message(random.Random(k), k),))
    setup.close()
    deadline = time.time() + SECONDS
    results = {}
    threads = [threading.Thread(target=session, args=(i, deadline, results)) for i in range(SESSIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SECONDS + 120)
    errors = [e for c in results.values() for e in c.errors]
    commands = sum(c.commands for c in results.values())
    for e in errors[:15]:
        print("ERROR", e)
    print(f"state stress: {SESSIONS} sessions, {commands} commands, {len(errors)} errors")
    sys.exit(1 if errors or len(results) != SESSIONS else 0)


if __name__ == "__main__":
    main()
