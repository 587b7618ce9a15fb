#!/usr/bin/env python3
"""Failed-login limits across connections, as an attacker meets them.

usage: login_limits.py IMAP_ADDR SMTP_SUBMISSION_ADDR HTTP_ADDR USER PASSWORD VICTIM
The node runs with [auth] failures_per_ip_max = 5, failures_per_account_max = 8.

1. From 127.0.0.1: 10 connections x 3 wrong IMAP LOGINs. From the 6th
   failure on, every answer is NO [UNAVAILABLE] "try again in N s", and
   then the right password is refused too, over IMAP, SMTP AUTH (454 4.7.0)
   and JMAP (429 + Retry-After).
2. Per account, from many IPs: wrong passwords for VICTIM from 127.0.0.2..
   127.0.0.9, one each, then the right one from a fresh IP: refused.
"""
import base64
import re
import socket
import sys
import urllib.error
import urllib.request

imap_addr, smtp_addr, http_addr, user, password, victim = sys.argv[1:7]


def hostport(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


def imap_login(u, p, source="127.0.0.1"):
    s = socket.create_connection(hostport(imap_addr), timeout=30, source_address=(source, 0))
    f = s.makefile("rb")
    f.readline()  # greeting
    s.sendall(f'a LOGIN "{u}" "{p}"\r\n'.encode())
    while True:
        line = f.readline().decode()
        if line.startswith("a "):
            s.close()
            return line.strip()


def imap_session(source, attempts):
    s = socket.create_connection(hostport(imap_addr), timeout=30, source_address=(source, 0))
    f = s.makefile("rb")
    f.readline()
    out = []
    for i in range(attempts):
        s.sendall(f'a{i} LOGIN "{user}" "wrong{i}"\r\n'.encode())
        while True:
            line = f.readline().decode()
            if line.startswith(f"a{i} "):
                out.append(line.strip())
                break
            if not line:
                return out
    s.close()
    return out


failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


RETRY = re.compile(r"try again in (\d+) s")

answers = []
for c in range(10):
    answers += imap_session("127.0.0.1", 3)
check(len(answers) == 30, f"30 wrong LOGINs over 10 connections answered ({len(answers)})")
check(all("AUTHENTICATIONFAILED" in a for a in answers[:5]), "the first 5 are plain failures")
limited = answers[5:]
check(all("[UNAVAILABLE]" in a and RETRY.search(a) for a in limited), f"the other 25 are refused with a retry time: {limited[:1]}")

right = imap_login(user, password)
m = RETRY.search(right)
check("NO [UNAVAILABLE]" in right and m and 1 <= int(m.group(1)) <= 60, f"then the right password is refused too: {right}")

s = socket.create_connection(hostport(smtp_addr), timeout=30)
f = s.makefile("rb")


def smtp(cmd=None):
    if cmd:
        s.sendall(cmd.encode() + b"\r\n")
    while True:
        line = f.readline().decode()
        if line[3:4] != "-":
            return line.strip()


smtp()
smtp("EHLO attacker.test")
token = base64.b64encode(f"\0{user}\0{password}".encode()).decode()
reply = smtp(f"AUTH PLAIN {token}")
check(reply.startswith("454 4.7.0") and RETRY.search(reply), f"SMTP AUTH with the right password: {reply}")
s.close()

req = urllib.request.Request(f"http://{http_addr}/.well-known/jmap")
req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
try:
    urllib.request.urlopen(req, timeout=30)
    check(False, "JMAP with the right password is refused")
except urllib.error.HTTPError as e:
    ra = e.headers.get("Retry-After", "")
    check(e.code == 429 and ra.isdigit() and 1 <= int(ra) <= 60, f"JMAP answers 429 with Retry-After ({e.code}, {ra!r})")

# Per account, spread over IPs: each IP fails once.
spread = [imap_login(victim, "guess", source=f"127.0.0.{i}") for i in range(2, 10)]
check(all("AUTHENTICATIONFAILED" in a for a in spread), "8 guesses from 8 IPs are plain failures")
after = imap_login(victim, password, source="127.0.0.20")
check("[UNAVAILABLE]" in after, f"then the account is locked, from any IP: {after}")

sys.exit(1 if failures else 0)
