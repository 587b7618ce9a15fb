#!/usr/bin/env python3
"""Independent checks of what meshmail's outbound delivery produced, for
node/tests/outbound.rs.

    outbound_check.py dkim FILE ZONE_LINE
        FILE (as the remote MX received it) carries a DKIM-Signature that
        dkimpy verifies against the TXT record in ZONE_LINE (the line
        `meshmail dkim generate` printed). Exit 0 when it verifies.

    outbound_check.py submit SUBMISSION_ADDR USER PASSWORD FROM RCPT[,RCPT] SUBJECT
        Submits one message with AUTH PLAIN over smtplib.

    outbound_check.py submit-many SUBMISSION_ADDR USER PASSWORD FROM RCPT[,RCPT] SUBJECT N
        Submits N messages (subjects "SUBJECT 0".."SUBJECT N-1") over one session.

    outbound_check.py submit-file SUBMISSION_ADDR USER PASSWORD FROM RCPT[,RCPT] FILE [MAIL_OPTION...]
        Submits FILE's bytes as they are (8-bit content included) with AUTH;
        MAIL_OPTIONs (e.g. REQUIRETLS, which also makes it STARTTLS first)
        go on MAIL FROM.

    outbound_check.py same-content RECEIVED ORIGINAL
        RECEIVED (as a 7-bit peer got it) is all ASCII, and Python's email
        parser decodes it to the same parts as ORIGINAL (content types and
        decoded text or bytes, part by part). Prints each part's
        Content-Transfer-Encoding as JSON.

    outbound_check.py dsn-delay IMAP_ADDR USER PASSWORD RECIPIENT
        Like dsn, for a delay warning: Action "delayed", and flufl.bounce
        counts RECIPIENT as a temporary failure.

    outbound_check.py dsn IMAP_ADDR USER PASSWORD STATUS RECIPIENT [TIMEOUT_S]
        Waits (up to TIMEOUT_S, default 60) for a delivery status
        notification in USER's INBOX, then checks with Python's email
        parser that its message/delivery-status part names RECIPIENT with
        STATUS, and with flufl.bounce that it is recognised as a permanent
        failure for RECIPIENT. Prints what it found as JSON.
"""
import email
import email.policy
import imaplib
import json
import re
import sys
import time

import dkim
from flufl.bounce import all_failures


def check_dkim(path, zone_line):
    raw = open(path, "rb").read()
    name = zone_line.split()[0].rstrip(".")
    txt = "".join(re.findall(r'"([^"]*)"', zone_line)).encode()

    def dnsfunc(qname, timeout=5):
        q = qname.decode() if isinstance(qname, bytes) else qname
        return txt if q.rstrip(".") == name else b""

    ok = dkim.verify(raw, dnsfunc=dnsfunc)
    print(json.dumps({"dkim": bool(ok), "record": name}))
    return 0 if ok else 1


def delivery_status(msg):
    """(final recipient, status, action) of each recipient block."""
    out = []
    for part in msg.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        # Python's email parses the blocks into sub-messages.
        payload = part.get_payload()
        blocks = payload if isinstance(payload, list) else []
        for block in blocks[1:]:
            rcpt = (block.get("Final-Recipient") or "").split(";", 1)[-1].strip()
            out.append({"recipient": rcpt, "status": block.get("Status"), "action": block.get("Action"),
                        "diagnostic": block.get("Diagnostic-Code")})
    return out


def check_dsn(addr, user, password, status, recipient, timeout_s=60.0, delayed=False):
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    seen = []
    while True:
        imap = imaplib.IMAP4(host, int(port))
        imap.login(user, password)
        imap.select("INBOX", readonly=True)
        _, data = imap.uid("SEARCH", None, "ALL")
        reports = []
        for uid in data[0].split():
            _, fetched = imap.uid("FETCH", uid, "(BODY.PEEK[])")
            msg = email.message_from_bytes(fetched[0][1], policy=email.policy.compat32)
            if msg.get_content_type() == "multipart/report":
                reports.append(msg)
        imap.logout()
        seen = []
        for msg in reports:
            blocks = delivery_status(msg)
            temporary, permanent = all_failures(msg)
            permanent = sorted(a.decode() if isinstance(a, bytes) else a for a in permanent)
            temporary = sorted(a.decode() if isinstance(a, bytes) else a for a in temporary)
            result = {"dsn": msg.get("Subject"), "from": msg.get("From"), "blocks": blocks,
                      "flufl_permanent": permanent, "flufl_temporary": temporary}
            seen.append(result)
            want_action = "delayed" if delayed else "failed"
            flufl_set = temporary if delayed else permanent
            if any(b["recipient"] == recipient and b["action"] == want_action
                   and (status is None or b["status"] == status) for b in blocks) \
                    and recipient in flufl_set:
                print(json.dumps(result))
                return 0
        if time.monotonic() >= deadline:
            print(json.dumps({"matching_dsn": None, "seen": seen}))
            return 1
        time.sleep(0.5)


