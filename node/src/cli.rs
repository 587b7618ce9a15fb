//! The command line. Every subcommand's `--help` says what it does and what
//! it touches.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// This build as node records and `meshmail status` name it: the crate
/// version, and what `MESHMAIL_BUILD` said at compile time (packagers set
/// it to a commit or a release tag) so two builds of one version differ.
pub const BUILD: &str = match option_env!("MESHMAIL_BUILD") {
    Some(b) => b,
    None => concat!("meshmail ", env!("CARGO_PKG_VERSION")),
};

#[derive(Debug, Parser)]
#[command(
    name = "meshmail",
    version,
    about = "meshmail: an actor-based distributed mail server",
    long_about = "meshmail: an actor-based distributed mail server.\n\n\
        With no configuration it runs on its embedded default: one SQLite file and a local \
        blob directory under --data-dir (./meshmail-data), listening on loopback only.\n\n\
        Quick start:\n  meshmail domain add example.org\n  \
        echo secret | meshmail account add alice@example.org --password-stdin\n  meshmail serve\n\n\
        Then send mail to 127.0.0.1:2525 (SMTP) and read it on 127.0.0.1:1143 (IMAP). \
        `meshmail verify ledger` checks that every accepted message is accounted for."
)]
pub struct Cli {
    /// A TOML configuration file (see ops/config/). Flags override it.
    #[arg(long, global = true, env = "MESHMAIL_CONFIG")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub overrides: GlobalOverrides,

    /// Log as JSON lines instead of text (filter with MESHMAIL_LOG, e.g. "info,meshmail_storage=debug").
    #[arg(long, global = true)]
    pub log_json: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// Settings every subcommand shares.
#[derive(Debug, Args, Default)]
pub struct GlobalOverrides {
    /// Where the embedded store lives: meshmail.sqlite and blobs/ (created if missing).
    #[arg(long, global = true, env = "MESHMAIL_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The KV store, instead of the config's [store]: `sqlite` (the embedded
    /// default under --data-dir), `fdb` (FoundationDB through the client's
    /// default cluster file; with `up`, a local cluster `up` starts itself
    /// when fdbserver is found) or `fdb:CLUSTER_FILE`. FoundationDB needs a
    /// build with `--features fdb`.
    #[arg(
        long,
        global = true,
        env = "MESHMAIL_STORE",
        value_name = "sqlite|fdb[:CLUSTER_FILE]"
    )]
    pub store: Option<StoreArg>,
    /// With a FoundationDB store: every key under this prefix, so several
    /// meshes (or test runs) share one cluster apart. Every node of a mesh
    /// needs the same one.
    #[arg(long, global = true, env = "MESHMAIL_FDB_KEY_PREFIX")]
    pub fdb_key_prefix: Option<String>,
    /// Behave as a build of store format N, below this build's newest
    /// (`[upgrade] pin_store_format`): refuse a store of a newer format and
    /// never switch the store to one. For upgrade tests and staged
    /// upgrades; see ops/runbooks/upgrade.md.
    #[arg(long, global = true, env = "MESHMAIL_PIN_STORE_FORMAT", value_name = "N")]
    pub pin_store_format: Option<u32>,
}

/// `--store`'s value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreArg {
    Sqlite,
    /// None: the client's default cluster file (or, for `up`, its own).
    Fdb(Option<PathBuf>),
}

