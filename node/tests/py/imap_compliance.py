"""IMAP answers an outside compliance suite checks (issue 40), through
imaplib against a node whose INBOX holds 3 messages.

usage: imap_compliance.py IMAP_ADDR USER PASSWORD
"""
import imaplib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imap_wire import Conn  # noqa: E402

addr, user, password = sys.argv[1:4]
host, port = addr.rsplit(":", 1)


failures = []


def fail(why):
    # Every check runs, so one run shows all that differ.
    print("FAIL:", why)
    failures.append(why)


def session():
    c = imaplib.IMAP4(host, int(port), timeout=60)
    c.login(user, password)
    return c


# OK [UNSEEN n] on SELECT/EXAMINE for IMAP4rev1 clients (RFC 3501 §6.3.1):
# the first unseen message's sequence number.
c = session()
c.select("INBOX")
c.store("1", "+FLAGS", "(\\Seen)")
c.logout()
for command in ("select", "examine"):
    c = session()
    typ, _ = c.select("INBOX", readonly=(command == "examine"))
    unseen = c.untagged_responses.get("UNSEEN")
    if unseen != [b"2"]:
        fail(f"{command}: UNSEEN {unseen!r}, want [b'2'] (message 1 is seen)")
    c.logout()

# Not after ENABLE IMAP4rev2 (RFC 9051 dropped it).
c = session()
c._simple_command("ENABLE", "IMAP4rev2")
c.select("INBOX")
if "UNSEEN" in c.untagged_responses:
    fail(f"UNSEEN sent to an IMAP4rev2 session: {c.untagged_responses['UNSEEN']!r}")
c.logout()

# All seen: no UNSEEN code.
c = session()
c.select("INBOX")
c.store("1:*", "+FLAGS", "(\\Seen)")
c.logout()
c = session()
c.select("INBOX")
if "UNSEEN" in c.untagged_responses:
    fail(f"UNSEEN with every message seen: {c.untagged_responses['UNSEEN']!r}")
c.logout()
# SEARCH HEADER matches any occurrence of the field, unfolded,
# case-insensitive substring (RFC 3501 §6.4.4): repeated and folded fields.
msg = (b"From: a@example.net\r\nSubject: headers\r\n"
       b"X-Extra: first value\r\n"
       b"X-Extra: this is\r\n another VALUE\r\n"
       b"x-extra: third\r\n\r\nbody\r\n")
c = session()
typ, data = c.append("INBOX", None, None, msg)
if typ != "OK":
    fail(f"APPEND: {typ} {data}")
c.select("INBOX")
typ, data = c.search(None, "HEADER", "X-Extra", '"first"')
want = data[0].split()
if len(want) != 1:
    fail(f"HEADER X-Extra first: {data}")
for needle in ('"another"', '"is another value"', '"third"', '"THIRD"'):
    typ, data = c.search(None, "HEADER", "X-Extra", needle)
    if data[0].split() != want:
        fail(f"HEADER X-Extra {needle}: {data}, want {want} (the message with repeated and folded X-Extra)")
typ, data = c.search(None, "HEADER", "X-Extra", '"value this"')
if data[0].split():
    fail(f"HEADER X-Extra matched across two fields: {data}")
c.logout()


def command(c, name, *args):
    """Runs a command imaplib has no method for; returns (status, the
    untagged responses it left, by name)."""
    c.untagged_responses.clear()
    typ, _ = c._simple_command(name, *args)
    return typ, dict(c.untagged_responses)


# CONDSTORE enabled by use (RFC 7162 §3.1): the first FETCH MODSEQ of a
# session also gives the untagged OK [HIGHESTMODSEQ n] (§3.1.2.1).
c = session()
c.create("cs")
for s in "abcd":
    c.append("cs", None, None, f"Subject: {s}\r\n\r\nx\r\n".encode())
typ, data = c.select("cs")
for name, flags in (("2", "(\\Seen)"), ("3", "(\\Seen)"), ("1", "(\\Flagged)")):
    c.store(name, "+FLAGS", flags)
