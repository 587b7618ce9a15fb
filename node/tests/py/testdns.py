#!/usr/bin/env python3
"""A test DNS server on loopback (dnslib), for the mail-authentication and
outbound-delivery tests: it serves the records in a JSON zone file, read
again at every query so a test can add records (a DKIM key it just
generated) while the server runs.

    testdns.py ZONE.json [HOST]

Zone file: {"records": [["name.", "TYPE", "value"], ...]} with TYPE one of
A, AAAA, MX ("10 mx.example."), TXT (any length: split into 255-byte
strings), CNAME. Names are case-insensitive. A name with no record of the
asked type but some other record answers NODATA; an unknown name NXDOMAIN.

Binds UDP and TCP on HOST (default 127.0.0.1) port 0 and prints
"ready PORT" on stdout once both listen. Exits when stdin closes (the
parent test ended), so it never outlives its test.
"""
import errno
import json
import sys
import threading

from dnslib import AAAA, CNAME, MX, QTYPE, RCODE, RR, TXT, A, DNSLabel
from dnslib.server import BaseResolver, DNSServer


class ZoneResolver(BaseResolver):
    def __init__(self, path):
        self.path = path

    def load(self):
        with open(self.path) as f:
            return json.load(f).get("records", [])

    def resolve(self, request, handler):
        reply = request.reply()
        qname = request.q.qname
        qtype = QTYPE[request.q.qtype]
        known = False
        for name, rtype, value in self.load():
            if DNSLabel(name) != qname:
                continue
            known = True
            if rtype != qtype and not (rtype == "CNAME" and qtype != "CNAME"):
                continue
            reply.add_answer(RR(qname, getattr(QTYPE, rtype), rdata=rdata(rtype, value), ttl=5))
        if not known:
            reply.header.rcode = RCODE.NXDOMAIN
        return reply


def rdata(rtype, value):
    if rtype == "A":
        return A(value)
    if rtype == "AAAA":
        return AAAA(value)
    if rtype == "MX":
        pref, host = value.split(None, 1)
        return MX(host, int(pref))
    if rtype == "CNAME":
        return CNAME(value)
    if rtype == "TXT":
        data = value.encode()
        return TXT([data[i : i + 255] for i in range(0, len(data), 255)] or [b""])
    raise ValueError(f"unsupported record type {rtype}")


class Quiet:
    """dnslib logs every query to stdout by default; stdout is our ready line."""

    def __getattr__(self, _name):
        return lambda *args, **kwargs: None


def serve_udp_and_tcp(resolver, host):
    """DNS on one port number over UDP and TCP: (udp, tcp, port). The UDP
    socket picks a free port; that number can be taken over TCP by another
    test's connection meanwhile (a CI run failed on it), so a bounded
    number of fresh picks is tried."""
    for _ in range(20):
        udp = DNSServer(resolver, address=host, port=0, logger=Quiet())
        port = udp.server.server_address[1]
        try:
            tcp = DNSServer(resolver, address=host, port=port, tcp=True, logger=Quiet())
        except OSError as e:
            udp.server.server_close()
            if e.errno != errno.EADDRINUSE:
                raise
            continue
        return udp, tcp, port
    raise RuntimeError("no port free over both UDP and TCP in 20 tries")


def main():
    path = sys.argv[1]
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    resolver = ZoneResolver(path)
    udp, tcp, port = serve_udp_and_tcp(resolver, host)
    udp.start_thread()
    tcp.start_thread()
    print(f"ready {port}", flush=True)
    # Live until the parent closes our stdin (or dies).
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait()
    udp.stop()
    tcp.stop()


if __name__ == "__main__":
    main()
