"""A raw IMAP client for tests that compare servers byte by byte: it sends
commands as written (literals synchronising or `~{n}`), reads every
untagged line with its literals, and parses responses into values so
that two answers are compared by meaning (a quoted string equals a
literal with the same bytes), never by imaplib's reshaping.

Values: `None` for NIL, `bytes` for strings, `Atom` for atoms and numbers,
`list` for parenthesised lists; a `BODY[...]`-style item name is one atom
including its section and partial.
"""
import socket


class Atom(bytes):
    def __repr__(self):
        return "Atom(%s)" % bytes.__repr__(self)


class Conn:
    def __init__(self, addr, timeout=30):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf = b""
        self.n = 0
        self.greeting = self.line()

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise ConnectionError("server closed the connection")
        self.buf += d

    def line(self):
        """One response line with its literals inline (raw bytes, CRLF kept)."""
        out = b""
        while True:
            while b"\r\n" not in self.buf:
                self._fill()
            i = self.buf.index(b"\r\n") + 2
            piece, self.buf = self.buf[:i], self.buf[i:]
            out += piece
            lit = literal_len(piece)
            if lit is None:
                return out
            while len(self.buf) < lit:
                self._fill()
            out += self.buf[:lit]
            self.buf = self.buf[lit:]

    def command(self, text, literals=()):
        """Sends `text` (str or bytes; each `{}` placeholder in order takes
        the next literal); returns (untagged lines, tagged line)."""
        self.n += 1
        tag = b"t%d" % self.n
        if isinstance(text, str):
            text = text.encode()
        pieces = text.split(b"{}")
        self.s.sendall(tag + b" " + pieces[0])
        for lit, rest in zip(literals, pieces[1:]):
            binary = b"\0" in lit
            self.s.sendall((b"~{%d}\r\n" if binary else b"{%d}\r\n") % len(lit))
            ready = self.line()
            if not ready.startswith(b"+"):
                return [], ready
            self.s.sendall(lit + rest)
        self.s.sendall(b"\r\n")
        untagged = []
        while True:
            ln = self.line()
            if ln.startswith(tag + b" "):
                return untagged, ln
            untagged.append(ln)

    def ok(self, text, literals=()):
        untagged, tagged = self.command(text, literals)
        if tagged.split(b" ", 2)[1:2] != [b"OK"]:
            raise AssertionError(f"{text!r} -> {tagged!r}")
        return untagged


def literal_len(piece):
    p = piece.rstrip(b"\r\n")
    if not p.endswith(b"}"):
        return None
    i = p.rfind(b"{")
    if i < 0:
        return None
    n = p[i + 1:-1].rstrip(b"+")
    return int(n) if n.isdigit() else None


def parse(data):
    """Parses a sequence of IMAP values; returns a list."""
    vals, i = _seq(data, 0, None)
    return vals


def _seq(d, i, close):
    out = []
    while i < len(d):
        c = d[i:i + 1]
        if c in (b" ", b"\r", b"\n"):
            i += 1
        elif c == close:
            return out, i + 1
        elif c == b"(":
            v, i = _seq(d, i + 1, b")")
            out.append(v)
        elif c == b'"':
            j, s = i + 1, bytearray()
            while d[j:j + 1] != b'"':
                if d[j:j + 1] == b"\\":
                    j += 1
                s += d[j:j + 1]
                j += 1
            out.append(bytes(s))
            i = j + 1
        elif c == b"{" or (c == b"~" and d[i + 1:i + 2] == b"{"):
            if c == b"~":
                i += 1
            j = d.index(b"}", i)
            n = int(d[i + 1:j].rstrip(b"+"))
            start = j + 3  # "}\r\n"
            out.append(bytes(d[start:start + n]))
            i = start + n
        else:
            j = i
            depth = 0
            while j < len(d):
                ch = d[j:j + 1]
                if ch == b"[":
                    depth += 1
                elif ch == b"]":
                    depth -= 1
                elif depth == 0 and ch in (b" ", b"(", b")", b"\r", b"\n"):
                    # `BODY[...]<0>` stays one atom, `BODY[HEADER.FIELDS (A B)]` too.
                    break
                j += 1
            atom = bytes(d[i:j])
            out.append(None if atom.upper() == b"NIL" else Atom(atom))
            i = j
    return out, i


def fetch_items(line):
    """`* 3 FETCH (K V K V ...)` -> {ITEM-NAME: value} with upper-cased names."""
    vals = parse(line)
    if len(vals) < 4 or vals[2].upper() != b"FETCH":
        return None
    lst = vals[3]
    return {bytes(lst[k]).upper(): lst[k + 1] for k in range(0, len(lst) - 1, 2)}