# imaplib files a tagged response's code with the untagged ones: the raw
# wire tells them apart.
raw = Conn(addr)
raw.ok(f'LOGIN "{user}" "{password}"')
raw.ok("SELECT cs")
untagged, tagged = raw.command("FETCH 1 (MODSEQ)")
if not untagged or not untagged[0].startswith(b"* OK [HIGHESTMODSEQ "):
    fail(f"first FETCH (MODSEQ): no untagged OK [HIGHESTMODSEQ] before the FETCH: {untagged!r} {tagged!r}")
untagged, tagged = raw.command("FETCH 1 (MODSEQ)")
if any(b"HIGHESTMODSEQ" in ln for ln in untagged + [tagged]):
    fail(f"second FETCH (MODSEQ) repeated HIGHESTMODSEQ: {untagged!r} {tagged!r}")
raw.close()
# The other CONDSTORE enabling commands the same way, each first in its
# session: SEARCH MODSEQ, STORE UNCHANGEDSINCE.
for first in ("SEARCH MODSEQ 1", "STORE 4 (UNCHANGEDSINCE 1000000) +FLAGS (\\Draft)"):
    raw = Conn(addr)
    raw.ok(f'LOGIN "{user}" "{password}"')
    raw.ok("SELECT cs")
    untagged, tagged = raw.command(first)
    if not untagged or not untagged[0].startswith(b"* OK [HIGHESTMODSEQ "):
        fail(f"first {first}: no untagged OK [HIGHESTMODSEQ] first: {untagged!r} {tagged!r}")
    raw.close()
typ, got = command(c, "FETCH", "1:*", "(MODSEQ)")
modseq = {}
for line in got.get("FETCH", []):
    seq, rest = line.split(b" ", 1)
    modseq[int(seq)] = int(rest.split(b"MODSEQ (")[1].split(b")")[0])
if len(modseq) != 4:
    fail(f"FETCH 1:* (MODSEQ): {got!r}")


# SEARCH RETURN ... MODSEQ: the highest MODSEQ of the messages the answer
# returns (RFC 7162 §3.1.5, RFC 4731 §3.2); no MODSEQ when none match.
def esearch(*args):
    typ, got = command(c, "SEARCH", "RETURN", *args)
    lines = got.get("ESEARCH", [])
    return lines[0].split(b")", 1)[1].strip().decode() if len(lines) == 1 else repr(got)


if len(modseq) == 4:
    for ret, keys, want in (
        ("(MIN)", ("MODSEQ", "1"), f"MIN 1 MODSEQ {modseq[1]}"),
        ("(MAX)", ("MODSEQ", "1"), f"MAX 4 MODSEQ {modseq[4]}"),
        ("(MIN MAX)", ("2:3", "MODSEQ", "1"), f"MIN 2 MAX 3 MODSEQ {max(modseq[2], modseq[3])}"),
        ("(COUNT)", ("MODSEQ", "1"), f"COUNT 4 MODSEQ {max(modseq.values())}"),
        ("(ALL)", ("2:3", "MODSEQ", '"/flags/\\\\seen"', "all", "1000000"), ""),
    ):
        got = esearch(ret, *keys)
        if got != want:
            fail(f"SEARCH RETURN {ret} {' '.join(keys)}: {got!r}, want {want!r}")
c.logout()


def listing(lines):
    """{name: (attributes, extended data)} of LIST/LSUB lines; a name seen
    twice is recorded under ('DUPLICATE', name)."""
    out = {}
    for line in lines:
        line = line.decode() if isinstance(line, bytes) else line
        attrs, rest = line[1:].split(") ", 1)
        rest = rest.split(" ", 1)[1]  # the delimiter
        if rest.startswith('"'):
            name, ext = rest[1:].split('"', 1)
        else:
            name, _, ext = rest.partition(" ")
        key = name if name not in out else ("DUPLICATE", name)
        out[key] = (set(attrs.split()), ext.strip())
    return out


