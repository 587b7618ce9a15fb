#!/usr/bin/env python3
"""Which key families the pages of a delivery commit belong to.

    wal_pages.py MESHMAIL_BINARY PREFILL MESSAGES [DATA_DIR]

Sets up 16 accounts, starts a node, stores PREFILL messages over SMTP (16
sessions, one mailbox each, ~1 KiB messages like `bench smtp`), restarts the
node with checkpoints held off (`checkpoint_after_pages` = 1,000,000), stores
MESSAGES more, and kills it with SIGKILL so that the WAL keeps every frame
of those commits. Then it reads the WAL: for each commit, the distinct pages
written, each attributed to the key family whose tuple-encoded subspace name
(`\\x02name\\x00`) occurs most often in it ("interior" for interior B-tree
pages, "heap/body" for pages of message bodies). Analysis tool, not a test.
"""
import collections
import os
import signal
import smtplib
import struct
import subprocess
import sys
import threading

if len(sys.argv) < 4:
    sys.exit(__doc__)
BIN, PREFILL, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
D = sys.argv[4] if len(sys.argv) > 4 else "/tmp/wal-pages-data"
SESSIONS = 16
FAMILIES = [b"mbox", b"msg", b"msum", b"mdat", b"unsn", b"chg", b"thrm", b"thrx", b"bref",
            b"ldg", b"lease", b"nseen", b"idem", b"cnt", b"mbxn", b"acct", b"try"]
BODY = ("x" * 70 + "\r\n") * 13


def cli(*args, stdin=None):
    subprocess.run([BIN, "--data-dir", D, *args], input=stdin, check=True, capture_output=True)


def start(config):
    p = subprocess.Popen([BIN, "--data-dir", D, "--config", config, "serve", "--smtp", "127.0.0.1:0",
                          "--submission", "off", "--submissions", "off", "--lmtp", "off",
                          "--http", "127.0.0.1:0", "--imap", "127.0.0.1:0", "--imaps", "off"],
                         stdout=subprocess.PIPE, env={**os.environ, "MESHMAIL_LOG": "warn"})
    ready = p.stdout.readline().decode()
    endpoints = dict(kv.split("=", 1) for kv in ready.split() if "=" in kv)
    host, port = endpoints["smtp"].rsplit(":", 1)
    return p, host, int(port)


def load(host, port, count, tag):
    def worker(t):
        s = smtplib.SMTP(host, port)
        for j in range(count // SESSIONS):
            mid = f"{tag}-{t}-{j}"
            s.sendmail("load@remote.example", [f"u{t}@bench.example"],
                       f"Subject: bench {mid}\r\nMessage-ID: <bench{mid}@remote.example>\r\n\r\n{BODY}")
        s.quit()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(SESSIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def family(page):
    counts = collections.Counter({f: page.count(b"\x02" + f + b"\x00") for f in FAMILIES})
    best, n = counts.most_common(1)[0]
    if n == 0:
        return "heap/body" if page.count(b"x" * 64) > 2 else "other"
    return best.decode()


def commits_of(wal):
    page_size = struct.unpack(">I", wal[8:12])[0]
    salt = wal[16:24]
    commits, current, off = [], [], 32
    while off + 24 + page_size <= len(wal):
        header = wal[off:off + 24]
        if header[8:16] != salt:
            break
        pgno, commit_size = struct.unpack(">II", header[:8])
        current.append((pgno, wal[off + 24:off + 24 + page_size]))
        if commit_size:
            commits.append(current)
            current = []
        off += 24 + page_size
    return commits


def main():
    subprocess.run(["rm", "-rf", D], check=True)
    os.makedirs(D)
    normal, held = os.path.join(D, "normal.toml"), os.path.join(D, "held.toml")
    open(normal, "w").write('[store]\nkind = "sqlite"\n')
    open(held, "w").write('[store]\nkind = "sqlite"\ncheckpoint_after_pages = 1000000\n')
    cli("domain", "add", "bench.example")
    for i in range(SESSIONS):
        cli("account", "add", f"u{i}@bench.example", "--password-stdin", stdin=b"pw-pw-pw-pw\n")
    if PREFILL:
        p, host, port = start(normal)
        load(host, port, PREFILL, "prefill")
        p.send_signal(signal.SIGTERM)
        p.wait()
    p, host, port = start(held)
    load(host, port, N, "measured")
    p.send_signal(signal.SIGKILL)
    p.wait()
    wal_name = next(f for f in os.listdir(D) if f.endswith("-wal"))
    commits = commits_of(open(os.path.join(D, wal_name), "rb").read())
    # Each commit as the kinds of its distinct pages, each page classified once.
    kinds = []
    for c in commits:
        distinct = {pgno: data for pgno, data in c}
        kinds.append(["interior" if data[100 if pgno == 1 else 0] in (2, 5) else family(data)
                      for pgno, data in distinct.items()])
    delivery_commits = [k for k in kinds if "ldg" in k]
    per_commit = N / len(delivery_commits)
    by = collections.Counter(kind for k in delivery_commits for kind in k)
    pages = sum(by.values())
    n = len(delivery_commits)
    print(f"prefill {PREFILL}, measured {N} messages in {n} delivery commits "
          f"(~{per_commit:.2f} deliveries each; {len(commits)} commits in all)")
    print(f"distinct pages per delivery commit {pages / n:.1f}, per delivery {pages / N:.2f}")
    print("| family | pages per commit | per delivery | share |")
    print("|---|---:|---:|---:|")
    for k, v in by.most_common():
        print(f"| {k} | {v / n:.2f} | {v / N:.2f} | {100 * v / pages:.1f} % |")
    subprocess.run(["rm", "-rf", D], check=True)


main()
