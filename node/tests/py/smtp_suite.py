#!/usr/bin/env python3
"""SMTP/LMTP/submission conformance over real sockets, with Python's smtplib.

Run by node/tests/smtp.rs against a node it started on port 0:
    smtp_suite.py SMTP_ADDR SUBMISSION_ADDR LMTP_ADDR USER PASSWORD
Each check is a unittest test; the process exits non-zero if any fails.
"""
import smtplib
import socket
import ssl
import sys
import time
import unittest
import uuid

SMTP, SUBMISSION, LMTP, USER, PASSWORD = sys.argv[1:6]
del sys.argv[1:6]


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def message(subject, body="hello\r\n", extra=""):
    return (
        f"From: {USER}\r\nTo: {USER}\r\nSubject: {subject}\r\n"
        f"Message-ID: <{uuid.uuid4()}@test>\r\n{extra}\r\n{body}"
    )


class Raw:
    """A raw line-based client, for what smtplib will not do."""

    def __init__(self, addr, timeout=10):
        self.sock = socket.create_connection(hostport(addr), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def reply(self):
        """One (possibly multi-line) reply: (code, [lines])."""
        lines = []
        while True:
            while b"\r\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise EOFError("closed")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\r\n", 1)
            lines.append(line.decode())
            if len(line) < 4 or line[3:4] != b"-":
                return int(line[:3]), lines

    def close(self):
        self.sock.close()


class Mx(unittest.TestCase):
    def test_ehlo_capabilities(self):
        with smtplib.SMTP(*hostport(SMTP)) as s:
            code, _ = s.ehlo("client.example")
            self.assertEqual(code, 250)
            for ext in ["pipelining", "8bitmime", "size", "enhancedstatuscodes", "smtputf8", "chunking", "starttls"]:
                self.assertTrue(s.has_extn(ext), ext)
            self.assertFalse(s.has_extn("auth"), "no AUTH on the MX listener")
            self.assertEqual(int(s.esmtp_features["size"]), 200000, "the test node runs with max_message_bytes = 200000")

    def test_delivery_gets_250_with_an_acceptance_id(self):
        with smtplib.SMTP(*hostport(SMTP)) as s:
            s.ehlo("client.example")
            s.mail("sender@remote.example")
            code, _ = s.rcpt(USER)
            self.assertEqual(code, 250)
            code, resp = s.data(message("plain delivery"))
            self.assertEqual(code, 250, resp)
            self.assertIn(b"2.0.0", resp)

    def test_unknown_user_and_relay_are_refused(self):
        with smtplib.SMTP(*hostport(SMTP)) as s:
            s.ehlo("client.example")
            s.mail("sender@remote.example")
            code, resp = s.rcpt("nobody@" + USER.split("@")[1])
            self.assertEqual(code, 550)
            self.assertIn(b"5.1.1", resp)
            code, resp = s.rcpt("someone@elsewhere.example")
            self.assertEqual(code, 550)
            self.assertIn(b"5.7.1", resp)

    def test_oversize_by_declared_size_and_by_content(self):
        with smtplib.SMTP(*hostport(SMTP)) as s:
            s.ehlo("client.example")
            code, resp = s.docmd("MAIL FROM:<a@remote.example> SIZE=999999999999")
            self.assertEqual(code, 552)
        # The node under test runs with --max-message-bytes 200000.
        with smtplib.SMTP(*hostport(SMTP)) as s:
            s.ehlo("client.example")
            s.mail("a@remote.example")
            s.rcpt(USER)
            big = message("big", body=("x" * 998 + "\r\n") * 300)
            code, resp = s.data(big)
            self.assertEqual(code, 552, resp)
            # The session is still usable after a refused message.
            self.assertEqual(s.noop()[0], 250)

    def test_pipelining(self):
        r = Raw(SMTP)
        self.assertEqual(r.reply()[0], 220)
        r.send("EHLO pipe.example\r\n")
        self.assertEqual(r.reply()[0], 250)
        # Everything up to DATA in one write (RFC 2920).
        r.send(f"MAIL FROM:<p@remote.example>\r\nRCPT TO:<{USER}>\r\nRCPT TO:<nobody@nowhere.example>\r\nDATA\r\n")
        self.assertEqual(r.reply()[0], 250)
        self.assertEqual(r.reply()[0], 250)
        self.assertEqual(r.reply()[0], 550)
        self.assertEqual(r.reply()[0], 354)
        r.send(message("pipelined") + ".\r\nQUIT\r\n")
        self.assertEqual(r.reply()[0], 250)
        self.assertEqual(r.reply()[0], 221)
        r.close()

    def test_bdat_chunking(self):
        r = Raw(SMTP)
        r.reply()
        r.send("EHLO bdat.example\r\n")
        r.reply()
        r.send(f"MAIL FROM:<b@remote.example>\r\nRCPT TO:<{USER}>\r\n")
        self.assertEqual(r.reply()[0], 250)
        self.assertEqual(r.reply()[0], 250)
        body = message("bdat").encode()
        first, second = body[:20], body[20:]
        r.send(b"BDAT %d\r\n" % len(first) + first)
        self.assertEqual(r.reply()[0], 250)
        r.send(b"BDAT %d LAST\r\n" % len(second) + second)
        code, lines = r.reply()
        self.assertEqual(code, 250, lines)
        r.send("QUIT\r\n")
        r.close()

    def test_bad_commands_get_errors_and_session_continues(self):
        r = Raw(SMTP)
        r.reply()
        r.send("FROBNICATE\r\n")
        self.assertEqual(r.reply()[0], 500)
        r.send("RCPT TO:<x@y>\r\n")
        self.assertEqual(r.reply()[0], 503)
        r.send("MAIL FROM:<a@b.example>\r\n")
        self.assertEqual(r.reply()[0], 503, "EHLO first")
        r.send("EHLO x.example\r\n")
        self.assertEqual(r.reply()[0], 250)
        r.send("MAIL FROM:<unterminated\r\n")
        self.assertIn(r.reply()[0], (501, 553))
        r.send("A" * 5000 + "\r\n")
        self.assertEqual(r.reply()[0], 500)
        r.send(b"NOOP \xff\xfe\r\n")
        self.assertIn(r.reply()[0], (250, 500, 501))
        r.send("VRFY postmaster\r\n")
        self.assertEqual(r.reply()[0], 252)
        r.send("QUIT\r\n")
        self.assertEqual(r.reply()[0], 221)
        r.close()

    def test_disconnect_mid_data_stores_nothing_and_server_lives(self):
        r = Raw(SMTP)
        r.reply()
        r.send("EHLO x.example\r\n")
        r.reply()
        r.send(f"MAIL FROM:<a@remote.example>\r\nRCPT TO:<{USER}>\r\nDATA\r\n")
        for _ in range(3):
            r.reply()
        r.send("Subject: half\r\n\r\nthis message never ends")
        r.close()
        with smtplib.SMTP(*hostport(SMTP)) as s:
            self.assertEqual(s.noop()[0], 250)

    def test_stalled_client_gets_421_and_is_dropped(self):
        # The node under test runs with an idle timeout of 2 s.
        r = Raw(SMTP, timeout=30)
        self.assertEqual(r.reply()[0], 220)
        started = time.time()
        code, lines = r.reply()
        self.assertEqual(code, 421, lines)
        self.assertLess(time.time() - started, 20)
        with self.assertRaises(EOFError):
            r.reply()
        r.close()

    def test_starttls_on_mx(self):
        with smtplib.SMTP(*hostport(SMTP)) as s:
            s.ehlo("client.example")
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            code, _ = s.starttls(context=ctx)
            self.assertEqual(code, 220)
            s.ehlo("client.example")
            self.assertFalse(s.has_extn("starttls"))
            s.mail("tls@remote.example")
            s.rcpt(USER)
            self.assertEqual(s.data(message("over tls"))[0], 250)


