#!/usr/bin/env python3
"""Commit → EXISTS latency on an idle session, over N deliveries.

    idle_latency.py SMTP_ADDR IMAP_ADDR USER PASSWORD N [PAUSE_S]

With PAUSE_S, each delivery waits that long first (longer than the node's
`park_idle_after_secs`, it measures the push to a parked session).

Measured on the client from the end of DATA (the final dot sent) to the
EXISTS line received: commit time plus the push. Prints p50/p99 in ms.
"""
import socket
import sys
import time

SMTP, IMAP, USER, PASSWORD, N = sys.argv[1:6]
N = int(N)
PAUSE_S = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0


def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


class Lines:
    def __init__(self, addr):
        self.s = socket.create_connection(hp(addr), timeout=30)
        # Small writes must not wait for the peer's delayed ACK (Nagle).
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, d):
        self.s.sendall(d.encode() if isinstance(d, str) else d)

    def line(self):
        while b"\r\n" not in self.buf:
            c = self.s.recv(65536)
            if not c:
                raise EOFError
            self.buf += c
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l.decode()


imap = Lines(IMAP)
imap.line()
imap.send(f'L LOGIN "{USER}" "{PASSWORD}"\r\nS SELECT INBOX\r\n')
while not imap.line().startswith("S "):
    pass
imap.send("I IDLE\r\n")
assert imap.line().startswith("+")
smtp = Lines(SMTP)
smtp.line()
smtp.send("EHLO bench\r\n")
while not smtp.line().startswith("250 "):
    pass
lat = []
for i in range(N):
    if PAUSE_S:
        time.sleep(PAUSE_S)
    smtp.send(f"MAIL FROM:<l@remote.example>\r\nRCPT TO:<{USER}>\r\nDATA\r\n")
    for _ in range(3):
        smtp.line()
    smtp.send(f"Subject: idle {i}\r\n\r\nping\r\n")
    t0 = time.perf_counter()
    smtp.send(".\r\n")
    while True:
        l = imap.line()
        if l.endswith(" EXISTS"):
            lat.append((time.perf_counter() - t0) * 1000)
            break
    assert smtp.line().startswith("250"), "delivery refused"
imap.send("DONE\r\n")
lat.sort()
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f"idle push: {N} deliveries, end-of-data -> EXISTS p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, max {lat[-1]:.2f} ms")