# CREATE subscribes nothing, superiors included (RFC 3501 §6.3.3, §6.3.6):
# LIST RETURN (SUBSCRIBED) marks only what was subscribed (RFC 5258 §4).
c = session()
for name in ("x/a", "x/b", "x/c/d"):
    c.create(name)
for name in ("x/a", "x/c/d"):
    c.subscribe(name)
typ, got = command(c, "LIST", '""', "x/%", "RETURN", "(CHILDREN SUBSCRIBED)")
got = listing(got.get("LIST", []))
want = {"x/a": {"\\Subscribed", "\\HasNoChildren"}, "x/b": {"\\HasNoChildren"}, "x/c": {"\\HasChildren"}}
if {k: v[0] for k, v in got.items()} != want:
    fail(f'LIST "" x/% RETURN (CHILDREN SUBSCRIBED): {got!r}, want {want!r}')
# LSUB: the unsubscribed superior x/c of subscribed x/c/d as \Noselect
# (RFC 3501 §6.3.9), a subscribed name once.
typ, got = command(c, "LSUB", '""', "x/%")
got = listing(got.get("LSUB", []))
want = {"x/a": set(), "x/c": {"\\Noselect"}}
if {k: v[0] for k, v in got.items()} != want:
    fail(f'LSUB "" x/%: {got!r}, want {want!r}')
# RECURSIVEMATCH (RFC 5258 §3, example 9 of §5): CHILDINFO on a matching
# name with a subscribed descendant the pattern does not match; a
# superior whose subscribed descendants all match is not listed.
for name in ("ptest8/kid", "qtest8/kid", "rtest8/subtest8"):
    c.create(name)
for name in ("ptest8/kid", "qtest8", "qtest8/kid", "rtest8/subtest8"):
    c.subscribe(name)
typ, got = command(c, "LIST", "(SUBSCRIBED RECURSIVEMATCH)", '""', "*test8")
got = listing(got.get("LIST", []))
childinfo = '("CHILDINFO" ("SUBSCRIBED"))'
want = {
    "ptest8": (set(), childinfo),
    "qtest8": ({"\\Subscribed"}, childinfo),
    "rtest8/subtest8": ({"\\Subscribed"}, ""),
}
norm = {k: (v[0] - {"\\HasChildren", "\\HasNoChildren"}, v[1]) for k, v in got.items()}
if norm != want:
    fail(f'LIST (SUBSCRIBED RECURSIVEMATCH) "" *test8: {got!r}, want {want!r}')
c.logout()

# SORT (RFC 5256): base subjects (§2.1: Re/Fw/Fwd leaders, [blob]s,
# (fwd) trailers, [Fwd: ...] wrappers, nested and repeated, whitespace),
# ties in the mailbox's order (§3), REVERSE per key and secondary keys;
# strings compare with i;ascii-casemap, which folds to upper case (RFC 4790
# §9.2), so "[", "^", "_" and "`" sort after letters. The answers are
# Dovecot 2.3's for the same messages.
SORT_MESSAGES = [
    # (subject, from, day of January 2022)
    ("Re: topic", "b@x", 3),
    ("topic", "B_@x", 1),
    ("Fwd: Re: [list] topic (fwd)", "bz@x", 2),
    ("[list] Re: Fw: alpha", "b^@x", 5),
    ("   Alpha   ", "a@x", 4),
    ("[Fwd: Re: beta]", "_@x", 9),
    ("re: [x] RE: beta (FWD) (fwd)", "Z@x", 8),
    ("Re[3]: [blob1] [blob2] gamma", "`@x", 7),
    ("[blob] ", "z@x", 7),
    ("Fw:gamma", "{@x", 7),
    ("[a][b] Re: [c] Fwd:  delta\t x", "c@x", 6),
    ("delta x", "c@x", 6),
    ("_under", "d@x", 10),
    ("Zed", "d@x", 11),
    ("^caret", "d@x", 12),
    ("`tick", "d@x", 13),
    ("[Fwd: [Fwd: zeta]]", "e@x", 14),
    ("zeta", "e@x", 14),
]
SORT_ANSWERS = {
    "(SUBJECT)": "4 5 6 7 11 12 8 10 1 2 3 14 17 18 9 15 13 16",
    "(REVERSE SUBJECT)": "16 13 15 9 17 18 14 1 2 3 8 10 11 12 6 7 4 5",
    "(SUBJECT REVERSE DATE)": "4 5 6 7 11 12 8 10 1 3 2 14 17 18 9 15 13 16",
    "(REVERSE SUBJECT DATE)": "16 13 15 9 17 18 14 2 3 1 8 10 11 12 7 6 5 4",
    "(FROM)": "5 1 3 4 2 11 12 13 14 15 16 17 18 7 9 6 8 10",
    "(REVERSE FROM SUBJECT)": "10 8 6 7 9 17 18 14 15 13 16 11 12 2 4 3 1 5",
    "(DATE SUBJECT)": "2 3 1 5 4 11 12 8 10 9 7 6 13 14 15 16 17 18",
}
c = session()
c.create("sorting")
for subject, sender, day in SORT_MESSAGES:
    msg = f"Subject: {subject}\r\nFrom: {sender}\r\nDate: Mon, {day} Jan 2022 10:00:00 +0000\r\n\r\nx\r\n"
    c.append("sorting", None, None, msg.encode())
