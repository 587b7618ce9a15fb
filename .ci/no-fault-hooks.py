#!/usr/bin/env python3
"""A plain build of `meshmail` (no dev-dependencies, so no `fault-hooks`
feature: the same features as a release build) must have no fault
endpoints, even when started with MESHMAIL_FAULT_HOOKS=1.

usage: .ci/no-fault-hooks.py PATH/TO/meshmail
Exits 0 when every fault endpoint answers 404, 1 otherwise.
"""
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

ENDPOINTS = ["/admin/faults/drop-links", "/admin/faults/partition?ms=10", "/admin/faults/fence-probe?shard=0&epoch=1", "/admin/faults/kill-supervisor"]


def main() -> int:
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="meshmail-nohooks-") as data:
        args = [binary, "--data-dir", data, "serve"]
        for flag in ["--smtp", "--submission", "--submissions", "--lmtp", "--http", "--imap", "--imaps"]:
            args += [flag, "127.0.0.1:0"]
        env = dict(os.environ, MESHMAIL_FAULT_HOOKS="1")
        node = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)
        try:
            ready = node.stdout.readline()
            if not ready.startswith("meshmail ready:"):
                print(f"node did not start: {ready!r}")
                return 1
            eps = dict(kv.split("=", 1) for kv in ready.split() if "=" in kv)
            failures = 0
            for path in ENDPOINTS:
                req = urllib.request.Request(f"http://{eps['http']}{path}", method="POST", data=b"")
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        status = r.status
                except urllib.error.HTTPError as e:
                    status = e.code
                ok = status == 404
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} POST {path} -> {status} (want 404)")
            return 1 if failures else 0
        finally:
            node.terminate()
            node.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
