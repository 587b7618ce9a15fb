"""ManageSieve (RFC 5804) against a running node, one scenario per run:

    managesieve_suite.py SCENARIO SMTP SIEVE IMAP USER PASSWORD

Most scenarios drive Python's `managesieve` library (a real client);
`raw` speaks the protocol over a socket to reach what the library never
sends (synchronizing literals, the AUTHENTICATE continuation, bad input).
Every check is an assert: a failing one exits non-zero with its message.
"""
import base64
import imaplib
import smtplib
import socket
import ssl
import sys

import managesieve

SCENARIO, SMTP, SIEVE, IMAP, USER, PASSWORD = sys.argv[1:7]

# The library has no methods for these RFC 5804 commands; its generic
# _command() needs them in its table of states.
for name in (b"CHECKSCRIPT", b"RENAMESCRIPT", b"NOOP"):
    managesieve.commands[name] = ("AUTH",)

GOOD = 'require ["fileinto", "mailbox"];\nif header :contains "subject" "sortme" {\n    fileinto :create "Sorted";\n}\n'
# Line 2, column 11: the ';' after fileinto's argument is missing.
BAD = 'require "fileinto";\nfileinto "x"\n'


def hp(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def client(tls=False):
    host, port = hp(SIEVE)
    return managesieve.MANAGESIEVE(host, port, use_tls=tls, tls_verify=False, timeout=60)


def login(tls=False):
    c = client(tls)
    assert c.login("", USER, PASSWORD) == "OK", c.response_text
    return c


def code(c):
    return (c.response_code or "").upper()


def listed(c):
    typ, scripts = c.listscripts()
    assert typ == "OK", (typ, c.response_text)
    return sorted(scripts)


def basics():
    c = client()
    assert c.implementation == "meshmail", c.implementation
    assert c.loginmechs == ["PLAIN"], c.loginmechs
    for ext in ("fileinto", "vacation", "imap4flags", "include"):
        assert ext in c.capabilities, c.capabilities
    assert c.login("", USER, PASSWORD) == "OK", c.response_text
    assert c.havespace("main", 1000) == "OK"
    assert c.havespace("main", 70 * 1024) == "NO" and code(c) == "QUOTA/MAXSIZE", c.response_code
    assert listed(c) == []
    assert c.putscript("main", GOOD) == "OK", c.response_text
    typ, text = c.getscript("main")
    assert typ == "OK" and text == GOOD, (typ, text)
    # A syntax error names its line and column; nothing is stored.
    assert c.putscript("bad", BAD) == "NO"
    assert c.response_text.startswith("line 3, column 1:") or c.response_text.startswith("line 2, column"), c.response_text
    assert listed(c) == [("main", False)]
    assert c._simple_command(b"CHECKSCRIPT", managesieve.sieve_string(GOOD)) == "OK"
    assert c._simple_command(b"CHECKSCRIPT", managesieve.sieve_string(BAD)) == "NO"
    assert c.response_text.startswith("line "), c.response_text
    assert c.setactive("main") == "OK"
    assert listed(c) == [("main", True)]
    assert c.setactive("missing") == "NO" and code(c) == "NONEXISTENT", c.response_code
    assert c.deletescript("main") == "NO" and code(c) == "ACTIVE", c.response_code
    assert c.putscript("other", "keep;\n") == "OK"
    rename = lambda a, b: c._simple_command(b"RENAMESCRIPT", managesieve.sieve_name(a), managesieve.sieve_name(b))
    assert rename("main", "other") == "NO" and code(c) == "ALREADYEXISTS", c.response_code
    assert rename("nope", "x") == "NO" and code(c) == "NONEXISTENT", c.response_code
    # Renaming the active script keeps it active (RFC 5804 §2.11.1).
    assert rename("main", "sorting") == "OK", c.response_text
    assert listed(c) == [("other", False), ("sorting", True)]
    assert c.getscript("main")[0] == "NO" and code(c) == "NONEXISTENT"
    assert c.setactive("") == "OK"
    assert listed(c) == [("other", False), ("sorting", False)]
    assert c.deletescript("other") == "OK"
    assert c.deletescript("other") == "NO" and code(c) == "NONEXISTENT"
    assert c._simple_command(b"NOOP") == "OK"
    typ, caps = c.capability()
    assert typ == "OK" and ["VERSION", "1.0"] in caps, caps
    assert c.logout() == "OK"


def deliver(subject):
    msg = (f"From: sender@example.net\r\nTo: {USER}\r\nSubject: {subject}\r\n"
           f"Message-ID: <{subject}@example.net>\r\n\r\nHello.\r\n")
    with smtplib.SMTP(*hp(SMTP), timeout=60) as s:
        s.sendmail("sender@example.net", [USER], msg.encode())


def count(mailbox):
    c = imaplib.IMAP4(*hp(IMAP))
    c.login(USER, PASSWORD)
    typ, data = c.select(f'"{mailbox}"')
    n = int(data[0]) if typ == "OK" else 0
    c.logout()
    return n


def delivery():
    """A script activated over ManageSieve filters the next SMTP delivery."""
    c = login()
    assert c.putscript("sorting", GOOD) == "OK", c.response_text
    deliver("before")
    assert (count("INBOX"), count("Sorted")) == (1, 0), "no script active yet"
    assert c.setactive("sorting") == "OK"
    deliver("sortme-1")
    assert (count("INBOX"), count("Sorted")) == (1, 1), (count("INBOX"), count("Sorted"))
    # A new text of the active script takes effect at the next delivery.
    assert c.putscript("sorting", GOOD.replace("sortme", "other")) == "OK"
    deliver("sortme-2")
    assert (count("INBOX"), count("Sorted")) == (2, 1)
    assert c.setactive("") == "OK"
    c.logout()


def starttls():
    c = client()
    assert c.supports_tls and c.loginmechs == [], (c.supports_tls, c.loginmechs)
    # PLAIN in the clear is refused with ENCRYPT-NEEDED (the library
    # refuses to try when SASL is empty, so the command goes by hand).
    ir = managesieve.sieve_string(base64.b64encode(f"\0{USER}\0{PASSWORD}".encode()).decode())
    assert c._simple_command(b"AUTHENTICATE", b'"PLAIN"', ir) == "NO"
    assert code(c) == "ENCRYPT-NEEDED", c.response_code
    c.logout()
    c = login(tls=True)
    assert c.state == "AUTH"
    assert listed(c) == []
    typ, caps = c.capability()
    assert ["STARTTLS", None] not in caps, caps
    c.logout()


class Raw:
    def __init__(self, tls=False):
        self.s = socket.create_connection(hp(SIEVE), timeout=60)
        self.f = self.s.makefile("rb")
        self.greeting = self.until_status()

    def send(self, data):
        self.s.sendall(data)

    def line(self):
        raw = self.f.readline()
        assert raw, "the server closed the connection"
        return raw.decode("utf-8", "replace").rstrip("\r\n")

    def until_status(self):
        lines = []
        while True:
            ln = self.line()
            lines.append(ln)
            if ln.split(" ", 1)[0] in ("OK", "NO", "BYE"):
                return lines

    def cmd(self, data):
        self.send(data)
        return self.until_status()

    def closed(self):
        return self.f.read() == b""


def b64plain(password=PASSWORD):
    return base64.b64encode(f"\0{USER}\0{password}".encode()).decode()


def raw():
    r = Raw()
    assert r.greeting[-1].startswith("OK"), r.greeting
    assert '"VERSION" "1.0"' in r.greeting and '"SASL" "PLAIN"' in r.greeting, r.greeting
    assert any(ln.startswith('"SIEVE" "') and "fileinto" in ln for ln in r.greeting), r.greeting
    assert r.cmd(b"LISTSCRIPTS\r\n")[-1].startswith("NO"), "no script commands before a login"
    # AUTHENTICATE without an initial response: an empty challenge, then
    # the client's string; "*" cancels.
    r.send(b'AUTHENTICATE "PLAIN"\r\n')
    assert r.line() == '""'
    assert r.cmd(b'"*"\r\n')[-1].startswith("NO")
    r.send(b'AUTHENTICATE "PLAIN"\r\n')
    assert r.line() == '""'
    resp = b64plain().encode()
    out = r.cmd(b"{%d+}\r\n%s\r\n" % (len(resp), resp))
    assert out[-1].startswith("OK"), out
    # Both literal forms, the synchronizing one read without a continuation.
    script = b"keep;\r\n"
    assert r.cmd(b'PUTSCRIPT "sync" {%d}\r\n%s\r\n' % (len(script), script))[-1].startswith("OK")
    assert r.cmd(b'PUTSCRIPT {5+}\r\nnsync {%d+}\r\n%s\r\n' % (len(script), script))[-1].startswith("OK")
    out = r.cmd(b'GETSCRIPT "nsync"\r\n')
    assert out[0] == "{%d}" % len(script) and out[-1].startswith("OK"), out
    assert r.cmd(b'NOOP "tag-1"\r\n')[-1] == 'OK (TAG "tag-1") "Done."'
    # Invalid UTF-8 in a name is refused, the session goes on.
    out = r.cmd(b'PUTSCRIPT {2+}\r\n\xff\xfe {5+}\r\nkeep;\r\n')
    assert out[-1].startswith("NO") and "UTF-8" in out[-1], out
    # A script over 64 KiB: NO (QUOTA/MAXSIZE), the session goes on.
    big = b"#" * (70 * 1024)
    out = r.cmd(b'PUTSCRIPT "big" {%d+}\r\n%s\r\n' % (len(big), big))
    assert out[-1].startswith("NO (QUOTA/MAXSIZE)"), out
    out = r.cmd(b"LISTSCRIPTS\r\n")
    assert out == ['"nsync"', '"sync"', 'OK "Listscripts completed."'], out
    # A line longer than the limit ends the session with BYE.
    out = r.cmd(b"NOOP " + b"x" * 20000 + b"\r\n")
    assert out[-1].startswith("BYE"), out
    assert r.closed()
    # A literal larger than anything kept or skipped: BYE at once.
    r = Raw()
    out = r.cmd(b'CHECKSCRIPT {5000000+}\r\n')
    assert out[-1].startswith("BYE"), out
    assert r.closed()
    # Bad commands: a bounded number, then BYE.
    r = Raw()
    for _ in range(19):
        assert r.cmd(b"FROB\r\n")[-1].startswith("NO")
    assert r.cmd(b"FROB\r\n")[-1].startswith("BYE")
    assert r.closed()


def bad_login():
    r = Raw()
    for i in range(2):
        out = r.cmd(b'AUTHENTICATE "PLAIN" "%s"\r\n' % b64plain("wrong").encode())
        assert out[-1].startswith("NO"), out
    out = r.cmd(b'AUTHENTICATE "PLAIN" "%s"\r\n' % b64plain("wrong").encode())
    assert out[-1].startswith("BYE"), out
    assert r.closed()


{"basics": basics, "delivery": delivery, "starttls": starttls, "raw": raw, "bad_login": bad_login}[SCENARIO]()
print(f"{SCENARIO}: ok")
