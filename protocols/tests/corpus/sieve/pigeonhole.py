#!/usr/bin/env python3
"""Runs Pigeonhole's sieve-test (Debian dovecot-sieve) on every script x
message pair of this corpus and prints one line per pair:

    script<TAB>message<TAB>action; action; ...

with the actions normalised the way protocols/tests/sieve_differential.rs
normalises meshmail's (sorted; see normalise()). `compile-error` when the
script does not compile, `error` (plus the implicit keep) when it fails
at run time. Envelopes come from messages/envelopes.txt.

sieve-test refuses to run as root, so a throwaway config maps mail access
to uid/gid 65534; TZ=UTC makes "local time" the same as meshmail's.
"""
import concurrent.futures
import os
import shutil
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def config(home):
    path = os.path.join(home, "sieve-test.conf")
    with open(path, "w") as f:
        f.write(
            "mail_uid = 65534\nmail_gid = 65534\nfirst_valid_uid = 1\nfirst_valid_gid = 1\n"
            f"mail_location = maildir:{home}/Maildir\n"
            "plugin {\n"
            "  sieve_extensions = +editheader +vacation-seconds\n"
            f"  sieve_dir = {home}/include\n"
            "  sieve_vacation_min_period = 0\n"
            "}\n"
        )
    return path


def normalise(out):
    """The 'Performed actions' and 'Implicit keep' sections, as strings."""
    if "failed to compile" in out:
        return ["compile-error"]
    actions = []
    lines = out.splitlines()
    in_message = False
    current = None
    for line in lines:
        if line.startswith("START MESSAGE"):
            in_message = True
            continue
        if line.startswith("END MESSAGE"):
            in_message = False
            continue
        if in_message:
            continue
        m = re.match(r"^ \* (.*)$", line)
        if m:
            current = {"what": m.group(1), "flags": [], "create": False}
            actions.append(current)
            continue
        if current and "+ add IMAP flags:" in line:
            current["flags"] = line.split(":", 1)[1].split()
        if current and "+ create mailbox" in line:
            current["create"] = True
        if current and "=> seconds :" in line:
            current["seconds"] = line.split(":", 1)[1].strip()
    result = []
    for a in actions:
        w = a["what"]
        flags = " ".join(sorted(f.lower() for f in a["flags"]))
        if w.startswith("store message in folder: "):
            box = w.split(": ", 1)[1]
            result.append(f"store {box} [{flags}]" + (" create" if a["create"] else ""))
        elif w.startswith("redirect message to: "):
            result.append("redirect " + w.split(": ", 1)[1].strip("<>").lower())
        elif w.startswith("reject message with reason: "):
            result.append("reject " + w.split(": ", 1)[1])
        elif w == "discard":
            result.append("discard")
        elif w == "track duplicate":
            continue  # Bookkeeping of the duplicate test, not a delivery action.
        elif w.startswith("send vacation message"):
            result.append("vacation " + a.get("seconds", "?"))
        else:
            result.append("other " + w)
    if "final result: failed" in out:
        result.append("error")
        if "resolved with successful implicit keep" in out:
            result.append("store INBOX []")
    return sorted(set(result))


def run(script, message, envelope, home, conf):
    sender, rcpt = envelope
    # No -e: that would execute the actions (store into a maildir, send
    # the vacation reply); without it sieve-test only prints them.
    cmd = ["sieve-test", "-c", conf, "-f", sender, "-r", rcpt, "-a", rcpt,
           os.path.join(home, "scripts", script), os.path.join(HERE, "messages", message)]
    env = dict(os.environ, HOME=home, TZ="UTC")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    out = p.stdout + p.stderr
    return script, message, normalise(out)


def main():
    envelopes = {}
    with open(os.path.join(HERE, "messages", "envelopes.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and not line.startswith("#"):
                envelopes[parts[0]] = ("" if parts[1] == "<>" else parts[1], parts[2])
    scripts = sorted(s for s in os.listdir(os.path.join(HERE, "scripts")) if s.endswith(".sieve"))
    messages = sorted(m for m in os.listdir(os.path.join(HERE, "messages")) if m.endswith(".eml"))
    home = tempfile.mkdtemp(prefix="meshmail-sieve-")
    os.chmod(home, 0o777)
    # Copies, so sieve-test's compiled .svbin files land outside the tree.
    shutil.copytree(os.path.join(HERE, "scripts"), os.path.join(home, "scripts"))
    shutil.copytree(os.path.join(HERE, "include"), os.path.join(home, "include"))
    subprocess.run(["chmod", "-R", "a+rwX", home], check=True)
    conf = config(home)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        jobs = [pool.submit(run, s, m, envelopes.get(m, ("sender@example.net", "me@example.org")), home, conf)
                for s in scripts for m in messages]
        for j in jobs:
            s, m, actions = j.result()
            print(f"{s}\t{m}\t{'; '.join(actions)}")


if __name__ == "__main__":
    sys.exit(main())
