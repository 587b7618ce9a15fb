"""Big operations through real clients (smtplib, imaplib), for
node/tests/fdb_limits.rs:

  big_ops.py big-message SMTP IMAP USER PASSWORD MIB
      sends one MIB-MiB message over SMTP, reads it back over IMAP,
      compares SHA-256 of the bytes sent and fetched
  big_ops.py expunge-all IMAP USER PASSWORD COUNT
      checks INBOX holds COUNT messages, flags them all \\Deleted in one
      STORE, EXPUNGEs, and checks INBOX is empty (in this session and a new one)
"""
import base64
import hashlib
import imaplib
import smtplib
import sys
import time


def imap(addr, user, password):
    host, port = addr.rsplit(":", 1)
    c = imaplib.IMAP4(host, int(port), timeout=600)
    c.login(user, password)
    return c


def ok(typ, data, what):
    if typ != "OK":
        sys.exit(f"{what}: {typ} {data}")
    return data


def big_message(smtp_addr, imap_addr, user, password, mib):
    raw_attachment = bytes((i * 7919) % 251 for i in range(mib * 1024 * 1024 * 3 // 4))
    b64 = base64.encodebytes(raw_attachment)
    msg = (
        b"From: sender@example.net\r\nTo: " + user.encode() + b"\r\n"
        b"Subject: a big one\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n"
        b"--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"
        b"--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + b64.replace(b"\n", b"\r\n") + b"--b--\r\n"
    )
    host, port = smtp_addr.rsplit(":", 1)
    started = time.monotonic()
    with smtplib.SMTP(host, int(port), timeout=600) as s:
        s.sendmail("sender@example.net", [user], msg)
    sent_s = time.monotonic() - started
    c = imap(imap_addr, user, password)
    data = ok(*c.select("INBOX"), "SELECT")
    if int(data[0]) != 1:
        sys.exit(f"INBOX holds {data[0]!r}, want 1")
    started = time.monotonic()
    data = ok(*c.fetch("1", "(RFC822.SIZE BODY.PEEK[])"), "FETCH")
    fetched = data[0][1]
    size = int(data[0][0].split(b"RFC822.SIZE ")[1].split()[0])
    fetch_s = time.monotonic() - started
    # What was stored is what was sent, after the Received: trace line(s)
    # the server prepends.
    tail = fetched[-len(msg):]
    if hashlib.sha256(tail).hexdigest() != hashlib.sha256(msg).hexdigest():
        sys.exit(f"fetched bytes differ ({len(fetched)} fetched, {len(msg)} sent)")
    if size != len(fetched):
        sys.exit(f"RFC822.SIZE {size} but {len(fetched)} bytes fetched")
    print(f"big message: {len(msg)} bytes sent in {sent_s:.1f} s, fetched back identical in {fetch_s:.1f} s")


def expunge_all(imap_addr, user, password, count):
    c = imap(imap_addr, user, password)
    data = ok(*c.select("INBOX"), "SELECT")
    if int(data[0]) != count:
        sys.exit(f"INBOX holds {data[0]!r}, want {count}")
    started = time.monotonic()
    ok(*c.store("1:*", "+FLAGS.SILENT", "(\\Deleted)"), "STORE")
    store_s = time.monotonic() - started
    started = time.monotonic()
    typ, data = c.expunge()
    ok(typ, data, "EXPUNGE")
    expunge_s = time.monotonic() - started
    c.logout()
    c = imap(imap_addr, user, password)
    data = ok(*c.select("INBOX"), "SELECT again")
    if int(data[0]) != 0:
        sys.exit(f"INBOX still holds {data[0]!r} after EXPUNGE")
    print(f"expunge all: {count} flagged in {store_s:.1f} s, expunged in {expunge_s:.1f} s")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "big-message":
        big_message(args[0], args[1], args[2], args[3], int(args[4]))
    elif cmd == "expunge-all":
        expunge_all(args[0], args[1], args[2], int(args[3]))
    else:
        sys.exit(__doc__)


main()
