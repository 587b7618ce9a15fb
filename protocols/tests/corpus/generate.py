#!/usr/bin/env python3
"""Writes the IMAP differential corpus: 353 varied messages as NNN.eml
(320 varied ones, 24 reply chains for THREAD, then 9 MIME and header
shapes).

The corpus is committed; this script documents how it was made and can
rebuild it byte for byte (fixed seed). The messages are built by hand
rather than only through Python's `email` package so that they can be
broken in the ways real mail is broken: bad dates, bare groups, 8-bit
headers, missing charsets, odd boundaries, binary parts.

    python3 protocols/tests/corpus/generate.py
"""

import base64
import os
import quopri
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261201)

NAMES = [
    ("Ada Lovelace", "ada@example.org"),
    ("Jöhn Dœ", "john@remote.example"),
    ("山田 太郎", "taro@example.jp"),
    ("", "bare@example.com"),
    ("O'Brien, Pat", "pat@example.ie"),
    ("Zoë \"Z\" Smith", "zoe@example.net"),
]
SUBJECTS = [
    "plain subject",
    "Re: Re: Fwd: nested replies",
    "=?UTF-8?B?w5xuw69jw7Zkw6kg4pyT?=",
    "=?ISO-8859-1?Q?caf=E9_cr=E8me?=",
    "=?utf-8?q?mixed?= plain =?utf-8?b?w6k=?=",
    "a very long subject that goes on and on and is folded\r\n over more than one line of header text",
    "",
    "=?UTF-8?Q?=E6=97=A5=E6=9C=AC=E8=AA=9E?= test",
    "brackets [list] and (parens)",
    "=?bogus-charset?Q?unknown?=",
]
DATES = [
    "Tue, 01 Dec 2026 10:00:00 +0000",
    "Mon, 30 Nov 2026 23:59:59 -0800",
    "1 Jan 2025 00:00:00 +1400",
    "Sun, 15 Jun 2025 12:30 +0200",
    "not a date at all",
    "Fri, 31 Dec 1999 23:59:60 GMT",
    "Wed, 5 Mar 2025 07:08:09 EST",
    None,
    "Thu, 29 Feb 2024 12:00:00 +0530",
    "Sat, 02 Jan 2021 03:04:05 +0000 (UTC)",
]
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu "
         "café naïve Grüße résumé ünïcode straße").split()


def addr(i):
    name, a = NAMES[i % len(NAMES)]
    if not name:
        return a
    if any(ord(c) > 127 for c in name):
        enc = base64.b64encode(name.encode()).decode()
        return f"=?UTF-8?B?{enc}?= <{a}>"
    if any(c in name for c in ",'\""):
        return '"' + name.replace('"', '\\"') + f'" <{a}>'
    return f"{name} <{a}>"


def to_field(i):
    k = i % 7
    if k == 0:
        return addr(i + 1)
    if k == 1:
        return f"{addr(i + 1)}, {addr(i + 2)}"
    if k == 2:
        return f"undisclosed-recipients:;"
    if k == 3:
        return f"Team: {addr(i + 1)}, {addr(i + 3)};, {addr(i + 4)}"
    if k == 4:
        return f"Empty group:;, {addr(i + 2)}"
    if k == 5:
        return f"<route@example.org>"
    return f"{addr(i + 1)} (a comment)"


def text(n, eight_bit=False):
    words = [rng.choice(WORDS) for _ in range(n)]
    if not eight_bit:
        words = [w.encode("ascii", "replace").decode() for w in words]
    lines = []
    for k in range(0, len(words), 9):
        lines.append(" ".join(words[k:k + 9]))
    return "\r\n".join(lines) + "\r\n"


