"""The answers of SELECT, FETCH FLAGS, SEARCH UNSEEN and STORE on mailboxes
of a few hundred messages, checked against a model of what they must be,
through flag changes, expunges and a MOVE (node/tests/big_mailbox.rs).

    big_mailbox.py fill  HOST:PORT USER PASSWORD N
    big_mailbox.py check HOST:PORT USER PASSWORD N

`fill` APPENDs N messages to INBOX and to "Old" (UID i gets flags from
`initial_flags(i)`). Between the phases the test rewrites Old's rows into
the formats of earlier builds. `check` then compares every answer with
the model in both mailboxes (INBOX: rows of today's form and the unseen
index; Old: migrated rows, searched row by row), while a second session
watching INBOX must see the first one's flag changes.
Prints "big mailbox: ok" at the end; exits 1 at the first wrong answer.
"""
import imaplib
import re
import sys

MAILBOXES = ("INBOX", "Old")


def initial_flags(i):
    flags = set()
    if i % 3 == 0:
        flags.add("\\Seen")
    if i % 7 == 0:
        flags.add("\\Flagged")
    if i % 11 == 0:
        flags.add("$Label1")
    return flags


def subject(box, i):
    return f"{box} message {i} about topic {i % 13}"


def message(box, i):
    body = ("line %d of a message in a big mailbox\r\n" % i) * (5 + i % 40)
    return (f"From: Sender {i % 17} <s{i % 17}@example.net>\r\nTo: big@example.org\r\n"
            f"Subject: {subject(box, i)}\r\nMessage-ID: <{box}.{i}@example.net>\r\n"
            f"\r\n{body}").encode()


def connect(addr, user, password):
    host, port = addr.rsplit(":", 1)
    c = imaplib.IMAP4(host, int(port), timeout=60)
    c.login(user, password)
    return c


def fail(what):
    print("WRONG:", what)
    sys.exit(1)


def ok(typ, data, what):
    if typ != "OK":
        fail(f"{what}: {typ} {data}")
    return data


def fill(c, n):
    c.create("Old")
    for box in MAILBOXES:
        for i in range(1, n + 1):
            flags = "(" + " ".join(sorted(initial_flags(i))) + ")"
            ok(*c.append(box, flags, None, message(box, i)), f"APPEND {box} {i}")


FETCH_RE = re.compile(rb"(\d+) \(UID (\d+) FLAGS \(([^)]*)\)\)")


def fetch_flags(c):
    data = ok(*c.fetch("1:*", "(UID FLAGS)"), "FETCH FLAGS")
    out = {}
    for item in data:
        m = FETCH_RE.match(item if isinstance(item, bytes) else item[0])
        if not m:
            fail(f"unparsed FETCH {item!r}")
        flags = {f for f in m.group(3).decode().split() if f != "\\Recent"}
        out[int(m.group(2))] = flags
    return out


def search(c, uid, *criteria):
    if uid:
        data = ok(*c.uid("SEARCH", *criteria), f"UID SEARCH {criteria}")
    else:
        data = ok(*c.search(None, *criteria), f"SEARCH {criteria}")
    return [int(x) for x in data[0].split()]


# (mailbox, uid) -> the subject that message was APPENDed with.
subjects = {}


