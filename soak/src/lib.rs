//! Load generation, benchmarks and long-run verifiers: `bench
//! kv|smtp|imap|mailbox|outbound|jmap`,
//! the mail load (SMTP injection, IDLE populations, IMAP read/flag mixes
//! with a mailbox skew), `soak run`, and the end checks the chaos runner
//! shares (golden invariant, UID/MODSEQ history, event parity, actor
//! accounting, memory trend).
//!
//! Architecture invariant: talks to meshmail as a client, or (for `bench
//! kv`) through the storage crate's public API; every load loop is bounded
//! in count and in time and stops by itself; traffic goes to loopback only.

pub mod attached;
pub mod bench_burst;
pub mod bench_coldstart;
pub mod bench_flat;
pub mod bench_imap;
pub mod bench_jmap;
pub mod bench_kv;
pub mod bench_mailbox;
pub mod bench_outbound;
pub mod bench_sieve;
pub mod bench_smtp;
pub mod bench_store;
pub mod budget;
pub mod checks;
pub mod cluster;
pub mod dovecot_imap;
pub mod dovecot_peer;
pub mod events;
pub mod harness;
pub mod history;
pub mod http;
pub mod imap_client;
pub mod jmap_conn;
pub mod load;
mod load_jmap;
pub mod machine_cpu;
pub mod mail_gen;
pub mod node_proc;
pub mod plot;
pub mod sink_mx;
pub mod smtp_client;
pub mod smtp_load;
pub mod soak_run;
pub mod store_usage;