def headers(i, extra=()):
    h = []
    h.append(f"From: {addr(i)}")
    h.append(f"To: {to_field(i)}")
    if i % 4 == 0:
        h.append(f"Cc: {addr(i + 5)}")
    if i % 9 == 0:
        h.append(f"Reply-To: {addr(i + 2)}")
    if i % 11 == 0:
        h.append(f"Sender: {addr(i + 3)}")
    s = SUBJECTS[i % len(SUBJECTS)]
    if s or i % 20:
        h.append(f"Subject: {s} #{i}" if s else "Subject:")
    d = DATES[i % len(DATES)]
    if d:
        h.append(f"Date: {d}")
    if i % 13 != 5:
        h.append(f"Message-ID: <corpus-{i}@example.org>")
    if i % 3 == 1:
        h.append(f"In-Reply-To: <corpus-{i - 1}@example.org>")
        h.append(f"References: <corpus-{max(i - 2, 0)}@example.org> <corpus-{i - 1}@example.org>")
    h.append(f"X-Corpus-Id: {i}")
    if i % 17 == 0:
        h.append("X-Mixed-Case-Header: Value With Spaces")
    if i % 19 == 0:
        h.append("Comments: folded\r\n\tcontinuation line")
    h.extend(extra)
    return h


def msg(hs, body):
    return ("\r\n".join(hs) + "\r\n\r\n").encode() + body


def b64(data):
    s = base64.b64encode(data).decode()
    return ("\r\n".join(s[k:k + 76] for k in range(0, len(s), 76)) + "\r\n").encode()


def qp(data):
    return quopri.encodestring(data).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def boundary(i):
    return rng.choice([f"b{i}", f"==_boundary_{i}_==", f"----=_Part_{i}_{rng.randint(1, 99999)}",
                       f"'()+_,-./:=? {i}"])


def part_headers(ctype, cte=None, extra=()):
    h = [f"Content-Type: {ctype}"]
    if cte:
        h.append(f"Content-Transfer-Encoding: {cte}")
    h.extend(extra)
    return "\r\n".join(h).encode() + b"\r\n\r\n"


def multipart(sub, parts, bnd, preamble=b"", epilogue=b""):
    q = f'"{bnd}"' if any(c in bnd for c in " '()+,/:=?") else bnd
    out = [preamble]
    for p in parts:
        out.append(f"--{bnd}\r\n".encode() + p + b"\r\n")
    out.append(f"--{bnd}--\r\n".encode() + epilogue)
    return f"multipart/{sub}; boundary={q}", b"".join(out)


def text_part(i, kind):
    k = kind % 8
    if k == 0:
        return part_headers("text/plain; charset=us-ascii") + text(20).encode()
    if k == 1:
        return part_headers("text/plain; charset=utf-8", "8bit") + text(30, True).encode()
    if k == 2:
        return part_headers("text/plain; charset=iso-8859-1", "quoted-printable") + qp(
            text(40, True).encode("latin-1", "replace"))
    if k == 3:
        return part_headers("text/plain") + text(10).encode()
    if k == 4:
        return part_headers("text/html; charset=UTF-8", "base64") + b64(
            f"<html><body><p>{text(25, True)}</p></body></html>".encode())
    if k == 5:
        return part_headers("text/plain; format=flowed; delsp=yes; charset=\"utf-8\"",
                            "quoted-printable") + qp(text(50, True).encode())
    if k == 6:
        return part_headers("TEXT/PLAIN; CHARSET=UTF-8; name*=utf-8''r%C3%A9sum%C3%A9.txt",
                            "7bit", ["Content-Disposition: inline"]) + text(5).encode()
    return part_headers("text/enriched", None, ["Content-Language: en, fr",
                                                "Content-ID: <cid-%d@example.org>" % i,
                                                "Content-Description: enriched text"]) + b"<bold>x</bold>\r\n"


