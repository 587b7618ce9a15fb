"""A store whose write lock another process holds: SMTP answers 451 within
its delivery timeout (never 250 for what it did not keep), IMAP answers
NO [UNAVAILABLE] within the store's retry budget, and after the lock is
released mail is accepted again and only what was answered 250 is there.

usage: store_outage.py SQLITE_FILE SMTP_ADDR IMAP_ADDR USER PASSWORD DELIVERY_TIMEOUT_S
"""
import imaplib
import smtplib
import sqlite3
import sys
import time

db, smtp_addr, imap_addr, user, password, timeout_s = sys.argv[1:7]
timeout_s = float(timeout_s)
sh, sp = smtp_addr.rsplit(":", 1)
ih, ip = imap_addr.rsplit(":", 1)


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def message(subject):
    return (f"From: a@remote.test\r\nTo: {user}\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@remote.test>\r\n\r\nbody of {subject}\r\n")


def send(subject):
    """(code, seconds) of the reply to the end of data."""
    s = smtplib.SMTP(sh, int(sp), timeout=120)
    s.ehlo("client.test")
    s.mail("a@remote.test")
    s.rcpt(user)
    started = time.monotonic()
    code, text = s.data(message(subject))
    took = time.monotonic() - started
    s.quit()
    print(f"DATA {subject}: {code} {text!r} after {took:.1f} s")
    return code, took


# Logged in before the outage: LOGIN itself needs no write.
imap = imaplib.IMAP4(ih, int(ip), timeout=120)
imap.login(user, password)

code, took = send("before")
if code != 250:
    fail(f"before the outage: {code}")

lock = sqlite3.connect(db, isolation_level=None, timeout=30)
lock.execute("BEGIN EXCLUSIVE")
print("store locked")

code, took = send("during")
if code == 250:
    fail("250 for a message while the store was locked")
if not 400 <= code < 500:
    fail(f"expected a 4xx while the store is locked, got {code}")
# The timeout, plus at most one commit attempt (SQLite's 5 s busy timeout).
if took > timeout_s + 8:
    fail(f"451 took {took:.1f} s with delivery_timeout_s = {timeout_s}")

started = time.monotonic()
typ, data = imap.create("Outage")
took = time.monotonic() - started
print(f"CREATE during the outage: {typ} {data} after {took:.1f} s")
if typ != "NO" or b"[UNAVAILABLE]" not in data[0]:
    fail(f"expected NO [UNAVAILABLE], got {typ} {data}")
if took > 40:
    fail(f"CREATE answered after {took:.1f} s (retry budget 20 s)")

lock.execute("ROLLBACK")
lock.close()
print("store released")

code, took = send("after")
if code != 250:
    fail(f"after the outage: {code}")
typ, data = imap.create("Outage")
if typ != "OK":
    fail(f"CREATE after the outage: {typ} {data}")

imap.select("INBOX")
typ, data = imap.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
subjects = sorted(part[1].decode().split(":", 1)[1].strip()
                  for part in data if isinstance(part, tuple))
print("INBOX:", subjects)
if subjects != ["after", "before"]:
    fail(f"INBOX holds {subjects}: expected exactly the two messages answered 250")
imap.logout()
print("OK")
