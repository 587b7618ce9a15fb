#!/usr/bin/env python3
"""SEARCH answers stay right while the node's envelope cache holds the
mailbox: appends by another session, expunges by another session, a
mailbox deleted and created again under the same name, keys mixing
envelopes with flags, SORT, and two mailboxes searched in turn.

    search_cache.py IMAP_ADDR USER PASSWORD

Every answer is compared with a model kept here; prints "search cache ok"
and the number of searches checked.
"""
import imaplib
import sys

host, port = sys.argv[1].rsplit(":", 1)
USER, PASSWORD = sys.argv[2], sys.argv[3]
checked = 0


def conn():
    c = imaplib.IMAP4(host, int(port))
    c.login(USER, PASSWORD)
    return c


def append(c, box, subject, sender="alice@example.org", flags=""):
    msg = (f"From: {sender}\r\nTo: bob@example.org\r\nSubject: {subject}\r\n"
           f"Message-ID: <{subject.replace(' ', '.')}.{box}@t>\r\n\r\nbody\r\n").encode()
    typ, data = c.append(box, flags, None, msg)
    assert typ == "OK", data


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
    append(c, box, subject, sender, "(\\Seen)" if seen else "")
    # UIDs are given in order from 1 in a new mailbox.
    uid = max(model[box], default=0) + 1
    model[box][uid] = {"subject": subject, "from": sender, "seen": seen}


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

# A second mailbox searched in turn, then the first again.
a.select("Other")
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
