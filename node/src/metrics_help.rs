//! The HELP text of every metric the node exports, in one table, described
//! to the recorder at start (`describe_*!`), so `/metrics` carries a
//! `# HELP` line per family and `promtool check metrics` finds nothing.
//! The metrics are emitted where the work happens (every crate); their
//! descriptions live here, where an operator reading them finds them all.
//! A test walks the workspace's sources and fails on a metric without one.

/// How a metric is recorded (its `describe_*!` macro).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

use Kind::{Counter as C, Gauge as G, Histogram as H};

/// (name, kind, help). Units are in the names (`_seconds`, `_bytes`,
/// `_total`); the texts say what is counted or timed, per which label.
#[rustfmt::skip]
pub const HELP: &[(&str, Kind, &str)] = &[
    // Actors and sessions.
    ("meshmail_actor_restarts_total", C, "Supervised actors restarted after a failure, by actor kind."),
    ("meshmail_actors_live", G, "Actors running in this node, by kind."),
    ("meshmail_session_panics_total", C, "Protocol sessions ended by a panic that was contained."),
    ("meshmail_session_parks_total", C, "Idle IMAP sessions parked (their state folded to save memory)."),
    ("meshmail_sessions_parked", G, "IMAP sessions parked now."),
    ("meshmail_node_vital_task_ended_total", C, "Vital node tasks that ended (the node then reports itself unhealthy), by task."),
    ("meshmail_node_generation", G, "This node's generation (grows at every start)."),
    ("meshmail_store_format", G, "The store format this node writes now (the store's, as last read)."),
    ("meshmail_store_format_switches_total", C, "Cluster-wide store format switches this node made (once every node supported the next format)."),
    ("meshmail_allocator_allocated_bytes", G, "Bytes the node's allocator (jemalloc) has handed out."),
    ("meshmail_allocator_active_bytes", G, "Bytes in the allocator's active pages."),
    ("meshmail_allocator_resident_bytes", G, "Bytes of the allocator's pages resident in memory."),
    ("meshmail_allocator_retained_bytes", G, "Bytes the allocator keeps mapped but returned to the OS."),
    ("meshmail_clock_offset_seconds", G, "Injected wall-clock offset (fault hooks only; 0 otherwise)."),
    ("meshmail_connections_refused_total", C, "Client connections refused at accept (over the connection limit), by listener."),
    ("meshmail_http_connections", G, "Open HTTP connections."),
    ("meshmail_http_connections_refused_total", C, "HTTP connections refused over the connection limit."),
    ("meshmail_https_handshake_failures_total", C, "HTTPS connections whose TLS handshake failed."),
    // Authentication.
    ("meshmail_auth_total", C, "Password checks, by result (ok, failed, rate_limited, unavailable)."),
    ("meshmail_auth_cache_hits_total", C, "Password checks answered from the verified-credential cache."),
    ("meshmail_auth_rate_limited_total", C, "Logins refused by the failed-login limit, by what was limited (ip: the client address; account_ip: the account from that address)."),
    ("meshmail_auth_delayed_total", C, "Failed logins answered after a delay, by the failures that set it (ip, account_ip, account: from anywhere)."),
    ("meshmail_auth_delay_seconds", H, "Delay of one failed login's answer (doubling per earlier failure from 0.25 s, at most 5 s)."),
    ("meshmail_auth_hash_seconds", H, "Time of one argon2 password verification."),
    ("meshmail_auth_hash_queue_depth", G, "Password verifications waiting for a hashing thread."),
    // Store: KV.
    ("meshmail_kv_txn_seconds", H, "Whole transaction time (reads, writes and commit), by operation."),
    ("meshmail_kv_commit_seconds", H, "Commit time of read-write transactions, by operation."),
    ("meshmail_kv_txn_written_bytes", H, "Bytes written per transaction (keys and values), by operation."),
    ("meshmail_kv_retries_total", C, "Transaction attempts retried, by operation and reason (conflict, commit_unknown, too_old...)."),
    ("meshmail_kv_gave_up_total", C, "Transactions given up after the retry budget, by operation and reason."),
    ("meshmail_kv_writer_lock_wait_seconds", H, "Time a commit waited for the store's writer turn (SQLite)."),
    ("meshmail_kv_sqlite_apply_seconds", H, "Time SQLite took to apply one group of commits."),
    ("meshmail_kv_sqlite_group_commit_members", H, "Transactions applied together in one SQLite commit."),
    ("meshmail_kv_sqlite_commit_pages", H, "WAL pages written per SQLite commit."),
    ("meshmail_kv_sqlite_wal_write_seconds", H, "Time of one commit's WAL write (SQLite)."),
    ("meshmail_kv_sqlite_wal_sync_seconds", H, "Time of one commit's WAL fsync (SQLite)."),
    ("meshmail_kv_sqlite_wal_pages", G, "Pages in the SQLite WAL now."),
    ("meshmail_kv_sqlite_wal_runs_total", C, "Commits whose WAL frames were written in one run."),
    ("meshmail_kv_sqlite_wal_run_bytes_total", C, "Bytes written in coalesced WAL runs."),
    ("meshmail_kv_sqlite_wal_writes_total", C, "WAL write calls made by SQLite commits."),
    ("meshmail_kv_sqlite_wal_restarts_total", C, "Times the checkpoint thread made the WAL start over."),
    ("meshmail_kv_sqlite_restarts_postponed_total", C, "WAL restarts postponed because a reader held an old snapshot."),
    ("meshmail_kv_sqlite_checkpoints_total", C, "WAL checkpoints run."),
    ("meshmail_kv_sqlite_checkpoints_partial_total", C, "WAL checkpoints that could not copy every frame (a reader held them)."),
    ("meshmail_kv_sqlite_checkpoint_seconds", H, "Time of one WAL checkpoint."),
    ("meshmail_kv_sqlite_busy_fast_failures_total", C, "Commits failed at once behind another that waited out SQLite's busy timeout."),
    ("meshmail_kv_sqlite_heap_bytes", G, "SQLite's own heap (page caches); 0 on FoundationDB."),
    // Store: blobs, ledger, index, compaction.
    ("meshmail_blob_put_bytes_total", C, "Body bytes written to the blob store."),
    ("meshmail_blob_put_seconds", H, "Time of one body write to the blob store."),
    ("meshmail_blob_get_seconds", H, "Time of one body read from the blob store."),
    (
        "meshmail_blob_prefix_reads_total",
        C,
        "Bodies read only up to the end of their header section (a FETCH of headers alone).",
    ),
    ("meshmail_blob_sweep_deleted_total", C, "Unreferenced bodies deleted by the blob sweep."),
    ("meshmail_blob_sweep_freed_bytes_total", C, "Bytes freed by the blob sweep."),
    ("meshmail_ledger_entries_total", C, "Acceptances recorded in the accept ledger, by final state."),
    ("meshmail_store_rows_indexed_total", C, "Delivered message rows given their deferred index keys."),
    ("meshmail_store_index_seconds", H, "Time of one deferred-indexing pass of a mailbox."),
    ("meshmail_compactor_steps_total", C, "Bounded compaction steps run."),
    ("meshmail_compactor_change_logs_trimmed_total", C, "Mailbox change logs trimmed by the compactor."),
    ("meshmail_quarantined_total", C, "Deliveries or commands moved to the quarantine after repeated failures."),
    // Delivery and the write path.
    ("meshmail_delivery_seconds", H, "Time from a delivery request to its commit."),
    ("meshmail_delivery_deadline_passed_total", C, "Deliveries left out of a batch because their sender was already answered 4xx."),
    ("meshmail_delivery_over_quota_total", C, "Deliveries refused because the account is over its quota."),
    ("meshmail_delivery_route_retries_total", C, "Deliveries re-routed because the shard owner changed."),
    ("meshmail_delivery_route_timeouts_total", C, "Deliveries whose forward to the shard owner timed out."),
    ("meshmail_delivery_stored_after_timeout_total", C, "Deliveries found stored after their sender was answered 4xx (a possible duplicate)."),
    ("meshmail_batch_deliveries", H, "Deliveries per commit batch."),
    ("meshmail_batcher_queue_depth", G, "Deliveries waiting for the commit batcher."),
    ("meshmail_ingest_parse_seconds", H, "Time to parse and summarize one incoming message."),
    ("meshmail_sieve_run_seconds", H, "Time of one delivery's Sieve run, store reads included."),
    ("meshmail_sieve_actions_total", C, "Actions Sieve scripts decided at delivery, by action."),
    ("meshmail_sieve_errors_total", C, "Sieve runs or actions that fell back to INBOX, by kind (budget, redirects, include, mailbox, loop, redirect, store, ...)."),
    ("meshmail_sieve_compiles_total", C, "Active scripts needed at delivery, by result: cached or compiled."),
    ("meshmail_vacation_replies_total", C, "Vacation auto-replies sent, by result."),
    ("meshmail_vacation_seconds", H, "Time of one vacation check and reply."),
    // Shards and leases.
    ("meshmail_shards_owned", G, "Shards whose lease this node holds."),
    ("meshmail_shards_served", G, "Shards whose actor runs on this node."),
    ("meshmail_shard_op_seconds", H, "Time of one shard actor operation, by operation."),
    ("meshmail_shard_queue_wait_seconds", H, "Time an operation waited in a shard actor's queue."),
    ("meshmail_shard_drain_seconds", H, "Time to drain a shard before handing it over."),
    ("meshmail_shard_hints_sent_total", C, "Change hints sent by shard actors to waiting sessions."),
    ("meshmail_shard_hints_dropped_total", C, "Change hints dropped (a full queue; clients re-read on their next poll)."),
    ("meshmail_lease_changes_total", C, "Shard lease acquisitions and releases by this node, by kind."),
    ("meshmail_lease_fenced_total", C, "Writes refused because their lease was stale (the fence worked)."),
    // Mesh.
    ("meshmail_mesh_links_up", G, "Mesh links to peers that are up."),
    ("meshmail_mesh_members_alive", G, "Mesh members this node sees alive."),
    ("meshmail_mesh_members_known", G, "Mesh members this node knows of."),
    ("meshmail_mesh_sessions_ready", G, "Remote actor sessions ready."),
    ("meshmail_mesh_member_events_total", C, "Membership changes seen, by kind (up, suspect, dead)."),
    ("meshmail_mesh_node_events_total", C, "Remote actor session events, by kind."),
    ("meshmail_mesh_false_suspicions_total", C, "Peers suspected and then heard from again."),
    ("meshmail_mesh_false_deaths_total", C, "Peers declared dead that came back with the same generation."),
    ("meshmail_mesh_detection_seconds", H, "Time from a peer's last sign of life to its declared death."),
    ("meshmail_mesh_takeover_seconds", H, "Time to take over a dead peer's shards."),
    ("meshmail_mesh_handoff_round_seconds", H, "Time of one shard hand-off round."),
    ("meshmail_mesh_lease_round_errors_total", C, "Lease rounds that failed (the store did not answer); retried next round."),
    ("meshmail_mesh_nodes_forgotten_total", C, "Nodes removed from the mesh by an operator."),
    ("meshmail_mesh_refused_total", C, "Mesh connections refused (bad certificate, stale generation...), by reason."),
    ("meshmail_mesh_rpc_seconds", H, "Time of one request to another node, by kind."),
    ("meshmail_mesh_rpc_busy_total", C, "Requests to another node refused because its queue was full."),
    ("meshmail_mesh_casts_dropped_total", C, "One-way messages to peers dropped (link down or queue full)."),
    ("meshmail_mesh_stalls_total", C, "Mesh links closed after their writer stalled."),
    ("meshmail_mesh_drain_deadline_missed_total", C, "Drains that did not finish within their deadline."),
    ("meshmail_remote_delivery_seconds", H, "Time of a delivery forwarded to the shard owner on another node."),
    ("meshmail_remote_errors_total", C, "Requests forwarded to another node that failed, by kind."),
    ("meshmail_remote_abandoned_total", C, "Requests forwarded to another node abandoned because membership declared that node dead (or a newer generation of it known) while they waited."),
    ("meshmail_remote_watched_accounts", G, "Accounts watched for other nodes' IDLE and push sessions."),
    // SMTP.
    ("meshmail_smtp_sessions_total", C, "SMTP/LMTP sessions accepted, by listener."),
    ("meshmail_smtp_commands_total", C, "SMTP commands received, by command."),
    ("meshmail_smtp_replies_total", C, "SMTP replies sent, by class (2xx, 4xx, 5xx)."),
    ("meshmail_smtp_accept_seconds", H, "Time from the end of DATA to the reply."),
    ("meshmail_smtp_data_bytes_total", C, "Message bytes received over SMTP/LMTP."),
    ("meshmail_smtp_timeouts_total", C, "SMTP sessions closed for inactivity."),
    ("meshmail_smtp_alias_expansions_total", C, "Recipients expanded through aliases."),
    ("meshmail_smtp_srs_rewrites_total", C, "Envelope senders rewritten with SRS for forwarding."),
    ("meshmail_smtp_rcpt_over_quota_total", C, "Recipients refused at RCPT because their account is at its quota."),
    ("meshmail_smtp_rcpt_store_timeouts_total", C, "RCPT answered 451 because the store did not answer within the delivery timeout."),
    ("meshmail_smtp_rcpt_cache_total", C, "RCPT cache lookups, by result (hit, miss)."),
    ("meshmail_smtp_rcpt_cache_entries", G, "Addresses in the RCPT cache."),
    ("meshmail_smtp_rcpt_cache_invalidations_total", C, "RCPT cache flushes after a directory change."),
    ("meshmail_smtp_inbound_auth_results_total", C, "SPF/DKIM/DMARC results of inbound mail, by check and result."),
    ("meshmail_smtp_inbound_auth_seconds", H, "Time of the inbound authentication checks of one message."),
    ("meshmail_smtp_inbound_auth_timeouts_total", C, "Inbound authentication checks that timed out (DNS)."),
    // Outbound.
    ("meshmail_outbound_items", G, "Messages in the outbound queue, by state."),
    ("meshmail_outbound_scans_total", C, "Outbound queue scans."),
    ("meshmail_outbound_scan_seconds", H, "Time of one outbound queue scan."),
    ("meshmail_outbound_attempts_total", C, "Delivery attempts to remote MXs, by result."),
    ("meshmail_outbound_delivery_seconds", H, "Time from acceptance to final outbound delivery."),
    ("meshmail_outbound_stage_seconds", H, "Time of each stage of an outbound attempt (resolve, connect, TLS, transfer)."),
    ("meshmail_outbound_transactions_total", C, "SMTP transactions with remote MXs, by result."),
    ("meshmail_outbound_connections_total", C, "Connections opened to remote MXs."),
    ("meshmail_outbound_connect_failures_total", C, "Connections to remote MXs that failed."),
    ("meshmail_outbound_idle_connections", G, "Idle pooled connections to remote MXs."),
    ("meshmail_outbound_pool_reuses_total", C, "Outbound transactions that reused a pooled connection."),
    ("meshmail_outbound_tls_fallbacks_total", C, "Deliveries that fell back from TLS to plaintext where policy allowed."),
    ("meshmail_outbound_downgrades_total", C, "Messages downgraded (8BITMIME/SMTPUTF8) for a remote MX that lacks the extension."),
    ("meshmail_outbound_dkim_signed_total", C, "Outbound messages DKIM-signed."),
    ("meshmail_outbound_dsn_total", C, "Delivery status notifications generated, by kind."),
    ("meshmail_outbound_finish_refused_total", C, "Outbound results not recorded because the item's lease had moved."),
    ("meshmail_outbound_lease_lost_total", C, "Outbound items whose lease was lost mid-attempt."),
    ("meshmail_outbound_mta_sts_fetches_total", C, "MTA-STS policy fetches, by result."),
    ("meshmail_outbound_mta_sts_refused_total", C, "Deliveries refused by an MTA-STS policy."),
    // IMAP.
    ("meshmail_imap_sessions_total", C, "IMAP sessions accepted, by listener."),
    ("meshmail_imap_commands_total", C, "IMAP commands, by command."),
    ("meshmail_imap_responses_total", C, "IMAP tagged responses, by status (OK, NO, BAD)."),
    ("meshmail_imap_command_seconds", H, "Time of one IMAP command, by command."),
    ("meshmail_imap_idle_push_seconds", H, "Time from a change's commit to the EXISTS/FETCH pushed to an IDLE session."),
    ("meshmail_imap_session_wakes_total", C, "IDLE sessions woken by a change hint."),
    ("meshmail_imap_compress_sessions_total", C, "IMAP sessions that enabled COMPRESS=DEFLATE."),
    ("meshmail_imap_copy_over_quota_total", C, "COPY/MOVE refused because the target account is over its quota."),
    ("meshmail_imap_recent_claim_timeouts_total", C, "\\Recent claims that timed out (the shard did not answer in time)."),
    ("meshmail_imap_envelope_cache_hits_total", C, "Envelope reads answered from the session cache."),
    ("meshmail_imap_envelope_cache_misses_total", C, "Envelope reads that went to the store."),
    ("meshmail_imap_envelope_cache_fetch_fills_total", C, "Envelope cache fills by FETCH."),
    ("meshmail_imap_envelope_cache_too_big_total", C, "Mailboxes too big for the envelope cache."),
    ("meshmail_imap_hot_cache_refreshes_total", C, "Hot-row cache refreshes of a selected mailbox."),
    ("meshmail_imap_hot_cache_refresh_seconds", H, "Time of one hot-row cache refresh."),
    ("meshmail_imap_hot_cache_rows_read_total", C, "Message rows read by hot-row cache refreshes."),
    ("meshmail_imap_hot_cache_too_big_total", C, "Mailboxes too big for the hot-row cache."),
    // POP3.
    ("meshmail_pop3_sessions_total", C, "POP3 sessions accepted, by listener (pop3, pop3s)."),
    ("meshmail_pop3_commands_total", C, "POP3 commands, by command."),
    ("meshmail_pop3_command_seconds", H, "Time of one POP3 command, by command (QUIT includes the UPDATE state's writes)."),
    ("meshmail_pop3_errors_total", C, "POP3 -ERR answers, by command (unparsed: a line that is no command)."),
    ("meshmail_pop3_bad_commands_total", C, "POP3 lines that did not parse as a command (too many close the session)."),
    ("meshmail_pop3_auth_failures_total", C, "POP3 logins refused, by reason (failed, rate_limited, unavailable, plaintext: no TLS)."),
    ("meshmail_pop3_timeouts_total", C, "POP3 sessions closed by the autologout timer (nothing deleted)."),
    ("meshmail_pop3_expunged_total", C, "Messages expunged by POP3 QUIT (DELE applied in the UPDATE state)."),
    ("meshmail_pop3_sent_bytes_total", C, "Message bytes sent by POP3 RETR and TOP, after byte-stuffing."),
    // ManageSieve.
    ("meshmail_managesieve_sessions_total", C, "ManageSieve sessions accepted."),
    ("meshmail_managesieve_commands_total", C, "ManageSieve commands, by command and outcome (ok, no, bye)."),
    ("meshmail_managesieve_command_seconds", H, "Time of one ManageSieve command, by command (PUTSCRIPT includes compiling the script)."),
    ("meshmail_managesieve_bad_commands_total", C, "ManageSieve lines that did not parse as a command, or were too long (too many close the session)."),
    ("meshmail_managesieve_auth_failures_total", C, "ManageSieve logins refused, by reason (failed, rate_limited, unavailable, plaintext: no TLS)."),
    ("meshmail_managesieve_scripts_refused_total", C, "Scripts PUTSCRIPT or CHECKSCRIPT refused because they do not compile (or are too large)."),
    ("meshmail_managesieve_timeouts_total", C, "ManageSieve sessions closed for inactivity."),
    // JMAP.
    ("meshmail_jmap_request_seconds", H, "Time of one JMAP API request."),
    ("meshmail_jmap_call_seconds", H, "Time of one JMAP method call, by method."),
    ("meshmail_jmap_calls_total", C, "JMAP method calls, by method and result."),
    ("meshmail_jmap_auth_seconds", H, "Time to authenticate one JMAP request."),
    ("meshmail_jmap_auth_refused_total", C, "JMAP requests refused for their credentials."),
    ("meshmail_jmap_query_indexed_total", C, "Email/query answered from the receivedAt index."),
    ("meshmail_jmap_query_changes_total", C, "Email/queryChanges calls, by result."),
    ("meshmail_jmap_submission_seconds", H, "Time of one EmailSubmission."),
    ("meshmail_jmap_upload_bytes_total", C, "Bytes uploaded to JMAP."),
    ("meshmail_jmap_download_bytes_total", C, "Bytes downloaded from JMAP."),
    ("meshmail_jmap_push_streams", G, "Open JMAP EventSource push streams."),
    ("meshmail_jmap_websockets", G, "Open JMAP WebSocket connections."),
    ("meshmail_jmap_push_latency_seconds", H, "Time from a change's commit to its JMAP push."),
];

