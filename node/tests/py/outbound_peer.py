#!/usr/bin/env python3
"""The outside world of outbound delivery, on loopback: a DNS server (dnslib)
and a remote MX (aiosmtpd), for node/tests/outbound.rs.

    outbound_peer.py OUT_DIR [TLS_DIR]

DNS, on 127.0.0.1 (UDP and TCP, one free port), served by testdns.py's
resolver from OUT_DIR/zone.json:
    remote.test       MX 10 mx.remote.test.
    mx.remote.test    A  127.0.0.2
    nullmx.test       MX 0 .            (RFC 7505)
    seven.test        MX 10 mx.seven.test.
    mx.seven.test     A  127.0.0.3
    mx.sts.test       A  127.0.0.4     (the STARTTLS MX, with TLS_DIR only)
    badtls.test       MX 10 mx.badtls.test.
    mx.badtls.test    A  127.0.0.5
    anything else     NXDOMAIN
(a test adds records to OUT_DIR/zone.json as it goes).
The MX listens on 127.0.0.2 (a free port; meshmail's [outbound] mx_port).
A second MX on 127.0.0.3, same port, offers neither 8BITMIME nor SMTPUTF8
and refuses (554) any message with an 8-bit octet: the downgrade peer.
A fourth MX on 127.0.0.5 offers STARTTLS but answers it with garbage
instead of a TLS handshake (a broken TLS setup), then closes; without
STARTTLS it accepts mail.
With TLS_DIR (cert.pem, key.pem): a third MX on 127.0.0.4, same port,
offering STARTTLS with that certificate, and an HTTPS server on
127.0.0.4 serving MTA-STS policies: GET /.well-known/mta-sts.txt with
Host: H answers OUT_DIR/policies/H (404 when missing), announced as
"https": "IP:PORT" in the ready line.
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
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP

# The one test DNS server of the suite (its directory is on sys.path).
from testdns import ZoneResolver, serve_udp_and_tcp

OUT = sys.argv[1]
MX_IP = "127.0.0.2"
SEVEN_IP = "127.0.0.3"
TLS_IP = "127.0.0.4"
BADTLS_IP = "127.0.0.5"
TLS_DIR = sys.argv[2] if len(sys.argv) > 2 else None
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
    ["seven.test.", "MX", "10 mx.seven.test."],
    ["mx.seven.test.", "A", SEVEN_IP],
    ["mx.sts.test.", "A", TLS_IP],
    ["badtls.test.", "MX", "10 mx.badtls.test."],
    ["mx.badtls.test.", "A", BADTLS_IP],
]}


def free_port(ips):
    """A TCP port free on every address of ips."""
    for _ in range(50):
        socks = []
        try:
            first = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(first)
            first.bind((ips[0], 0))
            port = first.getsockname()[1]
            for ip in ips[1:]:
                t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(t)
                t.bind((ip, port))
            return port
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
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

    async def smtp_STARTTLS(self, arg):
        if not getattr(self, "broken_tls", False):
            return await super().smtp_STARTTLS(arg)
        await self.push("220 2.0.0 Ready to start TLS")
        self.transport.write(b"this is not a TLS handshake\r\n" * 4)
        self.transport.close()

    def connection_lost(self, exc):
        with LOCK:
            CONNS["open"] -= 1
        super().connection_lost(exc)


class CountingController(Controller):
    def __init__(self, *args, seven_bit=False, broken_tls=False, **kwargs):
        self.seven_bit = seven_bit
        self.broken_tls = broken_tls
        super().__init__(*args, **kwargs)

    def factory(self):
        smtp = CountingSMTP(self.handler, **self.SMTP_kwargs)
        smtp.seven_bit = self.seven_bit
        smtp.broken_tls = self.broken_tls
        smtp.mx_ip = self.hostname
        return smtp


class PolicyHandler(BaseHTTPRequestHandler):
    """MTA-STS policies (RFC 8461 §3.3) by Host header."""

    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        path = os.path.join(OUT, "policies", os.path.basename(host))
        if self.path != "/.well-known/mta-sts.txt" or not os.path.exists(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = open(path, "rb").read()
        emit({"event": "policy", "host": host})
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


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

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        if getattr(server, "seven_bit", False):
            # The downgrade peer: a plain RFC 5321 server, no 8-bit extensions.
            responses = [r for r in responses if r[4:] not in ("8BITMIME", "SMTPUTF8")]
        if getattr(server, "broken_tls", False):
            responses.insert(1, "250-STARTTLS")
        return responses

    async def handle_DATA(self, server, session, envelope):
        if getattr(server, "seven_bit", False) and any(b >= 0x80 for b in envelope.original_content):
            return "554 5.6.3 8-bit data to a server without 8BITMIME"
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
            "tls": session.ssl is not None,
            "mx": server.mx_ip,
        })
        return "250 2.0.0 Queued"


def main():
    zone = os.path.join(OUT, "zone.json")
    with open(zone, "w") as f:
        json.dump(ZONE, f)
    resolver = ZoneResolver(zone)
    udp, tcp, dns_port = serve_udp_and_tcp(resolver, "127.0.0.1")
    udp.start_thread()
    tcp.start_thread()
    mx_port = free_port([MX_IP, SEVEN_IP, TLS_IP, BADTLS_IP])
    handler = Handler()
    ctls = [CountingController(handler, hostname=MX_IP, port=mx_port, enable_SMTPUTF8=True,
                               decode_data=False, server_hostname="mx.remote.test"),
            CountingController(handler, hostname=SEVEN_IP, port=mx_port, decode_data=False,
                               server_hostname="mx.seven.test", seven_bit=True),
            CountingController(handler, hostname=BADTLS_IP, port=mx_port, decode_data=False,
                               server_hostname="mx.badtls.test", broken_tls=True)]
    ready = {"event": "ready", "dns": f"127.0.0.1:{dns_port}", "mx": f"{MX_IP}:{mx_port}"}
    https = None
    if TLS_DIR:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(os.path.join(TLS_DIR, "cert.pem"), os.path.join(TLS_DIR, "key.pem"))
        ctls.append(CountingController(handler, hostname=TLS_IP, port=mx_port, enable_SMTPUTF8=True,
                                       decode_data=False, server_hostname="mx.sts.test",
                                       tls_context=tls))
        https = ThreadingHTTPServer((TLS_IP, 0), PolicyHandler)
        https.socket = tls.wrap_socket(https.socket, server_side=True)
        threading.Thread(target=https.serve_forever, daemon=True).start()
        ready["https"] = f"{TLS_IP}:{https.server_address[1]}"
    for ctl in ctls:
        ctl.start()  # returns once the MX answers (it connects to itself)
    with LOCK:  # those self-test connections are not meshmail's
        CONNS.update(total=0, peak=CONNS["open"])
    emit(ready)
    sys.stdin.read()
    for ctl in ctls:
        ctl.stop()
    if https:
        https.shutdown()
    udp.stop()
    tcp.stop()


if __name__ == "__main__":
    main()
