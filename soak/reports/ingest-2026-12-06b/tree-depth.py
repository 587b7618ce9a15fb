#!/usr/bin/env python3
"""Depth and size of each B-tree of a live meshmail SQLite file (read-only,
through SQLite's dbstat table): the levels a point read or an insert
descends. Usage: tree-depth.py FILE [label]"""
import sqlite3, sys, time

path = sys.argv[1]
label = sys.argv[2] if len(sys.argv) > 2 else ""
conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
started = time.time()
rows = conn.execute(
    """SELECT name,
              max(length(path) - length(replace(path, '/', ''))) AS depth,
              sum(pagetype = 'leaf') AS leaves,
              sum(pagetype = 'internal') AS interior,
              sum(pagetype = 'overflow') AS overflow,
              sum(ncell) FILTER (WHERE pagetype = 'leaf') AS cells
       FROM dbstat GROUP BY name ORDER BY leaves DESC"""
).fetchall()
print(f"{label} {path} ({time.time() - started:.1f} s)")
print(f"{'tree':<28} {'depth':>5} {'leaf pages':>11} {'interior':>9} {'overflow':>9} {'leaf cells':>11}")
for name, depth, leaves, interior, overflow, cells in rows:
    if leaves or interior:
        print(f"{name:<28} {depth:>5} {leaves:>11} {interior:>9} {overflow:>9} {cells or 0:>11}")