def attachment(i, kind):
    data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000)))
    k = kind % 5
    if k == 0:
        return part_headers(f'application/octet-stream; name="data-{i}.bin"', "base64",
                            [f'Content-Disposition: attachment; filename="data-{i}.bin"']) + b64(data)
    if k == 1:
        return part_headers("image/png", "base64",
                            ["Content-Disposition: inline; filename=pic.png; size=%d" % len(data),
                             f"Content-ID: <img{i}@example.org>"]) + b64(data)
    if k == 2:
        return part_headers("application/pdf; name*0=\"long-file-\"; name*1=\"name.pdf\"", "base64",
                            ["Content-Disposition: attachment;\r\n filename*=UTF-8''%E2%9C%93.pdf"]) + b64(data)
    if k == 3:
        return part_headers("application/x-binary", "binary") + data.replace(b"\r", b"").replace(
            b"\n", b"").replace(b"\0", b"\x01") + b"\r\n"
    return part_headers("application/json; charset=utf-8", "7bit",
                        ["Content-Disposition: attachment; filename=\"a.json\""]) + b'{"k": [1, 2, 3]}\r\n'


def nested_message(i):
    inner = msg(headers(i + 1000)[:6] + ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8"],
                text(15, True).encode())
    return part_headers("message/rfc822", None, ["Content-Disposition: attachment"]) + inner


def build(i):
    kind = i % 16
    mime = ["MIME-Version: 1.0"]
    if kind == 0:
        return msg(headers(i), text(rng.randint(1, 80)).encode())
    if kind == 1:
        return msg(headers(i, mime + ["Content-Type: text/plain; charset=utf-8",
                                      "Content-Transfer-Encoding: 8bit"]), text(40, True).encode())
    if kind == 2:
        ct, body = multipart("alternative", [text_part(i, 0), text_part(i, 4)], boundary(i))
        return msg(headers(i, mime + [f"Content-Type: {ct}"]), body)
    if kind == 3:
        ct, body = multipart("mixed", [text_part(i, rng.randint(0, 7)), attachment(i, rng.randint(0, 4))],
                             boundary(i), b"This is a multi-part message in MIME format.\r\n")
        return msg(headers(i, mime + [f"Content-Type: {ct}"]), body)
    if kind == 4:
        alt_ct, alt = multipart("alternative", [text_part(i, 1), text_part(i, 4)], f"alt{i}")
        ct, body = multipart("mixed", [part_headers(alt_ct) + alt, attachment(i, 1), attachment(i, 0)],
                             f"mix{i}")
        return msg(headers(i, mime + [f"Content-Type: {ct}"]), body)
    if kind == 5:
        ct, body = multipart("mixed", [text_part(i, 0), nested_message(i)], boundary(i))
        return msg(headers(i, mime + [f"Content-Type: {ct}"]), body)
    if kind == 6:
        return msg(headers(i, mime + ["Content-Type: message/rfc822"]),
                   nested_message(i).split(b"\r\n\r\n", 1)[1])
    if kind == 7:
        return msg(headers(i, mime + ["Content-Type: text/plain; charset=iso-8859-1",
                                      "Content-Transfer-Encoding: quoted-printable"]),
                   qp(("Café crème " * 12 + "\n").encode("latin-1") * 5))
    if kind == 8:
        return msg(headers(i, mime + ["Content-Type: application/octet-stream",
                                      "Content-Transfer-Encoding: base64"]),
                   b64(bytes(range(256)) * 3))
    if kind == 9:
        rel_ct, rel = multipart("related; type=\"text/html\"", [text_part(i, 4), attachment(i, 1)], f"rel{i}")
        return msg(headers(i, mime + [f"Content-Type: {rel_ct}"]), rel)
    if kind == 10:
        # 8-bit bytes in headers (raw UTF-8), no MIME-Version.
        hs = headers(i)
        hs[0] = "From: Rémi Ünicode <remi@example.fr>"
        hs.append("X-Raw: naïve ☃")
        return msg(hs, "Body with raw UTF-8: ☃ ✓\r\n".encode())
    if kind == 11:
        # Empty body, and a multipart with no parts at all.
        if i % 2:
            return msg(headers(i), b"")
        return msg(headers(i, mime + [f"Content-Type: multipart/mixed; boundary=none{i}"]),
                   b"no parts here\r\n")
    if kind == 12:
        # Digest: parts default to message/rfc822.
        inner = [b"\r\n" + msg(headers(i + 2000 + k)[:5], text(6).encode()) for k in range(3)]
        ct, body = multipart("digest", inner, f"dig{i}")
        return msg(headers(i, mime + [f"Content-Type: {ct}"]), body)
    if kind == 13:
        # Signed-looking and long lines.
        long_line = ("x" * 990 + "\r\n").encode()
        ct, body = multipart("signed; protocol=\"application/pgp-signature\"; micalg=pgp-sha256",
                             [text_part(i, 3) + long_line,
                              part_headers("application/pgp-signature; name=\"signature.asc\"") +
                              b"-----BEGIN PGP SIGNATURE-----\r\nAAAA\r\n-----END PGP SIGNATURE-----\r\n"],
                             f"sig{i}")
        return msg(headers(i, mime + [f"Content-Type: {ct}"]), body)
    if kind == 14:
        # Header oddities: duplicate Subject, lowercase names, tab folding, no space after colon.
        hs = headers(i, ["subject:second subject", "x-lower: value", "X-Tabbed:\tvalue\r\n\twrapped"])
        return msg(hs, text(12).encode())
    # kind 15: deeply nested multiparts with content-disposition params.
    inner_ct, inner = multipart("mixed", [text_part(i, 2), attachment(i, 4)], f"in{i}")
    mid_ct, mid = multipart("alternative", [text_part(i, 5), part_headers(inner_ct) + inner], f"mid{i}")
    ct, body = multipart("mixed", [part_headers(mid_ct) + mid, nested_message(i), attachment(i, 2)], f"out{i}")
    return msg(headers(i, mime + [f"Content-Type: {ct}", "Content-Language: de"]), body)


