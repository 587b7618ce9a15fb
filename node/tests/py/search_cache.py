#!/usr/bin/env python3
"""SEARCH answers stay right while the node's envelope cache holds the
mailbox: appends by another session, expunges by another session, a
mailbox deleted and created again under the same name, keys mixing
envelopes with flags, sizes and internal dates (which the cache holds
too), SORT by size and arrival, and two mailboxes searched in turn.

    search_cache.py IMAP_ADDR USER PASSWORD

Every answer is compared with a model kept here; prints "search cache ok"
and the number of searches checked.
"""
import datetime
import imaplib
import sys

host, port = sys.argv[1].rsplit(":", 1)
USER, PASSWORD = sys.argv[2], sys.argv[3]
checked = 0


def conn():
    c = imaplib.IMAP4(host, int(port))
    c.login(USER, PASSWORD)
    return c


def append(c, box, subject, sender, flags, pad, day):
    msg = (f"From: {sender}\r\nTo: bob@example.org\r\nSubject: {subject}\r\n"
           f"Message-ID: <{subject.replace(' ', '.')}.{box}@t>\r\n\r\nbody{'x' * pad}\r\n").encode()
    when = datetime.datetime(2025, 1, 1, 12, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=day)
    typ, data = c.append(box, flags, imaplib.Time2Internaldate(when), msg)
    assert typ == "OK", data
    return len(msg)


def search(c, *criteria):
    global checked
    typ, data = c.uid("SEARCH", *criteria)
    assert typ == "OK", data
    checked += 1
    return sorted(int(x) for x in data[0].split())


def uids_with(c, box_model, word, pred=lambda m: True):
    return sorted(u for u, m in box_model.items() if word in m["subject"].lower() and pred(m))


a, b = conn(), conn()
for box in ("Cache", "Other"):
    a.create(box)
model = {"Cache": {}, "Other": {}}


def add(c, box, subject, sender="alice@example.org", seen=False):
    # UIDs are given in order from 1 in a new mailbox.
    uid = max(model[box], default=0) + 1
    # Sizes and internal dates vary, and not in UID order.
    pad, day = (uid * 37) % 500, (uid * 7) % 60
    size = append(c, box, subject, sender, "(\\Seen)" if seen else "", pad, day)
    model[box][uid] = {"subject": subject, "from": sender, "seen": seen, "size": size, "day": day}


def since_day(day):
    d = datetime.date(2025, 1, 1) + datetime.timedelta(days=day)
    return d.strftime("%d-%b-%Y")


def fixed_checks(c, box):
    """Sizes and internal dates, alone and with flags and envelopes; SORT
    by size and arrival."""
    m = model[box]
    for n in (100, 300, 420):
        assert search(c, "LARGER", str(n)) == sorted(u for u, x in m.items() if x["size"] > n), n
        assert search(c, "SMALLER", str(n)) == sorted(u for u, x in m.items() if x["size"] < n), n
    assert search(c, "LARGER", "300", "UNSEEN") == sorted(
        u for u, x in m.items() if x["size"] > 300 and not x["seen"])
    assert search(c, "SINCE", since_day(30), "SUBJECT", "alpha") == sorted(
        u for u, x in m.items() if x["day"] >= 30 and "alpha" in x["subject"])
    assert search(c, "BEFORE", since_day(10)) == sorted(u for u, x in m.items() if x["day"] < 10)
    typ, data = c.uid("SORT", "(SIZE)", "UTF-8", "ALL")
    assert typ == "OK", data
    assert [int(x) for x in data[0].split()] == sorted(m, key=lambda u: (m[u]["size"], u)), "SORT SIZE"
    typ, data = c.uid("SORT", "(REVERSE ARRIVAL)", "UTF-8", "ALL")
    assert typ == "OK", data
    # Ties (same day) in sequence order, then the whole order reversed.
    assert [int(x) for x in data[0].split()] == sorted(m, key=lambda u: (-m[u]["day"], u)), "SORT ARRIVAL"


for i in range(1, 121):
    word = "alpha" if i % 3 == 0 else "beta"
    add(b, "Cache", f"{word} report {i}", "carol@example.org" if i % 5 == 0 else "alice@example.org",
        seen=i % 2 == 0)
for i in range(1, 41):
    add(b, "Other", f"alpha other {i}")

a.select("Cache")
assert search(a, "SUBJECT", "alpha") == uids_with(a, model["Cache"], "alpha")
assert search(a, "FROM", "carol") == sorted(u for u, m in model["Cache"].items() if "carol" in m["from"])
# Envelope and flags together: the hot rows are read beside the cache.
assert search(a, "SUBJECT", "alpha", "UNSEEN") == uids_with(a, model["Cache"], "alpha", lambda m: not m["seen"])
fixed_checks(a, "Cache")

# Another session appends: the new UIDs are read on first use.
for i in range(121, 131):
    add(b, "Cache", f"alpha late {i}")
a.noop()
assert search(a, "SUBJECT", "alpha") == uids_with(a, model["Cache"], "alpha")
assert search(a, "SUBJECT", "late") == uids_with(a, model["Cache"], "late")

# Another session expunges: once this session has seen the EXPUNGE, the
# cached envelopes of the gone UIDs are never answered.
b.select("Cache")
gone = uids_with(b, model["Cache"], "alpha")[:7]
b.uid("STORE", ",".join(map(str, gone)), "+FLAGS", "(\\Deleted)")
b.expunge()
for u in gone:
    del model["Cache"][u]
a.noop()
assert search(a, "SUBJECT", "alpha") == uids_with(a, model["Cache"], "alpha")
fixed_checks(a, "Cache")

# A second mailbox, first FETCHed (envelopes): the FETCH fills the cache
# where its UIDs run on from what is held (1:10, then 11:25; 30:35 leaves
# a gap and is not kept), another session expunges and appends, and the
# searches after it still answer every message.
a.select("Other")
for rng in ("1:10", "30:35", "11:25"):
    typ, data = a.fetch(rng, "(ENVELOPE)")
    assert typ == "OK", data
b.select("Other")
b.store("3,12", "+FLAGS", "(\\Deleted)")
b.expunge()
for u in (3, 12):
    del model["Other"][u]
for i in range(41, 46):
    add(b, "Other", f"alpha other {i}")
a.noop()
assert search(a, "SUBJECT", "alpha") == uids_with(a, model["Other"], "alpha")
assert search(a, "SUBJECT", "\"other 4\"") == uids_with(a, model["Other"], "other 4")
typ, data = a.fetch("1:*", "(ENVELOPE)")
assert typ == "OK", data
assert search(a, "SUBJECT", "alpha") == uids_with(a, model["Other"], "alpha")
a.select("Cache")
assert search(a, "SUBJECT", "beta") == uids_with(a, model["Cache"], "beta")

# SORT by subject over the cached envelopes.
typ, data = a.uid("SORT", "(SUBJECT)", "UTF-8", "SUBJECT", "late")
assert typ == "OK", data
assert sorted(int(x) for x in data[0].split()) == uids_with(a, model["Cache"], "late")

# Deleted and created again under the same name: a new UIDVALIDITY, and
# nothing of the old mailbox answers.
a.select("Other")
b.close()
b.delete("Cache")
b.create("Cache")
model["Cache"] = {}
for i in range(1, 6):
    add(b, "Cache", f"gamma fresh {i}")
a.select("Cache")
assert search(a, "SUBJECT", "alpha") == [], "envelopes of the deleted mailbox answered"
assert search(a, "SUBJECT", "gamma") == [1, 2, 3, 4, 5]

for c in (a, b):
    c.logout()
print(f"search cache ok: {checked} searches checked")
