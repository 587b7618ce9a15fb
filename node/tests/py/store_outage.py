"""A store whose write lock another process holds: SMTP answers 451 within
its delivery timeout (never 250 for what it did not keep), IMAP answers
NO [UNAVAILABLE] within the store's retry budget, and after the lock is
released mail is accepted again and only what was answered 250 is there.

usage: store_outage.py SQLITE_FILE SMTP_ADDR IMAP_ADDR USER PASSWORD DELIVERY_TIMEOUT_S
"""
import sqlite3
import sys
import time

from outage_client import fail, inbox_subjects, login, send

db, smtp_addr, imap_addr, user, password, timeout_s = sys.argv[1:7]
timeout_s = float(timeout_s)


# Logged in before the outage: LOGIN itself needs no write.
imap = login(imap_addr, user, password)

code, _, took = send(smtp_addr, user, "before")
if code != 250:
    fail(f"before the outage: {code}")

lock = sqlite3.connect(db, isolation_level=None, timeout=30)
lock.execute("BEGIN EXCLUSIVE")
print("store locked")

code, _, took = send(smtp_addr, user, "during")
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

code, _, took = send(smtp_addr, user, "after")
if code != 250:
    fail(f"after the outage: {code}")
typ, data = imap.create("Outage")
if typ != "OK":
    fail(f"CREATE after the outage: {typ} {data}")

subjects = inbox_subjects(imap)
print("INBOX:", subjects)
if subjects != ["after", "before"]:
    fail(f"INBOX holds {subjects}: expected exactly the two messages answered 250")
imap.logout()
print("OK")