def check_state(c, box, model, when):
    """Every answer of the selected `box` against `model` (uid -> flags)."""
    uids = sorted(model)
    typ, data = c.select(box)
    ok(typ, data, f"SELECT {box}")
    if int(data[0]) != len(uids):
        fail(f"{when}: {box} EXISTS {data[0]} != {len(uids)}")
    got = fetch_flags(c)
    if got != model:
        diff = sorted(u for u in set(got) | set(model) if got.get(u) != model.get(u))[:5]
        fail(f"{when}: {box} FETCH FLAGS differs at uids {diff}: "
             f"{[(u, got.get(u), model.get(u)) for u in diff]}")
    seq_of = {u: k + 1 for k, u in enumerate(uids)}
    unseen = [u for u in uids if "\\Seen" not in model[u]]
    if search(c, True, "UNSEEN") != unseen:
        fail(f"{when}: {box} UID SEARCH UNSEEN: {search(c, True, 'UNSEEN')[:10]}... != {unseen[:10]}...")
    if search(c, False, "UNSEEN") != [seq_of[u] for u in unseen]:
        fail(f"{when}: {box} SEARCH UNSEEN (sequence numbers)")
    flagged = [u for u in uids if "\\Flagged" in model[u]]
    if search(c, True, "FLAGGED") != flagged:
        fail(f"{when}: {box} UID SEARCH FLAGGED")
    if search(c, True, "UNSEEN", "FLAGGED") != [u for u in unseen if u in flagged]:
        fail(f"{when}: {box} UID SEARCH UNSEEN FLAGGED")
    typ, data = c.status(box, "(MESSAGES UNSEEN)")
    want = f"MESSAGES {len(uids)} UNSEEN {len(unseen)}"
    if want not in data[0].decode():
        fail(f"{when}: {box} STATUS {data[0]!r}, want {want}")
    # The summaries still read (FETCH ENVELOPE), for a few messages.
    for u in uids[:: max(1, len(uids) // 7)]:
        data = ok(*c.uid("FETCH", str(u), "(ENVELOPE)"), "FETCH ENVELOPE")
        text = data[0] if isinstance(data[0], bytes) else data[0][0]
        if subjects[(box, u)].encode() not in text:
            fail(f"{when}: {box} ENVELOPE of uid {u} lacks {subjects[(box, u)]!r}: {text[:200]!r}")
        # SEARCH SUBJECT reads envelopes alone (of every stored form).
        hits = search(c, True, "SUBJECT", f'"{subjects[(box, u)]}"')
        if u not in hits:
            fail(f"{when}: {box} UID SEARCH SUBJECT {subjects[(box, u)]!r} misses uid {u}: {hits[:10]}")


def store(c, model, set_, op, flags, uid=True):
    """STORE on UIDs `set_` (a list) and apply it to the model."""
    ids = ",".join(str(u) for u in set_)
    verb = {"+": "+FLAGS", "-": "-FLAGS", "=": "FLAGS"}[op]
    ok(*c.uid("STORE", ids, verb, "(" + " ".join(flags) + ")"), f"STORE {verb}")
    for u in set_:
        if op == "+":
            model[u] |= set(flags)
        elif op == "-":
            model[u] -= set(flags)
        else:
            model[u] = set(flags)


def watcher_sees(w, model, changed, when):
    """The second session (INBOX selected) learns `changed` at a NOOP."""
    ok(*w.noop(), "NOOP")
    seen = {}
    for item in w.untagged_responses.pop("FETCH", []):
        u = re.search(rb"UID (\d+)", item)
        f = re.search(rb"FLAGS \(([^)]*)\)", item)
        if u and f:
            seen[int(u.group(1))] = {x for x in f.group(1).decode().split() if x != "\\Recent"}
    for u in changed:
        if seen.get(u) != model[u]:
            fail(f"{when}: the watching session saw uid {u} as {seen.get(u)}, want {model[u]}")


def check(addr, user, password, n):
    c = connect(addr, user, password)
    w = connect(addr, user, password)
    ok(*w.select("INBOX"), "watcher SELECT")
    models = {box: {i: initial_flags(i) for i in range(1, n + 1)} for box in MAILBOXES}
    for box in MAILBOXES:
        for i in range(1, n + 1):
            subjects[(box, i)] = subject(box, i)
    for box in MAILBOXES:
        check_state(c, box, models[box], "as filled")
    for box in MAILBOXES:
        m = models[box]
        c.select(box)
        uids = sorted(m)
        before = {u: set(f) for u, f in m.items()}
        store(c, m, uids[: n // 2], "+", ["\\Seen"])
        store(c, m, uids[n // 4: n // 3], "-", ["\\Seen", "\\Flagged"])
        store(c, m, uids[::5], "+", ["\\Flagged"])
        store(c, m, uids[n - 20:], "=", ["$Label2"])
        check_state(c, box, m, f"after STOREs in {box}")
        if box == "INBOX":
            changed = [u for u in uids if m[u] != before[u]]
            if len(changed) < n // 3:
                fail(f"only {len(changed)} messages changed: the STOREs do not test much")
            watcher_sees(w, m, changed, "STOREs in INBOX")
        # EXPUNGE every 9th (some seen, some not).
        gone = uids[::9]
        store(c, m, gone, "+", ["\\Deleted"])
        ok(*c.expunge(), "EXPUNGE")
        for u in gone:
            del m[u]
        check_state(c, box, m, f"after EXPUNGE in {box}")
    # MOVE unseen and seen messages from Old to INBOX.
    c.select("Old")
    old, inbox = models["Old"], models["INBOX"]
    moving = sorted(old)[:12]
    ok(*c.uid("MOVE", ",".join(map(str, moving)), "INBOX"), "MOVE")
    next_uid = n + 1
    for u in moving:
        inbox[next_uid] = old.pop(u)
        subjects[("INBOX", next_uid)] = subjects[("Old", u)]
        next_uid += 1
    for box in MAILBOXES:
        check_state(c, box, models[box], f"after MOVE, {box}")
    w.logout()
    c.logout()
    print(f"big mailbox: ok ({n} messages per mailbox)")


def main():
    phase, addr, user, password, n = sys.argv[1:6]
    n = int(n)
    if phase == "fill":
        c = connect(addr, user, password)
        fill(c, n)
        c.logout()
        print(f"big mailbox: filled {n} per mailbox")
    else:
        check(addr, user, password, n)


if __name__ == "__main__":
    main()
