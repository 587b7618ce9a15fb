#!/usr/bin/env python3
"""A real client round trip: mbsync (isync) against meshmail.

    mbsync_roundtrip.py SMTP_ADDR IMAP_ADDR USER PASSWORD WORKDIR COUNT

1. Delivers COUNT varied messages over SMTP (multipart, attachments,
   non-ASCII headers, nested messages, HTML alternatives, odd sizes).
2. mbsync pulls INBOX into a local Maildir.
3. Every Maildir file equals the stored message (fetched over IMAP) byte for
   byte (mbsync stores LF line ends, so CRLF is normalised), and ends with
   exactly the bytes that were sent (the server prepends a Received header).
   The only local difference allowed is mbsync's own X-TUID tracking header.
4. A flag set locally and a message deleted locally sync back; imaplib sees
   the flag and no longer sees the deleted message.
"""
import email.utils
import imaplib
import os
import random
import re
import smtplib
import subprocess
import sys
from email.message import EmailMessage
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.header import Header

SMTP, IMAP, USER, PASSWORD, WORK, COUNT = sys.argv[1:7]
COUNT = int(COUNT)
rng = random.Random(20261130)


def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


def varied(i):
    kind = i % 6
    subject_words = ["Grüße", "naïve café", "日本語のテスト", "plain", "Ünïcödé ✓", "résumé"]
    if kind == 0:
        m = EmailMessage()
        m.set_content(f"Plain message {i}\n" + "line of text\n" * rng.randint(1, 200))
    elif kind == 1:
        m = MIMEMultipart("mixed")
        m.attach(MIMEText(f"Body {i} with attachment\n", "plain", "utf-8"))
        blob = bytes(rng.getrandbits(8) for _ in range(rng.randint(10, 40000)))
        att = MIMEApplication(blob, Name=f"data-{i}.bin")
        att["Content-Disposition"] = f'attachment; filename="data-{i}.bin"'
        m.attach(att)
    elif kind == 2:
        m = MIMEMultipart("alternative")
        m.attach(MIMEText(f"text version {i} – ünïcode\n", "plain", "utf-8"))
        m.attach(MIMEText(f"<p>html version {i} – <b>ünïcode</b></p>\n", "html", "utf-8"))
    elif kind == 3:
        inner = EmailMessage()
        inner["Subject"] = f"inner {i}"
        inner["From"] = "inner@example.net"
        inner.set_content("forwarded content\n")
        m = EmailMessage()
        m.set_content(f"see attached message {i}\n")
        m.add_attachment(inner)
    elif kind == 4:
        m = EmailMessage()
        m.set_content(("Quoted-printable é line " * 30 + "\n") * rng.randint(1, 20), cte="quoted-printable")
    else:
        m = MIMEText(f"latin-1 body {i} café\n", "plain", "iso-8859-1")
    if "Subject" in m:
        del m["Subject"]
    m["Subject"] = Header(f"{subject_words[i % len(subject_words)]} #{i}", "utf-8").encode()
    m["From"] = Header("Jöhn Dœ", "utf-8").encode() + " <john@remote.example>"
    m["To"] = USER
    m["Message-ID"] = f"<roundtrip-{i}@test>"
    m["Date"] = email.utils.formatdate(1700000000 + i * 3600)
    m["X-Roundtrip-Id"] = str(i)
    return m.as_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def deliver():
    sent = {}
    with smtplib.SMTP(*hp(SMTP)) as s:
        for i in range(COUNT):
            raw = varied(i)
            s.sendmail("john@remote.example", [USER], raw)
            sent[str(i)] = raw
    return sent


def imap():
    c = imaplib.IMAP4(*hp(IMAP))
    c.login(USER, PASSWORD)
    return c


def stored_by_id(c):
    c.select("INBOX", readonly=True)
    typ, data = c.uid("FETCH", "1:*", "(UID FLAGS BODY.PEEK[])")
    assert typ == "OK", data
    out = {}
    for part in data:
        if not isinstance(part, tuple):
            continue
        meta, body = part
        rid = None
        for line in body.split(b"\r\n"):
            if line.startswith(b"X-Roundtrip-Id: "):
                rid = line.split(b": ", 1)[1].decode()
                break
        out[rid] = (meta, body)
    return out


def mbsync(config):
    r = subprocess.run(["mbsync", "-c", config, "-a"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        raise SystemExit("mbsync failed")


def main():
    sent = deliver()
    maildir = os.path.join(WORK, "mail")
    os.makedirs(maildir, exist_ok=True)
    host, port = hp(IMAP)
    config = os.path.join(WORK, "mbsyncrc")
    with open(config, "w") as f:
        f.write(f"""IMAPAccount meshmail
Host {host}
Port {port}
User {USER}
Pass "{PASSWORD}"
SSLType None
AuthMechs LOGIN

IMAPStore remote
Account meshmail

MaildirStore local
Path {maildir}/
Inbox {maildir}/INBOX

Channel roundtrip
Far :remote:
Near :local:
Patterns INBOX
Create Near
Sync All
Expunge Both
SyncState *
""")
    mbsync(config)
    c = imap()
    stored = stored_by_id(c)
    assert len(stored) == COUNT, f"{len(stored)} stored, {COUNT} sent"
    files = {}
    for sub in ("cur", "new"):
        d = os.path.join(maildir, "INBOX", sub)
        for name in os.listdir(d):
            with open(os.path.join(d, name), "rb") as fh:
                data = fh.read()
            rid = None
            for line in data.split(b"\n"):
                if line.startswith(b"X-Roundtrip-Id: "):
                    rid = line.split(b": ", 1)[1].decode()
                    break
            files[rid] = (os.path.join(d, name), data)
    assert len(files) == COUNT, f"mbsync pulled {len(files)} of {COUNT}"
    for rid, raw in sent.items():
        body = stored[rid][1]
        assert body.endswith(raw), f"message {rid}: stored bytes do not end with what was sent"
        # mbsync inserts its own tracking header (X-TUID) into the local copy.
        local = re.sub(rb"(?m)^X-TUID: [^\n]*\n", b"", files[rid][1], count=1)
        want = body.replace(b"\r\n", b"\n")
        if local != want:
            i = next((k for k in range(min(len(local), len(want))) if local[k] != want[k]), min(len(local), len(want)))
            raise AssertionError(f"message {rid}: Maildir bytes differ from the stored message at byte {i}: "
                                 f"local {local[max(0, i - 40):i + 40]!r} vs stored {want[max(0, i - 40):i + 40]!r} "
                                 f"(lengths {len(local)} / {len(want)})")
    print(f"roundtrip: {COUNT} messages pulled by mbsync, bytes identical")

    # Local changes: flag one (F), delete another (T = trashed, expunged by mbsync).
    path, _ = files["7"]
    base, _, flags = os.path.basename(path).partition(":2,")
    os.rename(path, os.path.join(maildir, "INBOX", "cur", f"{base}:2,{''.join(sorted(set(flags + 'F')))}"))
    dpath, _ = files["8"]
    os.remove(dpath)
    mbsync(config)
    stored = stored_by_id(c)
    assert "8" not in stored, "the locally deleted message is gone on the server"
    assert b"\\Flagged" in stored["7"][0], f"the local flag synced back: {stored['7'][0]!r}"
    assert len(stored) == COUNT - 1
    c.logout()
    print("roundtrip: local flag and deletion synced back")


if __name__ == "__main__":
    main()