def message(sender, rcpts, subject):
    import uuid
    return (
        f"From: Alice <{sender}>\r\nTo: {rcpts}\r\nSubject: {subject}\r\n"
        f"Date: Tue, 01 Dec 2026 08:00:00 +0000\r\nMessage-ID: <{uuid.uuid4()}@local.test>\r\n"
        f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        f"Hello from meshmail.\r\n.leading dot stays\r\n"
    )


def submit(addr, user, password, sender, rcpts, subject, count=1):
    """Submits `count` messages (distinct bodies) with AUTH over one
    smtplib session and prints the refusals."""
    import smtplib
    host, port = addr.rsplit(":", 1)
    refused = {}
    with smtplib.SMTP(host, int(port)) as s:
        s.ehlo("client.local.test")
        s.login(user, password)
        for n in range(int(count)):
            subj = subject if int(count) == 1 else f"{subject} {n}"
            refused.update(s.sendmail(sender, rcpts.split(","), message(sender, rcpts, subj)))
    print(json.dumps({"refused": {k: v[0] for k, v in refused.items()}}))
    return 0 if not refused else 1


def submit_file(addr, user, password, sender, rcpts, path, *mail_options):
    import smtplib
    host, port = addr.rsplit(":", 1)
    with smtplib.SMTP(host, int(port)) as s:
        s.ehlo("client.local.test")
        if "REQUIRETLS" in mail_options:
            s.starttls()  # REQUIRETLS is only taken over TLS
            s.ehlo("client.local.test")
        s.login(user, password)
        refused = s.sendmail(sender, rcpts.split(","), open(path, "rb").read(), mail_options=list(mail_options))
    print(json.dumps({"refused": {k: v[0] for k, v in refused.items()}}))
    return 0 if not refused else 1


def leaves(raw):
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    out = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        content = part.get_content()
        if part.get("Content-Type") is None:
            # No MIME headers: the octets are the text (here: UTF-8), which
            # the us-ascii default would turn into replacement characters.
            content = part.get_payload(decode=True).decode("utf-8")
        out.append({"type": part.get_content_type(), "cte": part.get("Content-Transfer-Encoding"),
                    "content": content if isinstance(content, str) else content.hex()})
    return out


def same_content(received, original):
    got = open(received, "rb").read()
    want = open(original, "rb").read()
    eight_bit = [i for i, b in enumerate(got) if b >= 0x80]
    a, b = leaves(got), leaves(want)
    same = len(a) == len(b) and all(x["type"] == y["type"] and x["content"] == y["content"]
                                    for x, y in zip(a, b))
    print(json.dumps({"ascii": not eight_bit, "same": same, "received": a, "original": b}))
    return 0 if same and not eight_bit else 1


def main():
    cmd = sys.argv[1]
    if cmd == "submit":
        return submit(*sys.argv[2:8])
    if cmd == "submit-many":
        return submit(*sys.argv[2:9])
    if cmd == "submit-file":
        return submit_file(*sys.argv[2:])
    if cmd == "same-content":
        return same_content(sys.argv[2], sys.argv[3])
    if cmd == "dkim":
        return check_dkim(sys.argv[2], sys.argv[3])
    if cmd == "dsn-delay":
        addr, user, password, recipient = sys.argv[2:6]
        return check_dsn(addr, user, password, None, recipient, delayed=True)
    if cmd == "dsn":
        timeout = float(sys.argv[7]) if len(sys.argv) > 7 else 60.0
        return check_dsn(*sys.argv[2:7], timeout_s=timeout)
    print(f"unknown check {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
