#!/usr/bin/env python3
"""Inbound authentication and address routing over real sockets.

Run by node/tests/inbound.rs against a node whose `[dns] resolver` is a
testdns.py server reading ZONE.json:
    inbound_suite.py ZONE.json MX_ADDR IMAP_ADDR SUBMISSION_ADDR PASSWORD
Accounts alice@example.org and bob@example.org (password PASSWORD) exist;
the Rust side created the aliases the tests below rely on:
    sales@example.org -> alice@example.org,bob@example.org
    team@example.org  -> sales@example.org          (an alias of an alias)
    @catch.example.org -> bob@example.org            (catch-all)
    fwd@example.org   -> friend@remote.test          (forwarding)
    loop1@example.org -> loop2@example.org -> loop1@example.org
    alice.smith@example.org -> alice@example.org     (a sender alias)

Sender domains in the test DNS (written here, before any mail is sent):
    good.test: SPF ip4:127.0.0.1 -all, a DKIM key (selector s1), DMARC p=reject
    soft.test: SPF ip4:127.0.0.1 -all, a DKIM key, DMARC p=none
    strict.test: SPF -all (127.0.0.1 NOT allowed), DMARC p=reject
Signatures are made by dkimpy, an independent implementation; the keys are
fresh RSA keys from openssl.
"""
import base64
import email
import imaplib
import json
import smtplib
import subprocess
import sys
import unittest
import uuid

import dkim

ZONE, MX, IMAP, SUBMISSION, PASSWORD = sys.argv[1:6]
del sys.argv[1:6]


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def rsa_key():
    """(private PEM bytes, public key base64 for p=)."""
    pem = subprocess.run(["openssl", "genrsa", "2048"], capture_output=True, check=True).stdout
    der = subprocess.run(
        ["openssl", "rsa", "-pubout", "-outform", "DER"], input=pem, capture_output=True, check=True
    ).stdout
    return pem, base64.b64encode(der).decode()


GOOD_KEY, GOOD_PUB = rsa_key()
SOFT_KEY, SOFT_PUB = rsa_key()
OTHER_KEY, _ = rsa_key()  # signs forgeries: DNS publishes a different key
ARC_KEY, ARC_PUB = rsa_key()  # the forwarding intermediary's ARC key

with open(ZONE, "w") as f:
    json.dump(
        {
            "records": [
                ["good.test.", "TXT", "v=spf1 ip4:127.0.0.1 -all"],
                ["s1._domainkey.good.test.", "TXT", f"v=DKIM1; k=rsa; p={GOOD_PUB}"],
                ["_dmarc.good.test.", "TXT", "v=DMARC1; p=reject; adkim=r; aspf=r"],
                ["soft.test.", "TXT", "v=spf1 ip4:127.0.0.1 -all"],
                ["s1._domainkey.soft.test.", "TXT", f"v=DKIM1; k=rsa; p={SOFT_PUB}"],
                ["_dmarc.soft.test.", "TXT", "v=DMARC1; p=none"],
                ["strict.test.", "TXT", "v=spf1 ip4:192.0.2.1 -all"],
                ["_dmarc.strict.test.", "TXT", "v=DMARC1; p=reject"],
                ["s1._domainkey.arc.test.", "TXT", f"v=DKIM1; k=rsa; p={ARC_PUB}"],
            ]
        },
        f,
    )


def message(frm, to, subject, body="hello\r\n"):
    return (
        f"From: {frm}\r\nTo: {to}\r\nSubject: {subject}\r\n"
        f"Date: Tue, 01 Dec 2026 08:00:00 +0000\r\n"
        f"Message-ID: <{uuid.uuid4()}@test>\r\n\r\n{body}"
    ).encode()


def signed(raw, domain, key, selector=b"s1"):
    sig = dkim.sign(
        raw,
        selector,
        domain.encode(),
        key,
        include_headers=[b"from", b"to", b"subject", b"date", b"message-id"],
    )
    return sig + raw


def send(mail_from, rcpts, raw):
    """Sends over the MX listener; returns smtplib's refusal or None."""
    with smtplib.SMTP(*hostport(MX), local_hostname="client.good.test", timeout=30) as s:
        s.ehlo()
        return s.sendmail(mail_from, rcpts, raw)


