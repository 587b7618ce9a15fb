#!/usr/bin/env python3
"""What the interior cells of meshmail's `kv` B-tree hold: a snapshot of the
file (SQLite's backup API, so the WAL's pages are in it), then a walk of
the `kv` index B-tree's interior pages, counting each divider cell's bytes
by the key's subspace (the first element of its FoundationDB tuple).
Usage: interior.py LIVE_FILE SNAPSHOT_FILE"""
import collections, sqlite3, struct, sys

live, snap = sys.argv[1], sys.argv[2]
src = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
dst = sqlite3.connect(snap)
src.backup(dst)
dst.close()
src.close()

conn = sqlite3.connect(snap)
page_size = conn.execute("PRAGMA page_size").fetchone()[0]
roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_schema WHERE type IN ('table','index')"))
conn.close()
f = open(snap, "rb")

def page(n):
    f.seek((n - 1) * page_size)
    return f.read(page_size)

def varint(b, i):
    v = 0
    for k in range(9):
        c = b[i + k]
        if k == 8:
            return (v << 8) | c, i + 9
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + k + 1

def subspace(key):
    if key[:1] == b"\x02":
        end = key.index(b"\x00", 1)
        return key[1:end].decode("latin-1")
    return f"type{key[:1].hex()}"

def walk(root, name):
    by_sub = collections.Counter()
    bytes_sub = collections.Counter()
    levels = collections.Counter()
    leaf_cells = leaves = 0
    leaf_sub = collections.Counter()
    leaf_bytes = collections.Counter()
    stack = [(root, 0)]
    while stack:
        n, depth = stack.pop()
        p = page(n)
        off = 100 if n == 1 else 0
        kind = p[off]
        ncell = struct.unpack(">H", p[off + 3:off + 5])[0]
        if kind in (0x0A, 0x0D):
            leaves += 1
            leaf_cells += ncell
            if kind == 0x0A:
                for c in range(ncell):
                    ptr = struct.unpack(">H", p[off + 8 + 2 * c:off + 10 + 2 * c])[0]
                    size, i = varint(p, ptr)
                    rec = p[i:i + min(size, page_size)]
                    hlen, j = varint(rec, 0)
                    st, j = varint(rec, j)
                    klen = (st - 12) // 2 if st >= 12 and st % 2 == 0 else 0
                    s = subspace(rec[hlen:hlen + klen])
                    leaf_sub[s] += 1
                    leaf_bytes[s] += size
            continue
        levels[depth] += 1
        hdr = 12
        stack.append((struct.unpack(">I", p[off + 8:off + 12])[0], depth + 1))
        for c in range(ncell):
            ptr = struct.unpack(">H", p[off + hdr + 2 * c:off + hdr + 2 * c + 2])[0]
            child = struct.unpack(">I", p[ptr:ptr + 4])[0]
            stack.append((child, depth + 1))
            if kind != 0x02:
                continue
            size, i = varint(p, ptr + 4)
            rec = p[i:i + min(size, page_size)]
            hlen, j = varint(rec, 0)
            st, j = varint(rec, j)
            klen = (st - 12) // 2 if st >= 12 and st % 2 == 0 else 0
            key = rec[hlen:hlen + klen]
            s = subspace(key)
            by_sub[s] += 1
            bytes_sub[s] += size
    print(f"{name}: interior pages by level {dict(sorted(levels.items()))}, leaves {leaves}, leaf cells {leaf_cells}")
    total = sum(by_sub.values())
    tb = sum(bytes_sub.values())
    if total:
        print(f"  divider cells {total}, mean {tb / total:.0f} B; fan-out ~{(total + sum(levels.values())) / max(1, sum(levels.values())):.0f}")
        for s, c in by_sub.most_common():
            print(f"  {s:<8} {c:>7} cells ({100 * c / total:5.1f} %), mean {bytes_sub[s] / c:6.0f} B, {100 * bytes_sub[s] / tb:5.1f} % of bytes")

    lt = sum(leaf_sub.values())
    lb = sum(leaf_bytes.values())
    print(f"  leaf cells by subspace ({lt}, mean {lb / max(1, lt):.0f} B):")
    for s, c in leaf_sub.most_common():
        print(f"  {s:<8} {c:>8} cells ({100 * c / lt:5.1f} %), mean {leaf_bytes[s] / c:6.0f} B, {100 * leaf_bytes[s] / lb:5.1f} % of bytes")

walk(roots["kv"], "kv")