impl std::str::FromStr for StoreArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            None if s == "sqlite" => Ok(StoreArg::Sqlite),
            None if s == "fdb" => Ok(StoreArg::Fdb(None)),
            Some(("fdb", file)) if !file.is_empty() => Ok(StoreArg::Fdb(Some(PathBuf::from(file)))),
            _ => Err(format!("{s:?}: expected `sqlite`, `fdb` or `fdb:CLUSTER_FILE`")),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node until interrupted (Ctrl-C or SIGTERM).
    Serve(Box<ServeArgs>),
    /// Manage the local mail domains.
    Domain {
        #[command(subcommand)]
        cmd: DomainCmd,
    },
    /// Manage accounts.
    Account {
        #[command(subcommand)]
        cmd: AccountCmd,
    },
    /// Manage aliases and domain catch-alls (address routing at RCPT time).
    Alias {
        #[command(subcommand)]
        cmd: AliasCmd,
    },
    /// An account's Sieve scripts (RFC 5228), run at every delivery.
    Sieve {
        #[command(subcommand)]
        cmd: SieveCmd,
    },
    /// Quotas per account (RFC 9208: storage in KiB, message count),
    /// enforced at delivery, APPEND and COPY.
    Quota {
        #[command(subcommand)]
        cmd: QuotaCmd,
    },
    /// Check the store's invariants.
    Verify {
        #[command(subcommand)]
        what: VerifyCmd,
    },
    /// Inspect and act on quarantined (poison) deliveries.
    Quarantine {
        #[command(subcommand)]
        cmd: QuarantineCmd,
    },
    /// Bearer tokens for JMAP (`Authorization: Bearer TOKEN`).
    Token {
        #[command(subcommand)]
        cmd: TokenCmd,
    },
    /// Inspect and act on the outbound queue (mail for remote recipients):
    /// each item's attempts, last error and next attempt. Works on the
    /// store, with or without a node running.
    Queue {
        #[command(subcommand)]
        cmd: QueueCmd,
    },
    /// DKIM signing keys of local domains (kept in the store, so every node
    /// signs the same way).
    Dkim {
        #[command(subcommand)]
        cmd: DkimCmd,
    },
    /// Show the nodes registered in the store (name, current generation) and
    /// which incarnation holds which shard leases, with their epochs. With
    /// --node, also a running node's live view: members, link state, owners.
    Status {
        /// HTTP address of a running node (e.g. 127.0.0.1:8080).
        #[arg(long)]
        node: Option<String>,
    },
    /// Start a local mesh: N node processes sharing --data-dir, on the dev
    /// ports plus 10·i (node-0: SMTP 2525, IMAP 1143, POP3 1110,
    /// ManageSieve 4190, HTTP 8080, mesh 7400; node-1: 2535, 1153, 1120,
    /// 4200, 8090, 7410; …). Creates the cluster CA and
    /// node certificates if missing, restarts a node that dies, and stops
    /// them all on Ctrl-C.
    Up(UpArgs),
    /// Operate on a running node.
    Node {
        #[command(subcommand)]
        cmd: NodeCmd,
    },
    /// What to publish in DNS for a mail domain.
    Dns {
        #[command(subcommand)]
        cmd: DnsCmd,
    },
    /// Write every folder of ACCOUNT, with flags, keywords and internal
    /// dates, to DIR (new or empty) as a maildir tree or mbox files. Reads
    /// the store and the blob store directly (bounded read transactions),
    /// with or without a node running.
    ///
    /// maildir: Dovecot's LAYOUT=fs (DIR is INBOX, DIR/Work/Projects the
    /// folder Work/Projects), flags in file names (`:2,DFPRST` + keyword
    /// letters listed in each folder's `dovecot-keywords`), internal date
    /// as the file's mtime. mbox: mboxrd (`>From ` quoting), one file per
    /// folder (DIR/INBOX.mbox, DIR/Work/Projects.mbox), flags in `Status:`,
    /// `X-Status:` and `X-Keywords:`, internal date on the `From ` line.
    /// See ops/runbooks/export-import.md.
    ///
    /// Example: meshmail export alice@example.org --format maildir /backup/alice
    Export {
        /// The account (user@domain).
        account: String,
        #[arg(long, value_enum)]
        format: crate::admin_export::Format,
        /// Where to write: a new or empty directory.
        dir: PathBuf,
    },
    /// Import a maildir tree, an mbox file, or a folder of mbox and `.eml`
    /// files into ACCOUNT, keeping folders (nested), flags, keywords and
    /// internal dates (the formats `export` writes; Maildir++ `.A.B`
    /// folders too). Goes through the running node at --node, which stores
    /// each message as IMAP APPEND does (its HTTP listener, from the same
    /// host). Safe to run again: a message whose bytes a folder already
    /// holds is skipped. A message that cannot be read or stored (cut
    /// short, too big, no header) is reported and the rest go on; the exit
    /// status is 1 when any was.
    ///
    /// Example: meshmail import bob@example.org /backup/alice --node 127.0.0.1:8080
    Import {
        /// The account (user@domain); it must exist.
        account: String,
        /// A maildir tree, an mbox file, or a directory of mbox/.eml files.
        dir: PathBuf,
        /// HTTP address of a running node.
        #[arg(long, default_value = "127.0.0.1:8080")]
        node: String,
    },
    /// Copy an account from another IMAP server into ACCOUNT: every folder
    /// (nested; the source's separator becomes `/`, INBOX stays INBOX),
    /// message (its bytes exactly), flag, keyword and internal date.
    /// Through the running node at --node, like `import` (run it on the
    /// node's host; ACCOUNT must exist).
    ///
    /// URL: imap://USER@HOST[:PORT] uses STARTTLS (port 143 by default)
    /// and refuses a server without it; imaps://USER@HOST[:PORT] (or port
    /// 993) uses TLS from the start. Certificates are verified against the
    /// system's roots (and --tls-ca). Plaintext only with
    /// --plaintext-on-loopback, to a loopback address; refused for any
    /// other. A `@` in USER is written `%40` or kept (the last `@` splits).
    ///
    /// Resume: after every batch of 200 messages, the source folder's
    /// UIDVALIDITY and the highest UID copied are kept in the store for
    /// ACCOUNT (per source and folder). A run after a kill or a failure
    /// goes on from there, and a message of the interrupted batch that
    /// the folder already holds (same bytes) is skipped: nothing is copied
    /// twice. Run it again later to copy only what is new. If a folder's
    /// UIDVALIDITY changed, it is read again whole and compared by content.
    /// A message over the node's size limit is reported and left out;
    /// --rescan reads everything again (after raising the limit).
    ///
    /// Example: meshmail migrate imap://alice@imap.example.net --account alice@example.org --password-stdin
    Migrate(MigrateArgs),
    /// Online backup and restore of the whole store: every key of the KV
    /// store (SQLite or FoundationDB) and every body of the object store.
    /// See ops/runbooks/backup-restore.md.
    Backup {
        #[command(subcommand)]
        cmd: BackupCmd,
    },
    /// Manage the mesh's cluster CA and node certificates (mutual TLS between nodes).
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCmd,
    },
}

