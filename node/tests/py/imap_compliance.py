"""IMAP answers an outside compliance suite checks (issue 40), through
imaplib against a node whose INBOX holds 3 messages.

usage: imap_compliance.py IMAP_ADDR USER PASSWORD
"""
import imaplib
import sys

addr, user, password = sys.argv[1:4]
host, port = addr.rsplit(":", 1)


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


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
print("imap compliance: ok")
