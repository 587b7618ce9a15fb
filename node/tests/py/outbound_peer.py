#!/usr/bin/env python3
"""The outside world of outbound delivery, on loopback: a DNS server (dnslib)
and a remote MX (aiosmtpd), for node/tests/outbound.rs.

    outbound_peer.py OUT_DIR

DNS, on 127.0.0.1 (UDP and TCP, one free port), served by testdns.py's
resolver from OUT_DIR/zone.json:
    remote.test       MX 10 mx.remote.test.
    mx.remote.test    A  127.0.0.2
    nullmx.test       MX 0 .            (RFC 7505)
    anything else     NXDOMAIN
The MX listens on 127.0.0.2 (a free port; meshmail's [outbound] mx_port).
How it answers RCPT depends on the local part:
    reject*     550 5.1.1 at RCPT
    tempfailN*  451 4.3.0 for the first N attempts, then 250
    always451*  451 4.3.0, always
    otherwise   250
Every accepted message is written to OUT_DIR/<n>.eml and announced on
stdout as one JSON line {"event": "message", "file", "mail_from", "rcpts",
"attempts", "connection" (1-based, in accept order), "connections_peak"
(most connections open at once so far)}. The first line is {"event": "ready", "dns": "IP:PORT",
"mx": "IP:PORT"}, printed once both listen. Ends when stdin closes.
"""
import json
import os
import socket
import sys
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP
from dnslib.server import DNSServer

# The one test DNS server of the suite (its directory is on sys.path).
from testdns import Quiet, ZoneResolver

OUT = sys.argv[1]
MX_IP = "127.0.0.2"
LOCK = threading.Lock()
# Connections to the MX: total, open now, most open at once.
CONNS = {"total": 0, "open": 0, "peak": 0}


def emit(obj):
    with LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


ZONE = {"records": [
    ["remote.test.", "MX", "10 mx.remote.test."],
    ["mx.remote.test.", "A", MX_IP],
    ["nullmx.test.", "MX", "0 ."],
]}


def free_port(ip):
    """A port free for both UDP and TCP on ip."""
    for _ in range(50):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((ip, 0))
        port = u.getsockname()[1]
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind((ip, port))
        except OSError:
            u.close()
            t.close()
            continue
        u.close()
        t.close()
        return port
    raise RuntimeError("no free port")


class CountingSMTP(SMTP):
    """Counts connections, so a test can see reuse and the per-destination cap."""

    def connection_made(self, transport):
        with LOCK:
            CONNS["total"] += 1
            CONNS["open"] += 1
            CONNS["peak"] = max(CONNS["peak"], CONNS["open"])
            self.conn_id = CONNS["total"]
        super().connection_made(transport)

    def connection_lost(self, exc):
        with LOCK:
            CONNS["open"] -= 1
        super().connection_lost(exc)


class CountingController(Controller):
    def factory(self):
        return CountingSMTP(self.handler, **self.SMTP_kwargs)


class Handler:
    def __init__(self):
        self.attempts = {}
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@")[0].lower()
        with LOCK:
            n = self.attempts.get(address, 0) + 1
            self.attempts[address] = n
        if local.startswith("reject"):
            return "550 5.1.1 No such user here"
        if local.startswith("always451"):
            return "451 4.3.0 Try again later"
        if local.startswith("tempfail"):
            digits = "".join(c for c in local[len("tempfail"):] if c.isdigit())
            if n <= int(digits or "1"):
                return "451 4.3.0 Greylisted, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with LOCK:
            self.count += 1
            n = self.count
        path = os.path.join(OUT, f"{n}.eml")
        with open(path, "wb") as f:
            f.write(envelope.original_content)
        emit({
            "event": "message",
            "file": path,
            "mail_from": envelope.mail_from,
            "rcpts": envelope.rcpt_tos,
            "attempts": {r: self.attempts.get(r, 0) for r in envelope.rcpt_tos},
            "connection": getattr(server, "conn_id", 0),
            "connections_peak": CONNS["peak"],
        })
        return "250 2.0.0 Queued"


def main():
    zone = os.path.join(OUT, "zone.json")
    with open(zone, "w") as f:
        json.dump(ZONE, f)
    resolver = ZoneResolver(zone)
    udp = DNSServer(resolver, port=0, address="127.0.0.1", logger=Quiet())
    dns_port = udp.server.server_address[1]
    tcp = DNSServer(resolver, port=dns_port, address="127.0.0.1", tcp=True, logger=Quiet())
    udp.start_thread()
    tcp.start_thread()
    mx_port = free_port(MX_IP)
    ctl = CountingController(Handler(), hostname=MX_IP, port=mx_port, enable_SMTPUTF8=True,
                     decode_data=False, server_hostname="mx.remote.test")
    ctl.start()  # returns once the MX answers (it connects to itself)
    with LOCK:  # that self-test connection is not meshmail's
        CONNS.update(total=0, peak=CONNS["open"])
    emit({"event": "ready", "dns": f"127.0.0.1:{dns_port}", "mx": f"{MX_IP}:{mx_port}"})
    sys.stdin.read()
    ctl.stop()
    udp.stop()
    tcp.stop()


if __name__ == "__main__":
    main()
