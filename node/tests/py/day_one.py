"""Independent checks for node/tests/day_one.rs.

  autoconfig FILE EXPECTED_JSON  parse a Thunderbird autoconfig file with
                                 xml.etree; EXPECTED_JSON is {"domain": ..,
                                 "incoming": [[type, host, port, socket]..],
                                 "outgoing": [...]}
  mta-sts FILE                   check an MTA-STS policy file against RFC
                                 8461 §3.2's grammar and rules
  dkim FILE DNS_HOST:PORT        verify the message's DKIM signature with
                                 dkimpy, the key looked up over DNS at
                                 DNS_HOST:PORT (dnspython)
"""
import json
import re
import sys
import xml.etree.ElementTree as ET


def servers(provider, tag):
    out = []
    for s in provider.findall(tag):
        assert s.findtext("username") == "%EMAILADDRESS%", ET.tostring(s)
        assert s.findtext("authentication") in ("password-cleartext", "password-encrypted"), ET.tostring(s)
        out.append([s.get("type"), s.findtext("hostname"), int(s.findtext("port")), s.findtext("socketType")])
    return out


def check_autoconfig(path, expected):
    expected = json.loads(expected)
    root = ET.parse(path).getroot()
    assert root.tag == "clientConfig" and root.get("version") == "1.1", (root.tag, root.attrib)
    provider = root.find("emailProvider")
    assert provider is not None, "no emailProvider"
    assert provider.get("id") == expected["domain"], provider.attrib
    assert [d.text for d in provider.findall("domain")] == [expected["domain"]]
    for s in provider.findall("incomingServer") + provider.findall("outgoingServer"):
        assert s.findtext("socketType") in ("SSL", "STARTTLS", "plain"), ET.tostring(s)
    got = {"incoming": servers(provider, "incomingServer"), "outgoing": servers(provider, "outgoingServer")}
    print(json.dumps(got))
    assert got["incoming"] == expected["incoming"], got
    assert got["outgoing"] == expected["outgoing"], got
    return 0


# RFC 8461 §3.2 (ABNF), with RFC 5234 core rules.
LDH = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
HOST = rf"{LDH}(?:\.{LDH})+"
FIELDS = {
    "version": re.compile(r"STSv1"),
    "mode": re.compile(r"testing|enforce|none"),
    "max_age": re.compile(r"[0-9]{1,10}"),
    "mx": re.compile(rf"(?:\*\.)?{HOST}"),
}
EXT_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,30}[A-Za-z0-9])?")
EXT_VALUE = re.compile(r"[\x21-\x3a\x3c\x3e-\x7e]+(?:[ \t]+[\x21-\x3a\x3c\x3e-\x7e]+)*")


def check_mta_sts(path):
    raw = open(path, "rb").read()
    text = raw.decode("ascii")
    assert text.endswith("\r\n"), "every line ends with CRLF (the term is optional, but meshmail writes it)"
    lines = text[:-2].split("\r\n")
    seen = {}
    for line in lines:
        m = re.fullmatch(r"([^:]+):[ \t]*(.*?)[ \t]*", line)
        assert m, f"not a field: {line!r}"
        name, value = m.group(1), m.group(2)
        rule = FIELDS.get(name)
        if rule is None:
            assert EXT_NAME.fullmatch(name) and EXT_VALUE.fullmatch(value), f"bad extension field: {line!r}"
            continue
        assert rule.fullmatch(value), f"bad {name}: {value!r}"
        seen.setdefault(name, []).append(value)
    assert lines[0].startswith("version:"), "version comes first"
    for name in ("version", "mode", "max_age"):
        assert len(seen.get(name, [])) == 1, f"exactly one {name}: {seen}"
    assert int(seen["max_age"][0]) <= 31557600, "max_age at most 31557600"
    if seen["mode"][0] != "none":
        assert seen.get("mx"), "mx required unless mode is none"
    print(json.dumps(seen))
    return 0


def check_dkim(path, server):
    import dkim
    import dns.resolver

    host, port = server.rsplit(":", 1)
    r = dns.resolver.Resolver(configure=False)
    r.nameservers = [host]
    r.port = int(port)

    def dnsfunc(name, timeout=5):
        q = name.decode() if isinstance(name, bytes) else name
        try:
            answer = r.resolve(q.rstrip("."), "TXT", lifetime=timeout)
        except dns.resolver.NXDOMAIN:
            return b""
        return b"".join(b"".join(rd.strings) for rd in answer)

    ok = dkim.verify(open(path, "rb").read(), dnsfunc=dnsfunc)
    print(json.dumps({"dkim": bool(ok)}))
    return 0 if ok else 1


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "autoconfig":
        sys.exit(check_autoconfig(sys.argv[2], sys.argv[3]))
    if cmd == "mta-sts":
        sys.exit(check_mta_sts(sys.argv[2]))
    if cmd == "dkim":
        sys.exit(check_dkim(sys.argv[2], sys.argv[3]))
    sys.exit(f"unknown check {cmd}")
