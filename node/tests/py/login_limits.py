#!/usr/bin/env python3
"""Failed-login limits, as an attacker and the account's owner meet them,
from two client addresses (issue 40 item 5).

usage: login_limits.py IMAP_ADDR SMTP_SUBMISSION_ADDR HTTP_ADDR USER PASSWORD OTHER
The node runs with [auth] failures_per_ip_max = 4,
failures_per_account_max = 3 (per account and client address); OTHER has
the same PASSWORD.

1. From 127.0.0.2, wrong passwords for USER: plain failures answered
   more and more slowly (a delay that doubles per failure), then that
   address is refused for USER, the right password included, over IMAP,
   SMTP AUTH (454 4.7.0) and JMAP (429 + Retry-After).
2. Meanwhile the owner, from 127.0.0.1 (no failures), logs in at once
   over all three.
3. From 127.0.0.3, wrong passwords for OTHER and an unknown account: past
   the per-address limit that address is refused for OTHER too, while
   127.0.0.1 still logs OTHER in.
"""
import base64
import http.client
import re
import socket
import sys
import time

imap_addr, smtp_addr, http_addr, user, password, other = sys.argv[1:7]
ATTACKER, OWNER, SPRAYER = "127.0.0.2", "127.0.0.1", "127.0.0.3"
RETRY = re.compile(r"try again in (\d+) s")


def hostport(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


def connect(addr, source):
    # The client socket's source address is what the server counts.
    return socket.create_connection(hostport(addr), timeout=60, source_address=(source, 0))


def imap_logins(source, logins):
    """Each (user, password) LOGIN on one connection: [(answer, seconds)]."""
    s = connect(imap_addr, source)
    f = s.makefile("rb")
    f.readline()  # greeting
    out = []
    for i, (u, p) in enumerate(logins):
        started = time.monotonic()
        s.sendall(f'a{i} LOGIN "{u}" "{p}"\r\n'.encode())
        while True:
            line = f.readline().decode()
            if line.startswith(f"a{i} ") or not line:
                out.append((line.strip(), time.monotonic() - started))
                break
    s.close()
    return out


def smtp_auth(source, u, p):
    s = connect(smtp_addr, source)
    f = s.makefile("rb")

    def reply(cmd=None):
        if cmd:
            s.sendall(cmd.encode() + b"\r\n")
        while True:
            line = f.readline().decode()
            if line[3:4] != "-":
                return line.strip()

    reply()
    reply("EHLO client.test")
    token = base64.b64encode(f"\0{u}\0{p}".encode()).decode()
    answer = reply(f"AUTH PLAIN {token}")
    s.close()
    return answer


def jmap_session(source, u, p):
    host, port = hostport(http_addr)
    c = http.client.HTTPConnection(host, port, timeout=60, source_address=(source, 0))
    auth = base64.b64encode(f"{u}:{p}".encode()).decode()
    c.request("GET", "/.well-known/jmap", headers={"Authorization": "Basic " + auth})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, r.getheader("Retry-After", "")


failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def refused(answer):
    m = RETRY.search(answer)
    return "[UNAVAILABLE]" in answer and m is not None and 1 <= int(m.group(1)) <= 60


# 1. The attacker's address: slowed down, then refused.
wrong = imap_logins(ATTACKER, [(user, f"wrong{i}") for i in range(3)])
check(all("AUTHENTICATIONFAILED" in a for a, _ in wrong), f"3 wrong passwords: plain failures {wrong}")
times = [t for _, t in wrong]
# The answers wait 0, 0.25 and 0.5 s before the reply, on top of the
# password check itself. Each answer took at least its wait: differences
# between answers are not compared, since on a loaded machine the check's
# own time varies by more than a tenth of a second (a CI run saw 0.06,
# 0.37 and 0.55 s).
check(times[1] >= 0.25 and times[2] >= 0.5,
      f"each failure answered more slowly than the one before: {['%.2f' % t for t in times]} s")
[(answer, _)] = imap_logins(ATTACKER, [(user, password)])
check(refused(answer), f"then {ATTACKER} is refused for {user}, the right password too: {answer}")
answer = smtp_auth(ATTACKER, user, password)
check(answer.startswith("454 4.7.0") and RETRY.search(answer) is not None, f"SMTP AUTH from {ATTACKER}: {answer}")
status, retry = jmap_session(ATTACKER, user, password)
check(status == 429 and retry.isdigit() and 1 <= int(retry) <= 60, f"JMAP from {ATTACKER}: {status} Retry-After {retry!r}")

# 2. The owner's address, meanwhile: no failures there, so no delay.
[(answer, took)] = imap_logins(OWNER, [(user, password)])
# At once: a right password never waits (a failure of USER would now wait
# 1 s, for its 3 failures from the other address).
check(answer.startswith("a0 OK") and took < 1.0, f"IMAP LOGIN from {OWNER} works at once: {answer} ({took:.2f} s)")
answer = smtp_auth(OWNER, user, password)
check(answer.startswith("235"), f"SMTP AUTH from {OWNER}: {answer}")
status, _ = jmap_session(OWNER, user, password)
check(status == 200, f"JMAP from {OWNER}: {status}")

# 3. One address guessing over accounts: refused past the per-address
# limit, for an account it failed only twice for.
spray = imap_logins(SPRAYER, [(other, "guess1"), (other, "guess2"), ("nobody@limits.test", "x")])
spray += imap_logins(SPRAYER, [("nobody@limits.test", "y")])
check(all("AUTHENTICATIONFAILED" in a for a, _ in spray), f"4 wrong logins from {SPRAYER}: plain failures")
[(answer, _)] = imap_logins(SPRAYER, [(other, password)])
check(refused(answer), f"then {SPRAYER} is refused, for {other} too: {answer}")
[(answer, _)] = imap_logins(OWNER, [(other, password)])
check(answer.startswith("a0 OK"), f"{other} still logs in from {OWNER}: {answer}")

print("login limits: ok" if not failures else f"login limits: {len(failures)} failed")
sys.exit(1 if failures else 0)
