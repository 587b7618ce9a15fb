#!/usr/bin/env python3
"""QUOTA (RFC 9208) over real sockets: GETQUOTA/GETQUOTAROOT with imaplib,
and enforcement everywhere a message enters an account: SMTP (552 5.2.2
at RCPT when already full, at DATA when this message would not fit),
LMTP (per recipient), IMAP APPEND and COPY (`NO [OVERQUOTA]`); MOVE
needs no room; an EXPUNGE frees it again.

    imap_quota.py SMTP_ADDR LMTP_ADDR IMAP_ADDR USER PASSWORD OTHER_USER

USER has limits of 3 messages and 8 KiB (`meshmail quota set`, before
the node started); OTHER_USER has none.
"""
import imaplib
import re
import smtplib
import socket
import sys
import unittest

SMTP, LMTP, IMAP, USER, PASSWORD, OTHER = sys.argv[1:7]
del sys.argv[1:7]


def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


def message(subject, size=0):
    return (f"From: a@remote.example\r\nTo: {USER}\r\nSubject: {subject}\r\n\r\n"
            + ("x" * 98 + "\r\n") * (size // 100) + "body\r\n").encode()


def quota(c):
    typ, data = c.getquotaroot("INBOX")
    assert typ == "OK", data
    text = b" ".join(x if isinstance(x, bytes) else b" ".join(x) for x in data[1]).decode()
    m = re.search(r"STORAGE (\d+) (\d+) MESSAGE (\d+) (\d+)", text)
    assert m, text
    return tuple(int(x) for x in m.groups())


class Lmtp:
    """Raw LMTP: one reply per accepted RCPT after the data (RFC 2033)."""

    def __init__(self):
        self.s = socket.create_connection(hp(LMTP), timeout=20)
        self.f = self.s.makefile("rb")
        self.reply()
        self.cmd("LHLO test")

    def reply(self):
        lines = []
        while True:
            ln = self.f.readline().decode().rstrip("\r\n")
            lines.append(ln)
            if len(ln) < 4 or ln[3] != "-":
                return lines[-1]

    def cmd(self, line):
        self.s.sendall(line.encode() + b"\r\n")
        return self.reply()


class Quota(unittest.TestCase):
    def test_quota_enforced_everywhere(self):
        c = imaplib.IMAP4(*hp(IMAP))
        c.login(USER, PASSWORD)
        for cap in ("QUOTA", "QUOTA=RES-STORAGE", "QUOTA=RES-MESSAGE"):
            self.assertIn(cap, c.capabilities)
        self.assertEqual(quota(c), (0, 8, 0, 3))
        typ, data = c._simple_command("SETQUOTA", '""', "(STORAGE 100)")
        self.assertEqual(typ, "NO", "a user may not change a quota")

        # SMTP: a message that fits, then one that would exceed 8 KiB: 552
        # 5.2.2 at DATA.
        with smtplib.SMTP(*hp(SMTP)) as s:
            s.sendmail("a@remote.example", [USER], message("one"))
            with self.assertRaises(smtplib.SMTPDataError) as e:
                s.sendmail("a@remote.example", [USER], message("too big", 9000))
            self.assertEqual(e.exception.smtp_code, 552)
            self.assertIn(b"5.2.2", e.exception.smtp_error)
        self.assertEqual(quota(c)[2], 1)

        # LMTP: one reply per recipient after the data; the other user gets it.
        lm = Lmtp()
        self.assertTrue(lm.cmd("MAIL FROM:<a@remote.example>").startswith("250"))
        self.assertTrue(lm.cmd(f"RCPT TO:<{USER}>").startswith("250"))
        self.assertTrue(lm.cmd(f"RCPT TO:<{OTHER}>").startswith("250"))
        self.assertTrue(lm.cmd("DATA").startswith("354"))
        lm.s.sendall(message("lmtp big", 9000) + b".\r\n")
        first, second = lm.reply(), lm.reply()
        self.assertTrue(first.startswith("552 5.2.2"), first)
        self.assertTrue(second.startswith("250"), second)
        lm.cmd("QUIT")

        # APPEND fits twice (3 messages), then NO [OVERQUOTA].
        c.create("Keep")
        for i in range(2):
            typ, data = c.append("INBOX", None, None, message(f"append {i}"))
            self.assertEqual(typ, "OK", data)
        self.assertEqual(quota(c)[2:], (3, 3))
        typ, data = c.append("INBOX", None, None, message("one too many"))
        self.assertEqual(typ, "NO")
        self.assertIn(b"[OVERQUOTA]", data[0])

        # SMTP and LMTP refuse at RCPT now that the account is full.
        with smtplib.SMTP(*hp(SMTP)) as s:
            with self.assertRaises(smtplib.SMTPRecipientsRefused) as e:
                s.sendmail("a@remote.example", [USER], message("full"))
            code, text = e.exception.recipients[USER]
            self.assertEqual(code, 552)
            self.assertIn(b"5.2.2", text)
        lm = Lmtp()
        lm.cmd("MAIL FROM:<a@remote.example>")
        self.assertTrue(lm.cmd(f"RCPT TO:<{USER}>").startswith("552 5.2.2"))
        lm.cmd("QUIT")

        # COPY needs room, MOVE does not.
        c.select("INBOX")
        typ, data = c.copy("1", "Keep")
        self.assertEqual(typ, "NO")
        self.assertIn(b"[OVERQUOTA]", data[0])
        typ, data = c._simple_command("MOVE", "1", "Keep")
        self.assertEqual(typ, "OK", data)
        self.assertEqual(quota(c)[2], 3, "MOVE keeps the usage")

        # An EXPUNGE frees room: delivery works again.
        c.store("1", "+FLAGS", "\\Deleted")
        c.expunge()
        self.assertEqual(quota(c)[2], 2)
        with smtplib.SMTP(*hp(SMTP)) as s:
            s.sendmail("a@remote.example", [USER], message("after expunge"))
        self.assertEqual(quota(c)[2], 3)
        c.logout()
        print("quota: enforced at SMTP RCPT/DATA, LMTP, APPEND, COPY")


if __name__ == "__main__":
    unittest.main(verbosity=2)