def fetch_by_subject(user, subject, mailbox="INBOX"):
    """The raw messages in USER's MAILBOX with SUBJECT."""
    c = imaplib.IMAP4(*hostport(IMAP))
    c.login(user, PASSWORD)
    typ, _ = c.select(f'"{mailbox}"')
    assert typ == "OK", mailbox
    typ, data = c.uid("SEARCH", None, "SUBJECT", f'"{subject}"')
    out = []
    for uid in data[0].split():
        typ, msg = c.uid("FETCH", uid, "(BODY.PEEK[])")
        out.append(msg[0][1])
    c.logout()
    return out


def auth_results(raw):
    m = email.message_from_bytes(raw)
    return " ".join(m.get_all("Authentication-Results") or []).replace("\r\n", " ")


class Authentication(unittest.TestCase):
    def test_signed_aligned_message_passes(self):
        subj = f"good {uuid.uuid4()}"
        raw = signed(message("Alice <alice@good.test>", "alice@example.org", subj), "good.test", GOOD_KEY)
        self.assertEqual(send("alice@good.test", ["alice@example.org"], raw), {})
        [got] = fetch_by_subject("alice@example.org", subj)
        ar = auth_results(got)
        self.assertIn("dkim=pass", ar)
        self.assertIn("spf=pass", ar)
        self.assertIn("dmarc=pass", ar)
        self.assertIn("header.i=@good.test", ar)
        # The signature still verifies for an independent verifier after
        # storage (the stored copy kept the signed bytes intact).
        body_start = got.index(b"DKIM-Signature:")
        self.assertTrue(
            dkim.verify(got[body_start:], dnsfunc=lambda name, timeout=5: dns_txt(name)),
            "dkimpy verifies the stored message",
        )

    def test_forged_signature_fails_without_reject_policy(self):
        subj = f"soft forged {uuid.uuid4()}"
        raw = signed(message("x@soft.test", "alice@example.org", subj), "soft.test", OTHER_KEY)
        self.assertEqual(send("x@soft.test", ["alice@example.org"], raw), {})
        [got] = fetch_by_subject("alice@example.org", subj)
        ar = auth_results(got)
        self.assertIn("dkim=fail", ar)
        # SPF still aligns, so DMARC passes on SPF; the header says both.
        self.assertIn("spf=pass", ar)

    def test_forged_from_with_reject_policy_gets_550_at_data(self):
        subj = f"forged {uuid.uuid4()}"
        raw = signed(message("ceo@good.test", "alice@example.org", subj), "good.test", OTHER_KEY)
        with self.assertRaises(smtplib.SMTPDataError) as cm:
            # Envelope from a domain that does not align with good.test.
            send("bounce@strict.test", ["alice@example.org"], raw)
        self.assertEqual(cm.exception.smtp_code, 550)
        self.assertIn(b"DMARC", cm.exception.smtp_error)
        self.assertEqual(fetch_by_subject("alice@example.org", subj), [], "nothing stored")

    def test_spf_fail_with_reject_policy_gets_550(self):
        subj = f"strict {uuid.uuid4()}"
        raw = message("someone@strict.test", "bob@example.org", subj)
        with self.assertRaises(smtplib.SMTPDataError) as cm:
            send("someone@strict.test", ["bob@example.org"], raw)
        self.assertEqual(cm.exception.smtp_code, 550)

    def test_unsigned_message_from_unknown_domain_is_delivered_with_none(self):
        subj = f"plain {uuid.uuid4()}"
        raw = message("x@nowhere.test", "bob@example.org", subj)
        self.assertEqual(send("x@nowhere.test", ["bob@example.org"], raw), {})
        [got] = fetch_by_subject("bob@example.org", subj)
        ar = auth_results(got)
        self.assertIn("dkim=none", ar)
        self.assertIn("dmarc=none", ar)


    def test_arc_sealed_by_an_intermediary_passes(self):
        subj = f"arc {uuid.uuid4()}"
        raw = signed(message("Alice <alice@good.test>", "list@arc.test", subj), "good.test", GOOD_KEY)
        # The intermediary (a list at arc.test) recorded what it saw, then
        # sealed the message (dkimpy's ARC implementation).
        raw = b"Authentication-Results: arc.test; dkim=pass header.d=good.test; spf=pass\r\n" + raw
        seal = dkim.arc_sign(raw, b"s1", b"arc.test", ARC_KEY, b"arc.test")
        raw = b"".join(seal) + raw
        self.assertEqual(send("list-bounces@arc.test", ["alice@example.org"], raw), {})
        [got] = fetch_by_subject("alice@example.org", subj)
        self.assertIn("arc=pass", auth_results(got))

    def test_broken_arc_chain_fails(self):
        subj = f"arc broken {uuid.uuid4()}"
        raw = message("x@soft.test", "alice@example.org", subj)
        raw = b"Authentication-Results: arc.test; spf=pass\r\n" + raw
        seal = dkim.arc_sign(raw, b"s1", b"arc.test", OTHER_KEY, b"arc.test")
        self.assertEqual(send("x@soft.test", ["alice@example.org"], b"".join(seal) + raw), {})
        [got] = fetch_by_subject("alice@example.org", subj)
        self.assertIn("arc=fail", auth_results(got))


