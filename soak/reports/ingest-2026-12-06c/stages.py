#!/usr/bin/env python3
"""Per-commit stages of one bench window from a node's /metrics text (a
`--metrics-dir` file): SQLite's apply, and inside it the WAL run's write,
the fsync and the rest (B-tree work); the batch transaction's body, the
RCPT read, the queue wait, the background checkpoints.
Usage: stages.py FILE.prom..."""
import re, sys

for path in sys.argv[1:]:
    d = {}
    for line in open(path):
        m = re.match(r"(\S+?)(\{[^}]*\})?\s+(\S+)$", line.strip())
        if m and not line.startswith("#"):
            try:
                d[(m.group(1), m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass

    def h(name, label=""):
        return d.get((name + "_sum", label), 0.0), max(d.get((name + "_count", label), 0.0), 1e-9)

    msgs = h("meshmail_smtp_accept_seconds", '{listener="smtp"}')[1]
    a, w, s = (h(f"meshmail_kv_sqlite_{n}_seconds") for n in ("apply", "wal_write", "wal_sync"))
    body = h("meshmail_kv_txn_seconds", '{op="deliver_batch"}')
    rcpt = h("meshmail_kv_txn_seconds", '{op="smtp_rcpt"}')
    wait = h("meshmail_shard_queue_wait_seconds")
    ckpt = h("meshmail_kv_sqlite_checkpoint_seconds", '{where="background"}')
    print(
        f"{path}: per commit ms: apply {a[0] / a[1] * 1e3:.3f} = write {w[0] / w[1] * 1e3:.3f}"
        f" + fsync {s[0] / s[1] * 1e3:.3f} + B-tree {(a[0] - w[0] - s[0]) / a[1] * 1e3:.3f};"
        f" batch body {body[0] / body[1] * 1e3:.3f}; RCPT read {rcpt[0] / rcpt[1] * 1e6:.0f} us;"
        f" queue wait {wait[0] / wait[1] * 1e3:.2f} ms; background checkpoints {ckpt[0] / msgs * 1e6:.0f} us/msg"
    )