c.select("sorting")
for criteria, want in SORT_ANSWERS.items():
    typ, data = c.sort(criteria, "UTF-8", "ALL")
    if data[0].decode() != want:
        fail(f"SORT {criteria}: {data[0].decode()!r}, want {want!r}")
c.logout()
# BODYSTRUCTURE lines count the line breaks in a part's content; the CRLF
# before a boundary is the boundary's (RFC 2046 §5.1.1), sizes unchanged.
# Three Cc fields (Cc, CC, cc) all make the ENVELOPE and SEARCH CC.
# Dovecot 2.3 answers the same (imap_dovecot.rs, corpus 344-352).
c = session()
c.create("shapes")
c.append("shapes", None, None,
         b"From: a@example.net\r\nSubject: lines\r\nMIME-Version: 1.0\r\n"
         b"Content-Type: multipart/mixed; boundary=b\r\n\r\n"
         b"--b\r\nContent-Type: text/plain\r\n\r\nline one\r\nline two\r\n"
         b"--b\r\nContent-Type: text/plain\r\n\r\nends blank\r\n\r\n--b--")
c.append("shapes", None, None,
         b"From: a@example.net\r\nSubject: ccs\r\nCc: One <cc1@example.org>\r\n"
         b"CC: cc2@example.org,\r\n cc3@example.org\r\ncc: cc4@example.org\r\n\r\nbody\r\n")
c.select("shapes")
typ, data = c.fetch("1", "(BODYSTRUCTURE)")
want = ('(("text" "plain" ("charset" "us-ascii") NIL NIL "7bit" 18 1 NIL NIL NIL NIL)'
        '("text" "plain" ("charset" "us-ascii") NIL NIL "7bit" 12 1 NIL NIL NIL NIL)')
if want not in data[0].decode():
    fail(f"BODYSTRUCTURE line counts: {data[0]!r}, want parts {want}")
typ, data = c.fetch("2", "(ENVELOPE)")
want = ('(("One" NIL "cc1" "example.org")(NIL NIL "cc2" "example.org")'
        '(NIL NIL "cc3" "example.org")(NIL NIL "cc4" "example.org"))')
if want not in data[0].decode():
    fail(f"ENVELOPE of three Cc fields: {data[0]!r}, want cc {want}")
for needle in ("cc1", "cc2", "cc3", "cc4"):
    typ, data = c.search(None, "CC", needle)
    if data[0].split() != [b"2"]:
        fail(f"SEARCH CC {needle}: {data!r}, want [b'2']")
c.logout()
print("imap compliance: ok" if not failures else f"imap compliance: {len(failures)} failed")
sys.exit(1 if failures else 0)