class Routing(unittest.TestCase):
    def test_alias_delivers_to_each_target_once(self):
        subj = f"alias {uuid.uuid4()}"
        # sales and team both reach alice and bob: one copy each.
        raw = message("x@nowhere.test", "sales@example.org", subj)
        self.assertEqual(send("x@nowhere.test", ["sales@example.org", "team@example.org"], raw), {})
        self.assertEqual(len(fetch_by_subject("alice@example.org", subj)), 1)
        self.assertEqual(len(fetch_by_subject("bob@example.org", subj)), 1)

    def test_subaddress_delivers_to_the_base_account(self):
        subj = f"plus {uuid.uuid4()}"
        raw = message("x@nowhere.test", "alice+lists@example.org", subj)
        self.assertEqual(send("x@nowhere.test", ["alice+lists@example.org"], raw), {})
        [got] = fetch_by_subject("alice@example.org", subj)
        self.assertIn(b"alice+lists@example.org", got, "the To header is kept")

    def test_catch_all(self):
        subj = f"catch {uuid.uuid4()}"
        raw = message("x@nowhere.test", "whatever@catch.example.org", subj)
        self.assertEqual(send("x@nowhere.test", ["anything-at-all@catch.example.org"], raw), {})
        self.assertEqual(len(fetch_by_subject("bob@example.org", subj)), 1)

    def test_unknown_address_gets_550_at_rcpt(self):
        with smtplib.SMTP(*hostport(MX), timeout=30) as s:
            s.ehlo("client.test")
            s.mail("x@nowhere.test")
            code, text = s.rcpt("nobody@example.org")
            self.assertEqual(code, 550, text)
            code, text = s.rcpt("nobody+tag@example.org")
            self.assertEqual(code, 550, text)
            code, text = s.rcpt("alice@example.org")
            self.assertEqual(code, 250, text)

    def test_alias_loop_is_refused_at_rcpt(self):
        with smtplib.SMTP(*hostport(MX), timeout=30) as s:
            s.ehlo("client.test")
            s.mail("x@nowhere.test")
            code, text = s.rcpt("loop1@example.org")
            self.assertEqual(code, 550, text)

    def test_forwarding_alias_queues_for_the_remote_target(self):
        subj = f"fwd {uuid.uuid4()}"
        raw = message("x@nowhere.test", "fwd@example.org", subj)
        self.assertEqual(send("x@nowhere.test", ["fwd@example.org"], raw), {})
        # The Rust side checks `meshmail queue list` for friend@remote.test.

    def test_relay_is_denied_on_the_mx(self):
        with smtplib.SMTP(*hostport(MX), timeout=30) as s:
            s.ehlo("client.test")
            s.mail("x@nowhere.test")
            code, text = s.rcpt("someone@remote.test")
            self.assertEqual(code, 550, text)


class SenderAddresses(unittest.TestCase):
    """Submission: a user sends as their own addresses only."""

    def try_sender(self, sender):
        with smtplib.SMTP(*hostport(SUBMISSION), timeout=30) as s:
            s.ehlo("client.test")
            s.login("alice@example.org", PASSWORD)
            code, text = s.mail(sender)
            return code

    def test_own_alias_and_subaddress_are_allowed(self):
        self.assertEqual(self.try_sender("alice@example.org"), 250)
        self.assertEqual(self.try_sender("alice.smith@example.org"), 250)
        self.assertEqual(self.try_sender("alice+news@example.org"), 250)

    def test_shared_alias_catch_all_and_others_are_refused(self):
        self.assertEqual(self.try_sender("sales@example.org"), 553, "two targets")
        self.assertEqual(self.try_sender("bob@example.org"), 553)
        self.assertEqual(self.try_sender("x@catch.example.org"), 553, "catch-all")


def dns_txt(name):
    """dkimpy's DNS hook: the same zone the server uses."""
    want = name.decode().rstrip(".").lower()
    with open(ZONE) as f:
        for n, t, v in json.load(f)["records"]:
            if t == "TXT" and n.rstrip(".").lower() == want:
                return v.encode()
    return None


if __name__ == "__main__":
    unittest.main(verbosity=2)