class Submission(unittest.TestCase):
    def ctx(self):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def test_auth_only_after_starttls(self):
        with smtplib.SMTP(*hostport(SUBMISSION)) as s:
            s.ehlo("client.example")
            self.assertFalse(s.has_extn("auth"), "AUTH is not offered in plaintext")
            code, resp = s.docmd("AUTH PLAIN AGFsaWNlAHNlY3JldA==")
            self.assertEqual(code, 538)
            code, resp = s.docmd("MAIL FROM:<" + USER + ">")
            self.assertEqual(code, 530)

    def test_starttls_auth_and_submit(self):
        with smtplib.SMTP(*hostport(SUBMISSION)) as s:
            s.ehlo("client.example")
            s.starttls(context=self.ctx())
            s.ehlo("client.example")
            self.assertTrue(s.has_extn("auth"))
            with self.assertRaises(smtplib.SMTPAuthenticationError):
                s.login(USER, "wrong password")
            s.login(USER, PASSWORD)
            refused = s.sendmail(USER, [USER, "friend@remote.example"], message("submitted"))
            self.assertEqual(refused, {})

    def test_auth_login_mechanism(self):
        with smtplib.SMTP(*hostport(SUBMISSION)) as s:
            s.ehlo("client.example")
            s.starttls(context=self.ctx())
            s.ehlo("client.example")
            s.user, s.password = USER, PASSWORD
            code, _ = s.auth("LOGIN", s.auth_login)
            self.assertEqual(code, 235)

    def test_sender_must_be_owned(self):
        with smtplib.SMTP(*hostport(SUBMISSION)) as s:
            s.ehlo("client.example")
            s.starttls(context=self.ctx())
            s.ehlo("client.example")
            s.login(USER, PASSWORD)
            code, resp = s.mail("someone-else@" + USER.split("@")[1])
            self.assertEqual(code, 553)


class Lmtp(unittest.TestCase):
    def test_per_recipient_replies(self):
        with smtplib.LMTP(*hostport(LMTP)) as s:
            s.ehlo("mta.example")  # smtplib.LMTP sends LHLO
            s.mail("a@remote.example")
            s.rcpt(USER)
            code, _ = s.rcpt("nobody@" + USER.split("@")[1])
            self.assertEqual(code, 550)
            s.rcpt(USER)
            # Two accepted recipients: two replies after the data.
            s.putcmd("data")
            self.assertEqual(s.getreply()[0], 354)
            s.send(message("lmtp").encode() + b".\r\n")
            self.assertEqual(s.getreply()[0], 250)
            self.assertEqual(s.getreply()[0], 250)


if __name__ == "__main__":
    unittest.main(verbosity=2)
