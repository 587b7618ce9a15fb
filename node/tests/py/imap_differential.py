#!/usr/bin/env python3
"""Differential IMAP test: the same corpus is APPENDed to meshmail and to
Dovecot (started here on loopback with a throwaway config), then FETCH
items and SEARCH queries are compared by meaning (see imap_wire.parse).

    imap_differential.py MESHMAIL_IMAP USER PASSWORD CORPUS_DIR ALLOWED_FILE [WORKDIR]

Every difference is printed. A difference passes only if ALLOWED_FILE
lists it (`<which> <ITEM> <RFC section> <why meshmail is right>`, where
<which> is a message number, `*`, `multipart`: the item's section is a
multipart part of that message, or `own-binary`: a BINARY.SIZE where
meshmail's size is the length of Dovecot's own BINARY answer for that
section); anything else fails the run. Prints a summary line
`differential: N messages, I items compared, D differ (A allowed)`.
"""
import email
import email.policy
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dovecot_peer import Dovecot  # noqa: E402
from imap_wire import Conn, fetch_items, parse  # noqa: E402

MESHMAIL, USER, PASSWORD, CORPUS, ALLOWED = sys.argv[1:6]
WORKDIR = sys.argv[6] if len(sys.argv) > 6 else None

FETCH_ITEMS = [
    "ENVELOPE",
    "BODYSTRUCTURE",
    "BODY",
    "RFC822.SIZE",
    "FLAGS",
    "INTERNALDATE",
    "BODY.PEEK[]",
    "BODY.PEEK[HEADER]",
    "BODY.PEEK[TEXT]",
    "BODY.PEEK[1]",
    "BODY.PEEK[1.MIME]",
    "BODY.PEEK[2]",
    "BODY.PEEK[2.MIME]",
    "BODY.PEEK[1.1]",
    "BODY.PEEK[2.HEADER]",
    "BODY.PEEK[]<0.100>",
    "BODY.PEEK[TEXT]<7.33>",
    "BODY.PEEK[1]<5.10>",
    "BODY.PEEK[HEADER.FIELDS (FROM SUBJECT X-CORPUS-ID)]",
    "BODY.PEEK[HEADER.FIELDS.NOT (SUBJECT DATE)]",
    "BINARY.SIZE[1]",
    "BINARY.PEEK[1]",
    "BINARY.SIZE[2]",
    "BINARY.PEEK[2]",
]

# (query, literals): 8-bit search strings go as literals with CHARSET UTF-8.
SEARCHES = [
    ("ALL", ()),
    ("SEEN", ()),
    ("UNSEEN", ()),
    ("FLAGGED", ()),
    ("KEYWORD $Label1", ()),
    ("UNKEYWORD $Label1", ()),
    ("NEW", ()),
    ("OLD", ()),
    ("RECENT", ()),
    ("FROM ada", ()),
    ('FROM "Jöhn"', ()),
    ("TO example.jp", ()),
    ("CC zoe", ()),
    ("CC cc1", ()),
    ("CC cc3", ()),
    ("SUBJECT nested", ()),
    ("BODY gamma", ()),
    ("TEXT kappa", ()),
    ("BODY Caf", ()),
    ("HEADER X-Corpus-Id 17", ()),
    ('HEADER X-Mixed-Case-Header "with spaces"', ()),
    ("HEADER Message-ID corpus-1", ()),
    ("HEADER Content-Type multipart", ()),
    ('HEADER In-Reply-To ""', ()),
    ("LARGER 2000", ()),
    ("SMALLER 800", ()),
    ("BEFORE 1-Dec-2025", ()),
    ("SINCE 2-Dec-2025", ()),
    ("ON 1-Dec-2025", ()),
    ("SENTBEFORE 1-Jan-2026", ()),
    ("SENTSINCE 1-Dec-2026", ()),
    ("SENTON 30-Nov-2026", ()),
    ("SENTON 1-Jan-2025", ()),
    ("OR FROM ada SUBJECT plain", ()),
    ("NOT SEEN FLAGGED", ()),
    ("1:10", ()),
    ("UID 5:20,300:*", ()),
    ("CHARSET UTF-8 BODY {}", ("crème".encode(),)),
    ("CHARSET UTF-8 SUBJECT {}", ("Ünïcödé".encode(),)),
    ("CHARSET UTF-8 TEXT {}", ("☃".encode(),)),
    ("CHARSET UTF-8 SUBJECT {}", ("日本語".encode(),)),
    ("CHARSET UTF-8 BODY {}", ("straße".encode(),)),
]