// `meshmail migrate`'s arguments: the variant's doc above is the command's
// help, so this struct has none of its own.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// imap://USER@HOST[:PORT] (STARTTLS) or imaps://USER@HOST[:PORT].
    pub url: String,
    /// The account to copy into (user@domain); it must exist.
    #[arg(long)]
    pub account: String,
    /// Read the source password from the first line of standard input.
    #[arg(long, conflicts_with = "password_file", required_unless_present = "password_file")]
    pub password_stdin: bool,
    /// Read the source password from FILE (a final line break is dropped).
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Talk plaintext IMAP (no TLS); refused unless HOST is a loopback address.
    #[arg(long)]
    pub plaintext_on_loopback: bool,
    /// Also trust the CA certificates in this PEM file (a private CA).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Ignore the checkpoints: read every folder again (messages already
    /// present are still skipped by content).
    #[arg(long)]
    pub rescan: bool,
    /// HTTP address of a running node.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub node: String,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Create the cluster CA: ca.pem (the certificate every node trusts) and
    /// ca.key (mode 0600, the cluster's secret: whoever holds it can admit
    /// nodes). Run it once per cluster; it refuses to overwrite an existing CA.
    Init {
        /// Where to write the CA (default: <data-dir>/cluster).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Issue a certificate for a node, signed by the cluster CA in --dir:
    /// writes NODE.pem and NODE.key (mode 0600) next to the CA. The node id
    /// is the certificate's name (SAN and CN) and its identity in the mesh.
    /// Running it again for the same node replaces its key (rotation).
    Cert {
        /// The node id: 1 to 63 of a-z, 0-9 and '-'.
        node: String,
        /// The cluster directory holding ca.pem and ca.key (default: <data-dir>/cluster).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AliasCmd {
    /// Route an address to one or more targets, local accounts or remote
    /// addresses (forwarding). `@example.org` is the domain's catch-all: it
    /// receives every address of the domain that no account, alias or
    /// subaddress matches. Adding an existing alias replaces its targets.
    ///
    /// Example: meshmail alias add sales@example.org alice@example.org,bob@example.org
    Add {
        /// `local@domain` (the domain must be local) or `@domain`.
        address: String,
        /// Comma-separated `local@domain` targets.
        #[arg(value_delimiter = ',', num_args = 1..)]
        targets: Vec<String>,
    },
    /// Remove an alias or catch-all.
    Remove { address: String },
    /// List aliases and catch-alls.
    List,
}

#[derive(Debug, Subcommand)]
pub enum SieveCmd {
    /// Compile and store a script (a syntax error prints
    /// FILE:line:column and stores nothing).
    ///
    /// Example: meshmail sieve put alice@example.org main rules.sieve --activate
    Put {
        account: String,
        name: String,
        file: PathBuf,
        /// Make it the script that runs at delivery.
        #[arg(long)]
        activate: bool,
    },
    /// List an account's scripts; the active one is marked `*`.
    List { account: String },
    /// Make a stored script the one that runs at delivery.
    Activate { account: String, name: String },
    /// Delete a script (not the active one).
    Delete { account: String, name: String },
}

#[derive(Debug, Subcommand)]
pub enum QuotaCmd {
    /// Set an account's limits; a limit left out is unchanged, 0 removes it.
    ///
    /// Example: meshmail quota set alice@example.org --storage-kib 1048576 --messages 50000
    Set {
        user: String,
        #[arg(long)]
        storage_kib: Option<u64>,
        #[arg(long)]
        messages: Option<u64>,
    },
    /// Show an account's limits and usage.
    Show { user: String },
}

#[derive(Debug, Subcommand)]
pub enum BackupCmd {
    /// Back up the store into DIR (new or empty) while nodes keep serving.
    ///
    /// Reads the KV store in bounded chunks (one short read transaction
    /// each, so it works within FoundationDB's 5 s limit), then walks the
    /// accept ledger and copies each entry together with its message row
    /// and body as read in one transaction, then copies every object-store
    /// body (checking its SHA-256). Every message acknowledged before the
    /// backup began is in it. DIR/manifest.json is written last
    /// (atomically): a directory without it is not a backup, and restore
    /// refuses it. On a write error (disk full) the partial files are
    /// removed and the error names DIR and the bytes written.
    ///
    /// Example: meshmail --config /etc/meshmail.toml backup create /backup/mesh-2026-12-07
    Create {
        /// Where to write: a new or empty directory.
        dir: PathBuf,
        /// Most keys one read transaction takes (adapted below this to
        /// ~4 MB per read; ledger reads take at most 100 entries).
        #[arg(long, default_value_t = 10_000)]
        keys_per_read: usize,
        /// Pause after every read transaction, in ms: spreads the
        /// backup's load on a store that is serving mail.
        #[arg(long, default_value_t = 0)]
        pause_ms: u64,
    },
    /// Restore a backup from DIR into the configured store and blob store.
    ///
    /// Checks every chunk against the manifest's hashes before writing
    /// anything, refuses a store that already holds data (unless --force),
    /// writes in bounded transactions, puts the bodies, then recomputes
    /// what the online copy cannot keep exact (mailbox counters, UIDNEXT,
    /// body reference counts; indexes are marked for row scans and clients
    /// resynchronise). Run it before starting nodes on the store; then
    /// `meshmail verify ledger` reports 0 discrepancies.
    ///
    /// Example: meshmail --data-dir /var/lib/meshmail-new backup restore /backup/mesh-2026-12-07
    Restore {
        /// A directory written by `meshmail backup create`.
        dir: PathBuf,
        /// Restore into a store that already holds keys (they are
        /// overwritten where the backup has them; nothing is removed).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum VerifyCmd {
    /// Reconcile every acceptance in the ledger with a stored message, a
    /// queued item, a bounce or a quarantine record. Walks the ledger in
    /// bounded chunks; exits 1 on any discrepancy.
    Ledger {
        /// Ledger entries per transaction.
        #[arg(long, default_value_t = 1000)]
        chunk: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum QuarantineCmd {
    /// List quarantined items (newest last).
    List,
    /// Show one item in full.
    Show { id: String },
    /// Deliver it again, through the running node at --node (its HTTP listener).
    Redeliver {
        id: String,
        /// HTTP address of a running node.
        #[arg(long, default_value = "127.0.0.1:8080")]
        node: String,
    },
    /// Remove it; its acceptance ends as bounced.
    Drop { id: String },
}

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Create a token for USER and print it (once: only its hash is stored).
    Create { user: String },
}

#[derive(Debug, Subcommand)]
pub enum QueueCmd {
    /// List queued items (oldest first): id, sender -> recipient, attempts,
    /// next attempt, last error.
    List,
    /// Show one item in full.
    Show { id: String },
    /// Make it due now (the node owning it tries at its next scan).
    Retry { id: String },
    /// Remove it without delivering it and without a DSN; its acceptance
    /// is recorded as bounced.
    Drop { id: String },
    /// Bounce it: the node owning it sends the sender a DSN at its next
    /// scan and removes it.
    Bounce {
        id: String,
        /// The reason given in the DSN.
        #[arg(long, default_value = "cancelled by the postmaster")]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DnsCmd {
    /// Print every record DOMAIN needs, as zone-file lines ready to paste:
    /// MX, SPF, the DKIM key (from the store: `meshmail dkim generate`),
    /// DMARC, MTA-STS (`_mta-sts` with an id that changes with the policy
    /// the node serves at /.well-known/mta-sts.txt), TLS-RPT, the
    /// mta-sts/autoconfig names, and SRV records for IMAP, IMAPS,
    /// submission(s) and JMAP (RFC 6186, RFC 8314, RFC 8620 §2.2; POP3 as
    /// "not offered"). Hostnames, ports and policies come from the config
    /// (`hostname`, `[listen]`, `[publish]`). DOMAIN must be a local domain.
    ///
    /// Example: meshmail --config /etc/meshmail/meshmail.toml dns records example.org
    Records { domain: String },
}

#[derive(Debug, Subcommand)]
pub enum DkimCmd {
    /// Make a signing key for DOMAIN, store it (replacing any earlier one:
    /// rotation) and print the DNS TXT record to publish.
    Generate {
        domain: String,
        /// The selector: the record goes at SELECTOR._domainkey.DOMAIN.
        #[arg(long, default_value = "meshmail")]
        selector: String,
        /// ed25519 (RFC 8463; small, but not every verifier knows it) or
        /// rsa (2048 bits, understood everywhere).
        #[arg(long, default_value = "rsa", value_parser = ["ed25519", "rsa"])]
        algorithm: String,
    },
    /// Print DOMAIN's selector, algorithm and DNS TXT record.
    Show { domain: String },
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// How many nodes (1 to 9).
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Also create the domain example.test and the account
    /// demo@example.test (password "demo") if missing.
    #[arg(long)]
    pub demo: bool,
    /// Added to every port (to run two meshes side by side).
    #[arg(long, default_value_t = 0)]
    pub base_port_offset: u32,
    /// How long to wait before restarting a node that died (the first
    /// time, or after it had run stably).
    #[arg(long, default_value_t = 2000)]
    pub restart_delay_ms: u64,
    /// Crash-loop cap: a node that keeps dying within
    /// --restart-stable-after-s of its start waits twice as long each
    /// time, up to this.
    #[arg(long, default_value_t = 60_000)]
    pub restart_delay_max_ms: u64,
    /// A node that ran this long before dying was not crash-looping: its
    /// next restart waits only --restart-delay-ms again.
    #[arg(long, default_value_t = 30)]
    pub restart_stable_after_s: u64,
    /// With `--store fdb`: the directory holding `fdbserver` and `fdbcli`
    /// (default: the first PATH entry that has them). `up` then starts a
    /// local FoundationDB cluster of its own in <data-dir>/fdb (port 4500 +
    /// --base-port-offset), runs the nodes on it and stops it on Ctrl-C.
    /// Without either, `--store fdb` means the client's default cluster file.
    #[arg(long, value_name = "DIR", env = "MESHMAIL_FDB_BIN")]
    pub fdb_bin: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum NodeCmd {
    /// Evacuate a node before maintenance: it hands every shard to the
    /// other nodes (each drained, released, then acquired by its new owner)
    /// and takes none. Waits until it owns nothing.
    Drain {
        /// HTTP address of the node to drain.
        #[arg(long, default_value = "127.0.0.1:8080")]
        node: String,
        /// Give up waiting after this many seconds (the drain goes on).
        #[arg(long, default_value_t = 120)]
        timeout_s: u64,
    },
    /// Let a drained node take shards again.
    Undrain {
        #[arg(long, default_value = "127.0.0.1:8080")]
        node: String,
    },
    /// Remove a node that left for good from the mesh: peers drop it from
    /// their directory, so it no longer counts against quorum (and its
    /// leases, if it crashed holding any, are taken over). Works on the
    /// store, with or without a node running. Refused while the node shows
    /// a sign of life (it writes one every second while it runs): stop it
    /// first. Starting the name again undoes it.
    Forget {
        /// The node's name (as in `meshmail status`).
        name: String,
        /// How long without a sign of life makes a node gone.
        #[arg(long, default_value_t = 10)]
        silence_s: u64,
    },
}

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// This node's name in the mesh (default: node0). Each start gets a new generation.
    #[arg(long)]
    pub node_name: Option<String>,
    /// Inbound MX listener (dev default 127.0.0.1:2525; "off" disables it).
    #[arg(long)]
    pub smtp: Option<ListenAddr>,
    /// Submission with STARTTLS and AUTH (dev default 127.0.0.1:2587).
    #[arg(long)]
    pub submission: Option<ListenAddr>,
    /// Submission over implicit TLS (dev default 127.0.0.1:2465).
    #[arg(long)]
    pub submissions: Option<ListenAddr>,
    /// LMTP, for use behind another MTA (dev default 127.0.0.1:2424).
    #[arg(long)]
    pub lmtp: Option<ListenAddr>,
    /// IMAP with STARTTLS (dev default 127.0.0.1:1143).
    #[arg(long)]
    pub imap: Option<ListenAddr>,
    /// IMAP over implicit TLS (dev default 127.0.0.1:1993).
    #[arg(long)]
    pub imaps: Option<ListenAddr>,
    /// POP3 with STLS, e.g. 127.0.0.1:1110 (off unless set here or in
    /// `[pop3] listen`; `meshmail up` uses 1110 + 10·i).
    #[arg(long)]
    pub pop3: Option<ListenAddr>,
    /// POP3 over implicit TLS, e.g. 127.0.0.1:1995 (off unless set here or
    /// in `[pop3] listen_tls`; `meshmail up` uses 1995 + 10·i).
    #[arg(long)]
    pub pop3s: Option<ListenAddr>,
    /// ManageSieve (RFC 5804) with STARTTLS, e.g. 127.0.0.1:4190 (off
    /// unless set here or in `[managesieve] listen`; `meshmail up` uses
    /// 4190 + 10·i).
    #[arg(long)]
    pub managesieve: Option<ListenAddr>,
    /// HTTP listener for /metrics, /health, /status and the admin API (dev default 127.0.0.1:8080).
    #[arg(long)]
    pub http: Option<ListenAddr>,
    /// The same HTTP router (JMAP, webmail) over TLS with the node's
    /// certificate, e.g. 127.0.0.1:8443 (dev) or 0.0.0.0:443; off by default.
    #[arg(long)]
    pub https: Option<ListenAddr>,
    /// The QUIC mesh listener (UDP), e.g. 127.0.0.1:7400; "off" (the
    /// default) runs the node alone. Needs <data-dir>/cluster/ca.pem and
    /// NODE.pem/NODE.key (see `meshmail cluster`).
    #[arg(long)]
    pub mesh: Option<ListenAddr>,
    /// Peers to join, comma-separated NAME@HOST:PORT (e.g.
    /// node-1@127.0.0.1:7410). Others are learned from them.
    #[arg(long, value_delimiter = ',')]
    pub seeds: Vec<String>,
    /// Allow SMTP AUTH, IMAP LOGIN, POP3 USER/PASS, ManageSieve AUTHENTICATE and JMAP credentials without TLS from loopback clients (tests and local tools only).
    #[arg(long)]
    pub allow_plaintext_auth_on_loopback: bool,
    /// Largest accepted message in bytes (default 50 MiB).
    #[arg(long)]
    pub max_message_bytes: Option<u64>,
    /// BENCHMARK ONLY: answer 250 to every message without storing it, to
    /// measure the protocol-only ceiling. Never use it for real mail.
    #[arg(long, hide_short_help = true)]
    pub bench_sink: bool,
}

/// A listener address given on the command line: `host:port` or `off`.
#[derive(Debug, Clone, Copy)]
pub struct ListenAddr(pub Option<SocketAddr>);

impl std::str::FromStr for ListenAddr {
    type Err = crate::config::ListenParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::config::parse_listen(s).map(ListenAddr)
    }
}

#[derive(Debug, Subcommand)]
pub enum DomainCmd {
    /// Add a local domain: mail for it is accepted and stored here.
    Add { domain: String },
    /// List local domains.
    List,
}

#[derive(Debug, Subcommand)]
pub enum AccountCmd {
    /// Create an account (its domain must exist) with INBOX, Drafts, Sent, Trash, Junk and Archive.
    Add {
        /// user@domain
        email: String,
        /// Read the password from the first line of standard input (never from the command line).
        #[arg(long)]
        password_stdin: bool,
    },
    /// List accounts.
    List,
    /// Delete an account with all its mail, mailboxes, tokens and JMAP
    /// records, in bounded transactions (an account of any size, on either
    /// store). Mail to the address is refused from the first step on. An
    /// interrupted deletion resumes when the command is run again.
    Delete {
        /// user@domain
        email: String,
        /// Confirm: the mail cannot be brought back (except from a backup).
        #[arg(long)]
        yes: bool,
    },
}
