R='/work/wt-ingest/'
def edit(p, old, new):
    s=open(R+p).read(); assert old in s, (p, old[:60]); s=s.replace(old,new,1); open(R+p,'w').write(s)
edit('docs/ARCHITECTURE.md', """ranges checked at commit against a 10 s log of committed write ranges), and a""", """ranges checked at commit against a 10 s log of committed write ranges, one
`commit_log` row per commit), and a""")
edit('docs/ARCHITECTURE.md', """`model/` is the mail data model as typed functions over a `Txn`; `blob.rs`""", """`model/` is the mail data model as typed functions over a `Txn` (message
rows in the versioned binary form of `model/message_codec.rs`, JSON rows of
older stores still read); `blob.rs`""")
edit('docs/ARCHITECTURE.md', """2. The body goes to the blob store: `BlobStore::prepare` reads the blob's
   generation, then writes `blobs/<sha256>` with put-if-absent (or keeps it to
   inline if ≤ the inline threshold).""", """2. The body goes to the blob store: `BlobStore::prepare` reads the blob's
   generation, then writes `blobs/<sha256>` with put-if-absent; a body ≤ the
   inline threshold is kept to be inlined, with no transaction of its own
   (its bytes travel in the delivery batch, which the inline sweep conflicts
   with).""")