# SORT (RFC 5256) criteria, each over the whole mailbox and a subset.
SORTS = [
    "(ARRIVAL)",
    "(REVERSE ARRIVAL)",
    "(DATE)",
    "(REVERSE DATE)",
    "(SIZE)",
    "(SUBJECT)",
    "(FROM)",
    "(TO)",
    "(CC)",
    "(SUBJECT REVERSE DATE)",
    "(FROM SIZE)",
]

# THREAD (RFC 5256) algorithms, each over these search programs (the
# corpus's messages 320-343 are reply chains made for this).
THREAD_ALGORITHMS = ["REFERENCES", "ORDEREDSUBJECT"]
THREAD_QUERIES = ["ALL", "SEEN", "UID 300:*", "NOT SUBJECT planning"]


def corpus():
    names = sorted(n for n in os.listdir(CORPUS) if n.endswith(".eml"))
    return [(n, open(os.path.join(CORPUS, n), "rb").read()) for n in names]


def append_args(i):
    flags = []
    if i % 5 == 0:
        flags.append("\\Seen")
    if i % 7 == 0:
        flags += ["\\Flagged", "$Label1"]
    if i % 11 == 0:
        flags.append("\\Answered")
    # Past dates only: Dovecot replaces an INTERNALDATE in the future by
    # the time of saving.
    day = 30 if i < 100 else (1 if i < 250 else 2)
    month = "Nov" if day == 30 else "Dec"
    date = f'"{day:02}-{month}-2025 {i % 24:02}:{i % 60:02}:00 +0000"'
    return f"({' '.join(flags)}) {date}"


def load(conn, messages):
    for i, (_, data) in enumerate(messages):
        conn.ok(f"APPEND INBOX {append_args(i)} {{}}", (data,))


def session(addr):
    c = Conn(addr)
    c.ok(f'LOGIN "{USER}" "{PASSWORD}"')
    return c


def fetch_all(conn, item, n):
    """{uid index: value} for one item over all messages; where the whole
    command fails (one message's BINARY refused), fall back per message and
    record the refusal as the value ('NO', code)."""
    out = {}
    untagged, tagged = conn.command(f"UID FETCH 1:* ({item})")
    if tagged.split(b" ", 2)[1] == b"OK":
        for ln in untagged:
            items = fetch_items(ln)
            if items and b"UID" in items:
                out[int(items[b"UID"])] = pick(items, item)
        return out
    for uid in range(1, n + 1):
        untagged, tagged = conn.command(f"UID FETCH {uid} ({item})")
        status = tagged.split(b" ", 2)
        if status[1] != b"OK":
            out[uid] = ("refused", status[1].decode(), code(tagged))
            continue
        for ln in untagged:
            items = fetch_items(ln)
            if items and b"UID" in items:
                out[int(items[b"UID"])] = pick(items, item)
    return out


def code(tagged):
    rest = tagged.split(b" ", 2)[2] if tagged.count(b" ") >= 2 else b""
    return rest[1:rest.index(b"]")].decode() if rest.startswith(b"[") and b"]" in rest else ""


