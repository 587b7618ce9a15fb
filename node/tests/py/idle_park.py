#!/usr/bin/env python3
"""Parked IDLE sessions, as a client sees them (the node runs with
`[imap] park_idle_after_secs = 1`): one unbroken IDLE over plain TCP and
one over TLS, each parked (the node's gauge says so), woken by a delivery
(EXISTS pushed, then parked again), ended with DONE (tagged OK), and then
asked for its sequence numbers, which must still map to the right UIDs
around the holes two expunges left. A third client closes its socket while
parked; the gauge must fall back to zero.

    idle_park.py SMTP_ADDR IMAP_ADDR IMAPS_ADDR HTTP_ADDR USER PASSWORD
"""
import re
import smtplib
import socket
import ssl
import sys
import time
import urllib.request

SMTP, IMAP, IMAPS, HTTP, USER, PASSWORD = sys.argv[1:7]
DEADLINE = 30


def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


class Lines:
    def __init__(self, addr, tls=False):
        s = socket.create_connection(hp(addr), timeout=DEADLINE)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(s)
        self.s = s
        self.buf = b""

    def send(self, d):
        self.s.sendall(d.encode())

    def line(self):
        while b"\r\n" not in self.buf:
            c = self.s.recv(65536)
            if not c:
                raise EOFError("server closed the connection")
            self.buf += c
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode()

    def until(self, tag):
        out = []
        while True:
            ln = self.line()
            out.append(ln)
            if ln.startswith(tag + " "):
                assert ln.startswith(tag + " OK"), out
                return out


def metric(name, labels=""):
    text = urllib.request.urlopen(f"http://{HTTP}/metrics", timeout=10).read().decode()
    total = 0.0
    for ln in text.splitlines():
        if ln.startswith(name + "{") or ln.startswith(name + " "):
            if labels in ln:
                total += float(ln.rsplit(" ", 1)[1])
    return total


def wait_metric(name, labels, cond, what):
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        v = metric(name, labels)
        if cond(v):
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} ({name}{labels} = {metric(name, labels)})")


def parked():
    return metric("meshmail_sessions_parked", 'kind="imap_session"')


def deliver(subject):
    with smtplib.SMTP(*hp(SMTP)) as s:
        s.sendmail("park@remote.example", [USER], f"Subject: {subject}\r\n\r\nbody\r\n")


def idle_session(addr, tls):
    c = Lines(addr, tls)
    c.line()
    c.send(f'L LOGIN "{USER}" "{PASSWORD}"\r\n')
    c.until("L")
    c.send("S SELECT INBOX\r\n")
    c.until("S")
    c.send("I IDLE\r\n")
    assert c.line().startswith("+"), "no IDLE continuation"
    return c


# Six messages, then UIDs 2 and 4 expunged: the view is 1 3 5 6.
for i in range(6):
    deliver(f"seed {i}")
setup = Lines(IMAP)
setup.line()
setup.send(f'L LOGIN "{USER}" "{PASSWORD}"\r\nS SELECT INBOX\r\n')
setup.until("S")
setup.send("D UID STORE 2,4 +FLAGS.SILENT (\\Deleted)\r\nE EXPUNGE\r\n")
setup.until("E")
setup.send("O LOGOUT\r\n")

plain = idle_session(IMAP, False)
tls = idle_session(IMAPS, True)
wait_metric("meshmail_sessions_parked", 'kind="imap_session"', lambda v: v >= 2, "both IDLE sessions to park")
wakes_before = metric("meshmail_imap_session_wakes_total", 'reason="change"')

# A delivery wakes both; each pushes EXISTS for the fifth message.
deliver("while parked")
for name, c in (("plain", plain), ("tls", tls)):
    ln = c.line()
    while not ln.endswith(" EXISTS"):
        assert ln.startswith("* "), f"{name}: {ln!r} during IDLE"
        ln = c.line()
    assert ln == "* 5 EXISTS", f"{name}: expected '* 5 EXISTS', got {ln!r}"
wait_metric("meshmail_imap_session_wakes_total", 'reason="change"', lambda v: v >= wakes_before + 2, "change wakes")
wait_metric("meshmail_sessions_parked", 'kind="imap_session"', lambda v: v >= 2, "both sessions to park again")

for name, c in (("plain", plain), ("tls", tls)):
    c.send("DONE\r\n")
    ln = c.until("I")[-1]
    assert ln == "I OK IDLE terminated", f"{name}: {ln!r}"
    c.send("F FETCH 1:* (UID)\r\n")
    out = c.until("F")
    uids = [int(m.group(2)) for m in (re.match(r"\* (\d+) FETCH \(UID (\d+)\)", ln) for ln in out) if m]
    seqs = [int(m.group(1)) for m in (re.match(r"\* (\d+) FETCH \(UID (\d+)\)", ln) for ln in out) if m]
    assert seqs == [1, 2, 3, 4, 5], f"{name}: sequence numbers {seqs}"
    assert uids == [1, 3, 5, 6, 7], f"{name}: UIDs after waking {uids}"
    c.send("N NOOP\r\n")
    c.until("N")
    c.send("Q LOGOUT\r\n")
    c.until("Q")
wait_metric("meshmail_sessions_parked", 'kind="imap_session"', lambda v: v == 0, "no parked sessions after LOGOUT")

# A client that goes away while parked.
gone = idle_session(IMAP, False)
wait_metric("meshmail_sessions_parked", 'kind="imap_session"', lambda v: v >= 1, "the third session to park")
client_wakes = metric("meshmail_imap_session_wakes_total", 'reason="client"')
gone.s.close()
wait_metric("meshmail_sessions_parked", 'kind="imap_session"', lambda v: v == 0, "the closed session to unpark")
assert metric("meshmail_imap_session_wakes_total", 'reason="client"') >= client_wakes + 1
print("idle park ok: plain and TLS parked, woken by a delivery, DONE answered, UIDs kept")