# Reply chains for THREAD (RFC 5256), messages 320-343: (Message-ID or
# None, References or None, In-Reply-To or None, Subject, Date). They add
# no rng draws, so messages 000-319 stay byte for byte as they were.
T = "@thread.example"
THREADS = [
    # A chain with a branch and a reply whose References is truncated.
    (f"<t0{T}>", None, None, "Planning meeting", "Mon, 02 Nov 2026 09:00:00 +0000"),
    (f"<t1{T}>", f"<t0{T}>", f"<t0{T}>", "Re: Planning meeting", "Mon, 02 Nov 2026 10:00:00 +0000"),
    (f"<t2{T}>", f"<t0{T}> <t1{T}>", f"<t1{T}>", "Re: Re: Planning meeting", "Mon, 02 Nov 2026 11:00:00 +0000"),
    (f"<t3{T}>", f"<t0{T}> <t1{T}>", f"<t1{T}>", "RE: Planning meeting", "Mon, 02 Nov 2026 10:30:00 +0000"),
    (f"<t4{T}>", f"<t2{T}>", f"<t2{T}>", "Re: Planning meeting", "Mon, 02 Nov 2026 12:00:00 +0000"),
    # Two replies to a message not in the mailbox; one reply to another.
    (f"<t5{T}>", f"<gone-a{T}>", None, "Re: Lost parent", "Tue, 03 Nov 2026 08:00:00 +0000"),
    (f"<t6{T}>", f"<gone-a{T}>", None, "Re: Lost parent", "Tue, 03 Nov 2026 07:00:00 +0000"),
    (f"<t7{T}>", f"<gone-b{T}>", None, "Re: Alone", "Tue, 03 Nov 2026 09:00:00 +0000"),
    # Same base subject, no references: merged by subject (step 6).
    (f"<t8{T}>", None, None, "Lunch", "Wed, 04 Nov 2026 12:00:00 +0000"),
    (f"<t9{T}>", None, None, "Re: Lunch", "Wed, 04 Nov 2026 12:05:00 +0000"),
    (f"<t10{T}>", None, None, "Lunch", "Wed, 04 Nov 2026 13:00:00 +0000"),
    (f"<t11{T}>", None, None, "Fwd: Lunch", "Wed, 04 Nov 2026 14:00:00 +0000"),
    # A duplicate Message-ID, and a reply by In-Reply-To only.
    (f"<t0{T}>", None, None, "Duplicate id", "Thu, 05 Nov 2026 09:00:00 +0000"),
    (f"<t13{T}>", None, f"<t8{T}> (the lunch one)", "Re: Lunch", "Thu, 05 Nov 2026 10:00:00 +0000"),
    # A References loop.
    (f"<t14{T}>", f"<t15{T}>", None, "Loop one", "Fri, 06 Nov 2026 09:00:00 +0000"),
    (f"<t15{T}>", f"<t14{T}>", None, "Loop two", "Fri, 06 Nov 2026 10:00:00 +0000"),
    # Equal dates (ties by sequence), no Message-ID, a reply dated before
    # its parent, and junk in References.
    (f"<t16{T}>", None, None, "Tie", "Sat, 07 Nov 2026 09:00:00 +0000"),
    (None, f"<t16{T}>", None, "Re: Tie", "Sat, 07 Nov 2026 09:00:00 +0000"),
    (f"<t18{T}>", f"<t16{T}>", None, "Re: Tie", "Sat, 07 Nov 2026 09:00:00 +0000"),
    (f"<t19{T}>", f"not-an-id <t18{T}>", None, "Re: Tie", "Fri, 06 Nov 2026 08:00:00 +0000"),
    # A [Fwd: ...] wrapper, and a dummy root later filled by its message.
    (f"<t20{T}>", None, None, "[Fwd: Planning meeting]", "Sun, 08 Nov 2026 09:00:00 +0000"),
    (f"<t21{T}>", f"<t22{T}>", None, "Re: Late root", "Sun, 08 Nov 2026 10:00:00 +0000"),
    (f"<t22{T}>", None, None, "Late root", "Sun, 08 Nov 2026 08:00:00 +0000"),
    (f"<t23{T}>", f"<t22{T}> <t21{T}>", None, "Re: [list] Late root (fwd)", "Sun, 08 Nov 2026 11:00:00 +0000"),
]