def pick(items, item):
    """The response item for a requested item (`BODY.PEEK[1]<5.10>` is
    answered as `BODY[1]<5>`)."""
    want = item.upper().replace(".PEEK", "")
    if "<" in want:
        want = want[:want.index("<")] + want[want.index("<"):want.index(".", want.index("<"))] + ">"
    key = want.encode()
    if key in items:
        v = items[key]
        return sorted(v) if want == "FLAGS" else v
    return ("missing", sorted(k.decode() for k in items))


def search(conn, query, literals):
    untagged, tagged = conn.command(f"UID SEARCH {query}", literals)
    if tagged.split(b" ", 2)[1] != b"OK":
        return ("refused", tagged.decode().strip())
    uids = set()
    for ln in untagged:
        if ln.startswith(b"* SEARCH"):
            uids |= {int(x) for x in ln.split()[2:]}
    return sorted(uids)


def sort(conn, criteria, query):
    untagged, tagged = conn.command(f"UID SORT {criteria} UTF-8 {query}")
    if tagged.split(b" ", 2)[1] != b"OK":
        return ("refused", tagged.decode().strip())
    return [int(x) for ln in untagged if ln.startswith(b"* SORT") for x in ln.split()[2:]]


def thread(conn, algorithm, query):
    """The threads of `UID THREAD` as a list of top-level thread strings."""
    untagged, tagged = conn.command(f"UID THREAD {algorithm} UTF-8 {query}")
    if tagged.split(b" ", 2)[1] != b"OK":
        return ("refused", tagged.decode().strip())
    text = b"".join(ln[len(b"* THREAD"):].strip() for ln in untagged if ln.startswith(b"* THREAD")).decode()
    threads, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                threads.append(text[start:i + 1])
    return threads


def allowed_rules():
    rules = []
    for ln in open(ALLOWED, encoding="utf-8"):
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        who, item, section, _why = ln.split(None, 3)
        rules.append((who, item, section))
    return rules


def section_is_multipart(raw, item):
    """Is the part an item like `BINARY.SIZE[1.2]` names a multipart?"""
    if "[" not in item:
        return False
    spec = item[item.index("[") + 1:item.index("]")]
    if not spec or not spec[0].isdigit():
        return False
    part = email.message_from_bytes(raw, policy=email.policy.compat32)
    for n in (int(x) for x in spec.split(".") if x.isdigit()):
        if not part.is_multipart():
            return False
        kids = part.get_payload()
        if n > len(kids):
            return False
        part = kids[n - 1]
    return part.is_multipart()


def is_allowed(rules, number, item, raw=None, ours=None, ref_binary=None):
    for who, it, _ in rules:
        if it != item:
            continue
        if who == "*" or who == f"{number:03}":
            return True
        if who == "multipart" and raw is not None and section_is_multipart(raw, item):
            return True
        if who == "own-binary" and isinstance(ref_binary, bytes) and isinstance(ours, bytes) \
                and ours.isdigit() and int(ours) == len(ref_binary):
            return True
    return False


def first_diff(a, b, path=""):
    """Where two parsed values first differ: (path, a part, b part)."""
    if isinstance(a, list) and isinstance(b, list):
        for k, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_diff(x, y, f"{path}/{k}")
        if len(a) != len(b):
            return (f"{path}/len", len(a), len(b))
    return (path or "/", a, b)


def short(v, limit=300):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + "..."


