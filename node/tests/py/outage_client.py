"""What the store-fault scripts (store_outage.py, disk_full.py) share: one
SMTP sender that times the reply to the end of data, and the INBOX
read-back by Subject."""
import imaplib
import smtplib
import sys
import time


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def message(user, subject):
    return (f"From: a@remote.test\r\nTo: {user}\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@remote.test>\r\n\r\nbody of {subject}\r\n")


def send(smtp_addr, user, subject):
    """(code, text, seconds) of the reply to the end of data."""
    s = smtplib.SMTP(*hostport(smtp_addr), timeout=120)
    s.ehlo("client.test")
    s.mail("a@remote.test")
    s.rcpt(user)
    started = time.monotonic()
    code, text = s.data(message(user, subject))
    took = time.monotonic() - started
    s.quit()
    print(f"DATA {subject}: {code} {text!r} after {took:.1f} s")
    return code, text, took


def login(imap_addr, user, password):
    imap = imaplib.IMAP4(*hostport(imap_addr), timeout=120)
    imap.login(user, password)
    return imap


def inbox_subjects(imap):
    imap.select("INBOX")
    typ, data = imap.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    return sorted(part[1].decode().split(":", 1)[1].strip()
                  for part in data if isinstance(part, tuple))