/// Gives every metric of [`HELP`] its description (call once the recorder
/// is installed).
pub fn describe_all() {
    for &(name, kind, help) in HELP {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
            Kind::Histogram => metrics::describe_histogram!(name, help),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;

    /// Every `counter!/gauge!/histogram!("meshmail_...")` in the
    /// workspace's sources, with its kind.
    fn emitted(dir: &Path, found: &mut BTreeMap<String, Kind>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("target") && !path.ends_with("tests") && !path.ends_with("fuzz") {
                    emitted(&path, found);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("metrics_help.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (macro_name, kind) in [("counter!(", C), ("gauge!(", G), ("histogram!(", H)] {
                for piece in text.split(macro_name).skip(1) {
                    let rest = piece.trim_start();
                    let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) else {
                        continue;
                    };
                    if name.starts_with("meshmail_") {
                        found.insert(name.to_string(), kind);
                    }
                }
            }
        }
    }

    #[test]
    fn every_metric_in_the_sources_is_described_with_its_kind() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut found = BTreeMap::new();
        for krate in ["storage", "actors", "mesh", "protocols", "node"] {
            emitted(&root.join(krate).join("src"), &mut found);
        }
        assert!(found.len() > 100, "the walk found only {} metrics", found.len());
        let described: BTreeMap<&str, Kind> = HELP.iter().map(|&(n, k, _)| (n, k)).collect();
        let missing: Vec<_> = found
            .iter()
            .filter(|(n, k)| described.get(n.as_str()) != Some(k))
            .collect();
        assert!(
            missing.is_empty(),
            "metrics without a HELP text (or with another kind) in metrics_help.rs: {missing:?}"
        );
        // Set from a table rather than a literal at the macro (allocator.rs).
        const INDIRECT: &[&str] = &[
            "meshmail_allocator_allocated_bytes",
            "meshmail_allocator_active_bytes",
            "meshmail_allocator_resident_bytes",
            "meshmail_allocator_retained_bytes",
        ];
        let stale: Vec<_> = described
            .keys()
            .filter(|n| !found.contains_key(**n) && !INDIRECT.contains(n))
            .collect();
        assert!(stale.is_empty(), "described but emitted nowhere: {stale:?}");
    }

    #[test]
    fn help_texts_are_single_lines_and_not_empty() {
        for (name, _, help) in HELP {
            assert!(!help.is_empty() && !help.contains('\n'), "{name}");
        }
    }
}