def main():
    messages = corpus()
    n = len(messages)
    work = WORKDIR or tempfile.mkdtemp(prefix="meshmail-dovecot-")
    with Dovecot(os.path.join(work, "dovecot"), {USER: PASSWORD}) as dove:
        ref = session(f"127.0.0.1:{dove.imap_port}")
        ours = session(MESHMAIL)
        load(ref, messages)
        load(ours, messages)
        # STATUS=SIZE (RFC 8438): the mailbox's total RFC822.SIZE.
        status = [c.command("STATUS INBOX (MESSAGES SIZE)")[0] for c in (ref, ours)]
        status_lines = [b" ".join(ln for ln in u if ln.startswith(b"* STATUS")) for u in status]
        for c in (ref, ours):
            c.ok("SELECT INBOX")
        rules = allowed_rules()
        compared = differ = allowed = 0
        ref_all = {item: fetch_all(ref, item, n) for item in FETCH_ITEMS}
        for item in FETCH_ITEMS:
            a, b = ref_all[item], fetch_all(ours, item, n)
            binary = ref_all.get(item.replace("BINARY.SIZE", "BINARY.PEEK"), {})
            bad = 0
            for uid in range(1, n + 1):
                compared += 1
                if a.get(uid) == b.get(uid):
                    continue
                differ += 1
                name = messages[uid - 1][0][:3]
                if is_allowed(rules, uid - 1, item, messages[uid - 1][1], b.get(uid), binary.get(uid)):
                    allowed += 1
                    continue
                bad += 1
                if bad <= int(os.environ.get("DIFF_LIMIT", "3")):
                    path, x, y = first_diff(a.get(uid), b.get(uid))
                    print(f"DIFF {name} {item} at {path}\n  dovecot:  {short(x)}\n  meshmail: {short(y)}")
            if bad:
                print(f"item {item}: {bad} of {n} differ")
        for query, lits in SEARCHES:
            compared += 1
            a, b = search(ref, query, lits), search(ours, query, lits)
            if a != b:
                differ += 1
                if is_allowed(rules, -1, "SEARCH:" + query.replace(" ", "_")):
                    allowed += 1
                    continue
                only_ref = sorted(set(a) - set(b)) if isinstance(a, list) and isinstance(b, list) else a
                only_ours = sorted(set(b) - set(a)) if isinstance(a, list) and isinstance(b, list) else b
                print(f"DIFF SEARCH {query} {lits}\n  only dovecot: {short(only_ref)}\n  only meshmail: {short(only_ours)}")
        for criteria in SORTS:
            for query in ("ALL", "SEEN"):
                compared += 1
                a, b = sort(ref, criteria, query), sort(ours, criteria, query)
                if a != b:
                    differ += 1
                    if is_allowed(rules, -1, "SORT:" + criteria.replace(" ", "_")):
                        allowed += 1
                        continue
                    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
                    where = f"first at position {k}: dovecot {a[k:k + 5]} meshmail {b[k:k + 5]}" if k is not None \
                        else f"dovecot {short(a)} meshmail {short(b)}"
                    print(f"DIFF SORT {criteria} {query} {where}")
        compared += 1
        sizes = [re.search(rb"MESSAGES (\d+) SIZE (\d+)", ln) for ln in status_lines]
        if not all(sizes) or sizes[0].groups() != sizes[1].groups():
            differ += 1
            print(f"DIFF STATUS (MESSAGES SIZE)\n  dovecot:  {status_lines[0]}\n  meshmail: {status_lines[1]}")
        for algorithm in THREAD_ALGORITHMS:
            for query in THREAD_QUERIES:
                compared += 1
                a, b = thread(ref, algorithm, query), thread(ours, algorithm, query)
                if a != b:
                    differ += 1
                    if is_allowed(rules, -1, f"THREAD:{algorithm}_{query}".replace(" ", "_")):
                        allowed += 1
                        continue
                    only_ref = [t for t in a if t not in b] if isinstance(a, list) and isinstance(b, list) else a
                    only_ours = [t for t in b if t not in a] if isinstance(a, list) and isinstance(b, list) else b
                    print(f"DIFF THREAD {algorithm} {query}\n  only dovecot: {short(only_ref, 600)}"
                          f"\n  only meshmail: {short(only_ours, 600)}")
        ref.close()
        ours.close()
    print(f"differential: {n} messages, {compared} items compared, {differ} differ ({allowed} allowed)")
    sys.exit(0 if differ == allowed else 1)


if __name__ == "__main__":
    main()
