"""A full disk under the store (the node's data directory is a small tmpfs,
every body goes to the blob directory): SMTP answers 452 4.3.1 at once
(never 250 for what it did not keep), IMAP APPEND answers NO [UNAVAILABLE],
and once space is free again mail is accepted and exactly what was
answered 250/OK is there.

usage: disk_full.py DATA_DIR SMTP_ADDR IMAP_ADDR USER PASSWORD
"""
import errno
import os
import sys
import time

from outage_client import fail, inbox_subjects, login, send

data_dir, smtp_addr, imap_addr, user, password = sys.argv[1:6]
filler = os.path.join(data_dir, ".disk-filler")


def fill():
    """Writes the filler until the filesystem says ENOSPC."""
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 20, 4096):
            chunk = b"\0" * size
            while True:
                try:
                    f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    st = os.statvfs(data_dir)
    print(f"disk filled: {os.path.getsize(filler)} bytes of filler, {st.f_bavail * st.f_frsize} free")


def append(imap, subject):
    started = time.monotonic()
    msg = (f"From: a@remote.test\r\nTo: {user}\r\nSubject: {subject}\r\n\r\nappended {subject}\r\n").encode()
    typ, data = imap.append("INBOX", None, None, msg)
    took = time.monotonic() - started
    print(f"APPEND {subject}: {typ} {data} after {took:.1f} s")
    return typ, data, took


imap = login(imap_addr, user, password)
kept = []
code, _, _ = send(smtp_addr, user, "before")
if code != 250:
    fail(f"before the fault: {code}")
kept.append("before")

fill()
full_replies = 0
for k in range(3):
    subject = f"during-{k}"
    code, text, took = send(smtp_addr, user, subject)
    if code == 250:
        kept.append(subject)  # written into space the store already had: kept
        continue
    if not 400 <= code < 500:
        fail(f"expected a 4xx on a full disk, got {code} {text!r}")
    if code == 452 and text.startswith(b"4.3.1"):
        full_replies += 1
    # Not retried: a full disk does not clear within a retry budget.
    if took > 10:
        fail(f"the refusal took {took:.1f} s")
if full_replies == 0:
    fail("no 452 4.3.1 (insufficient system storage) while the disk was full")

typ, data, took = append(imap, "appended-during")
if typ == "OK":
    kept.append("appended-during")
elif b"[UNAVAILABLE]" not in data[0]:
    fail(f"APPEND on a full disk: expected NO [UNAVAILABLE], got {typ} {data}")

os.remove(filler)
print("space freed")

code, _, _ = send(smtp_addr, user, "after")
if code != 250:
    fail(f"after the fault: {code}")
kept.append("after")
typ, data, _ = append(imap, "appended-after")
if typ != "OK":
    fail(f"APPEND after the fault: {typ} {data}")
kept.append("appended-after")

subjects = inbox_subjects(imap)
print("INBOX:", subjects)
if subjects != sorted(kept):
    fail(f"INBOX holds {subjects}: expected exactly what was answered 250/OK: {sorted(kept)}")
imap.logout()
print("OK")
