#!/usr/bin/env python3
"""UTF8=ACCEPT (RFC 6855) over a raw socket: before ENABLE an APPEND UTF8
is BAD; after it mailbox names travel as UTF-8 quoted strings (CREATE,
LIST), `APPEND mailbox UTF8 (~{n})` stores a message with raw UTF-8
headers, and FETCH ENVELOPE gives its subject back as a UTF-8 string.

    imap_utf8.py IMAP_ADDR USER PASSWORD
"""
import socket
import sys

IMAP, USER, PASSWORD = sys.argv[1:4]


class Raw:
    def __init__(self, addr):
        h, p = addr.rsplit(":", 1)
        self.s = socket.create_connection((h, int(p)), timeout=20)
        self.f = self.s.makefile("rb")
        assert self.f.readline().startswith(b"* OK")

    def command(self, tag, data):
        self.s.sendall(tag.encode() + b" " + data + b"\r\n")
        lines = []
        while True:
            ln = self.f.readline().rstrip(b"\r\n")
            if ln.endswith(b"}") and b"{" in ln:
                n = int(ln[ln.rindex(b"{") + 1:-1])
                ln += b"\r\n" + self.f.read(n) + self.f.readline().rstrip(b"\r\n")
            lines.append(ln)
            if ln.startswith(tag.encode() + b" "):
                return lines


def main():
    r = Raw(IMAP)
    assert r.command("a", f'LOGIN "{USER}" "{PASSWORD}"'.encode())[-1].startswith(b"a OK")
    name = "Entwürfe-ü".encode()
    msg = "Subject: Grüße ☃\r\nFrom: Zoë <zoe@example.net>\r\n\r\nbody\r\n".encode()
    append = b'APPEND "' + name + b'" UTF8 (~{%d+}\r\n' % len(msg) + msg + b")"
    assert r.command("b", append)[-1].startswith(b"b BAD"), "UTF8 data needs ENABLE first"
    assert b"* ENABLED UTF8=ACCEPT" in r.command("c", b"ENABLE UTF8=ACCEPT")
    assert r.command("d", b'CREATE "' + name + b'"')[-1].startswith(b"d OK")
    listed = r.command("e", b'LIST "" "Entw*"')
    assert any(b'"' + name + b'"' in ln for ln in listed), listed
    last = r.command("f", append)[-1]
    assert last.startswith(b"f OK [APPENDUID"), last
    assert r.command("g", b'SELECT "' + name + b'"')[-1].startswith(b"g OK")
    env = r.command("h", b"FETCH 1 (ENVELOPE)")
    assert any('"Grüße ☃"'.encode() in ln for ln in env), env
    r.command("i", b'DELETE "' + name + b'"')
    print("utf8: ENABLE, UTF-8 names, APPEND UTF8, UTF-8 ENVELOPE")


if __name__ == "__main__":
    main()