def thread_message(k):
    mid, refs, irt, subject, date = THREADS[k]
    h = [f"From: {addr(k)}", "To: list@thread.example", f"Subject: {subject}", f"Date: {date}"]
    if mid:
        h.append(f"Message-ID: {mid}")
    if refs:
        h.append(f"References: {refs}")
    if irt:
        h.append(f"In-Reply-To: {irt}")
    h.append(f"X-Corpus-Id: {320 + k}")
    return msg(h, f"Thread message {k}.\r\n".encode())


# Shapes Dovecot and meshmail once disagreed on (issue 40 item 2),
# messages 344 onwards; hand-written bytes, no rng draws. Line counts of
# text parts whose content does not end in CRLF (the CRLF before a boundary
# belongs to the boundary, RFC 2046 §5.1.1), with and without a CRLF after
# the closing delimiter; a nested message/rfc822 in a multipart; multipart
# Content-Type without MIME-Version (RFC 2045 §4); folded and repeated
# header fields (three Cc fields: Cc, CC, cc).
SHAPE_HEAD = "From: Shape Tester <shape@example.org>\r\nTo: list@example.org\r\n" \
             "Date: Mon, 07 Dec 2026 09:00:00 +0000\r\n"


def shape(k, headers, body):
    return (SHAPE_HEAD + f"Subject: shape {k}\r\nX-Corpus-Id: {344 + k}\r\n" + headers + "\r\n").encode() + body


