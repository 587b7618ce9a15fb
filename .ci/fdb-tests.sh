#!/usr/bin/env bash
# The tests that run a second time on FoundationDB: what .ci/run runs after
# `eval "$(.ci/fdb.sh start)"`, and what a developer runs the same way.
#
#   eval "$(.ci/fdb.sh start)" && MESHMAIL_TEST_STORE=fdb .ci/fdb-tests.sh
#
# The same test functions as the SQLite pass (the backend is a parameter:
# KvConfig::for_tests), not copies. Left out, because they test SQLite
# itself: conformance_sqlite (its FDB twin is conformance_fdb), wal_runs,
# and the smtp test of SQLite's WAL timings. Node tests: SMTP in, IMAP
# read-back and IDLE, JMAP, outbound queue, quarantine, crash recovery,
# the mesh (leases, failover), big mailboxes, ops/status, FDB's limits
# (fdb_limits), `migrate` from Dovecot (about 20 s), `up --store fdb` (up_fdb), a rolling upgrade
# (rolling_upgrade) and a cluster killed and
# restarted under SMTP (fdb_outage, on a private cluster of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MESHMAIL_FDB_CLUSTER_FILE:?run eval \"\$(.ci/fdb.sh start)\" first}"
if [[ "${MESHMAIL_TEST_STORE:-}" != fdb ]]; then
    echo "MESHMAIL_TEST_STORE=fdb is not set: these tests would run on SQLite" >&2
    exit 2
fi

log() { printf '\n=== FoundationDB: %s (%s)\n' "$*" "$(date +%T)"; }

# The issue's sizes for the big operations (200,000 acceptances).
export MESHMAIL_BIG_OPS=full
# The three-process cluster's fdbserver kills: a short version here (about
# 40 s); 20, the default, by hand.
export FDB_PROCESS_KILLS="${FDB_PROCESS_KILLS:-8}"

log "storage: the KV conformance suite, the model, the ledger, blobs, big operations"
cargo test -p meshmail-storage --features fdb --lib \
    --test conformance_fdb --test ledger_verify --test unindexed_rows \
    --test mailbox_counters --test message_rows --test blob_local --test blob_s3 \
    --test big_operations --test email_origins --test mailbox_attributes --test backup_moves --no-fail-fast

# One invocation for actors, mesh and node: storage, actors and mesh are
# compiled once with the node's features instead of once more for these two.
log "actors, mesh, node: compactor, leases and fencing; SMTP, IMAP, POP3, ManageSieve, JMAP, IDLE, outbound, quarantine, crash, mesh, ops, Sieve"
cargo test -p meshmail-actors -p meshmail-mesh -p meshmail-node --features meshmail-node/fdb \
    --test compactor --test leases \
    --test smtp --test imap --test pop3 --test managesieve --test jmap --test jmap_sieve --test jmap_mesh --test jmap_email_ids --test jmap_rfc8621 --test outbound \
    --test quarantine --test crash --test mesh --test big_mailbox --test imap_dovecot \
    --test imap_state --test ops --test vacation --test sieve --test account_delete --test export_import --test migrate --test backup --test fdb_limits --test up_fdb --test fdb_outage --test commit_unknown --test rolling_upgrade \
    --no-fail-fast -- --skip a_commit_times_its_wal_write_and_fsync_apart
