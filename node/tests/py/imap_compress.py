#!/usr/bin/env python3
"""COMPRESS=DEFLATE (RFC 4978) over real sockets, plain and TLS: after
`COMPRESS DEFLATE` both directions are raw deflate (zlib wbits=-15); an
APPEND literal goes up compressed, a FETCH comes back compressed (and
smaller on the wire), a second COMPRESS is `NO [COMPRESSIONACTIVE]`.

    imap_compress.py IMAP_ADDR IMAPS_ADDR USER PASSWORD
"""
import socket
import ssl
import sys
import zlib

IMAP, IMAPS, USER, PASSWORD = sys.argv[1:5]


def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


class Session:
    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.comp = self.decomp = None
        self.wire_in = 0

    def send(self, data):
        if self.comp:
            data = self.comp.compress(data) + self.comp.flush(zlib.Z_SYNC_FLUSH)
        self.s.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            assert chunk, "connection closed"
            self.wire_in += len(chunk)
            self.buf += self.decomp.decompress(chunk) if self.decomp else chunk
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            assert chunk, "connection closed"
            self.wire_in += len(chunk)
            self.buf += self.decomp.decompress(chunk) if self.decomp else chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def until(self, tag):
        """Lines up to the tagged one; literals read whole."""
        lines = []
        while True:
            ln = self.line()
            if ln.endswith(b"}") and b"{" in ln:
                n = int(ln[ln.rindex(b"{") + 1:-1])
                ln += b"\r\n" + self.read(n) + self.line()
            lines.append(ln)
            if ln.startswith(tag.encode() + b" "):
                return lines

    def command(self, tag, text):
        self.send(f"{tag} {text}\r\n".encode())
        return self.until(tag)


def run(sock, label):
    s = Session(sock)
    assert s.line().startswith(b"* OK")
    assert s.command("a", f'LOGIN "{USER}" "{PASSWORD}"')[-1].startswith(b"a OK")
    caps = s.command("b", "CAPABILITY")[0]
    assert b"COMPRESS=DEFLATE" in caps, caps
    assert s.command("c", "COMPRESS DEFLATE")[-1].startswith(b"c OK"), "COMPRESS accepted"
    s.comp = zlib.compressobj(wbits=-15)
    s.decomp = zlib.decompressobj(wbits=-15)
    body = b"Subject: compressed " + label.encode() + b"\r\n\r\n" + b"the same words again and again\r\n" * 400
    s.send(b"d APPEND INBOX {%d+}\r\n" % len(body) + body + b"\r\n")
    last = s.until("d")[-1]
    assert last.startswith(b"d OK [APPENDUID"), last
    uid = last.split()[4].rstrip(b"]").decode()
    assert s.command("e", "SELECT INBOX")[-1].startswith(b"e OK")
    before = s.wire_in
    lines = s.command("f", f"UID FETCH {uid} (BODY.PEEK[])")
    assert lines[-1].startswith(b"f OK"), lines[-1]
    assert body in lines[0], "the message comes back whole"
    wire = s.wire_in - before
    assert wire < len(body) / 4, f"deflated on the wire: {wire} bytes for {len(body)}"
    again = s.command("g", "COMPRESS DEFLATE")[-1]
    assert again.startswith(b"g NO [COMPRESSIONACTIVE]"), again
    assert s.command("h", "NOOP")[-1].startswith(b"h OK"), "still in step after the refusal"
    lines = s.command("z", "LOGOUT")
    assert lines[0].startswith(b"* BYE") and lines[-1].startswith(b"z OK"), lines
    print(f"compress over {label}: {len(body)} bytes fetched as {wire} on the wire")


def main():
    run(socket.create_connection(hp(IMAP), timeout=20), "plain")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    host, port = hp(IMAPS)
    run(ctx.wrap_socket(socket.create_connection((host, port), timeout=20), server_hostname=host), "tls")


if __name__ == "__main__":
    main()