MIME = "MIME-Version: 1.0\r\n"
SHAPES = [
    # Parts without a trailing line break, a CRLF after the close.
    shape(0, MIME + "Content-Type: multipart/mixed; boundary=b0\r\n",
          b"--b0\r\nContent-Type: text/plain\r\n\r\nline one\r\nline two\r\n"
          b"--b0\r\nContent-Type: text/plain\r\n\r\nonly line\r\n--b0--\r\n"),
    # The same without a CRLF after the closing delimiter.
    shape(1, MIME + "Content-Type: multipart/mixed; boundary=b1\r\n",
          b"--b1\r\nContent-Type: text/plain\r\n\r\nline one\r\nline two\r\n"
          b"--b1\r\nContent-Type: text/html\r\n\r\n<p>one</p>\r\n<p>two</p>\r\n--b1--"),
    # Parts ending in a blank line, an empty part, preamble and epilogue.
    shape(2, MIME + "Content-Type: multipart/alternative; boundary=\"b 2\"\r\n",
          b"preamble\r\n--b 2\r\nContent-Type: text/plain\r\n\r\nline one\r\n\r\n"
          b"--b 2\r\nContent-Type: text/plain\r\n\r\n\r\n--b 2--\r\nepilogue\r\n"),
    # A nested message/rfc822 whose own body is multipart.
    shape(3, MIME + "Content-Type: multipart/mixed; boundary=outer3\r\n",
          b"--outer3\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"
          b"--outer3\r\nContent-Type: message/rfc822\r\n\r\n"
          b"From: inner@example.org\r\nSubject: inner\r\nMIME-Version: 1.0\r\n"
          b"Content-Type: multipart/alternative; boundary=inner3\r\n\r\n"
          b"--inner3\r\nContent-Type: text/plain\r\n\r\ninner text\r\nsecond\r\n"
          b"--inner3\r\nContent-Type: text/html\r\n\r\n<b>inner</b>\r\n--inner3--\r\n"
          b"--outer3--\r\n"),
    # A nested message/rfc822 whose body does not end in a line break.
    shape(4, MIME + "Content-Type: multipart/mixed; boundary=b4\r\n",
          b"--b4\r\nContent-Type: message/rfc822\r\n\r\n"
          b"From: inner@example.org\r\nSubject: inner 4\r\n\r\nfirst\r\nlast\r\n--b4--\r\n"),
    # Multipart Content-Type without MIME-Version.
    shape(5, "Content-Type: multipart/mixed; boundary=b5\r\n",
          b"--b5\r\nContent-Type: text/plain\r\n\r\nno version\r\nhere\r\n"
          b"--b5\r\nContent-Type: text/plain\r\n\r\nsecond part\r\n\r\n--b5--\r\n"),
    shape(6, "Content-Type: multipart/alternative; boundary=\"b6\"\r\n",
          b"preamble\r\n--b6\r\n\r\nplain\r\n--b6\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--b6--"),
    # Folded and repeated header fields.
    shape(7, "Cc: First <cc1@example.org>\r\nCC: cc2@example.org,\r\n cc3@example.org\r\n"
             "cc: Third\r\n\t<cc4@example.org>\r\nX-Folded: one\r\n  two\r\n\tthree\r\n"
             "Comments: first\r\nComments: second\r\n",
          b"body\r\n"),
    # A single text part without a final line break.
    shape(8, "", b"first line\r\nno break at the end"),
]


def main():
    for name in os.listdir(HERE):
        if name.endswith(".eml"):
            os.remove(os.path.join(HERE, name))
    for i in range(320):
        with open(os.path.join(HERE, f"{i:03}.eml"), "wb") as f:
            f.write(build(i))
    for k in range(len(THREADS)):
        with open(os.path.join(HERE, f"{320 + k:03}.eml"), "wb") as f:
            f.write(thread_message(k))
    for k, data in enumerate(SHAPES):
        with open(os.path.join(HERE, f"{344 + k:03}.eml"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
