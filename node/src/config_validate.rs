//! `Config::validate()`: every range and cross-field rule of the
//! configuration in one place, checked once when a command starts (after
//! the file and the flags are merged), so the code that uses a setting can
//! trust it instead of clamping it quietly (`.max(1)`) or failing deep in
//! start-up. The defaults are the `d_*` functions next to each field in
//! `config.rs` (the mesh's come from the mesh crate's own defaults).
//!
//! A refusal lists every problem found, each as `[section] key = value:
//! why`, so an operator fixes a file in one pass.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use meshmail_mesh::NodeId;
use meshmail_mesh::membership::MAX_DEAD_AFTER;
use meshmail_mesh::runtime::Seed;

use crate::config::Config;

/// Most virtual shards a cluster may have: one lease key each, read in
/// pages every control round.
pub const SHARD_COUNT_MAX: u32 = 65_536;
/// The outbound queue scan runs at most this often.
pub const SCAN_INTERVAL_MS_MIN: u64 = 50;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid configuration:\n  {}", .problems.join("\n  "))]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl Config {
    /// Checks every setting; `Err` names each problem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut p = Problems::default();
        self.check_top(&mut p);
        self.check_listeners(&mut p);
        self.check_protocols(&mut p);
        self.check_mesh(&mut p);
        self.check_outbound(&mut p);
        self.check_publish(&mut p);
        if p.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems: p.0 })
        }
    }

    fn check_top(&self, p: &mut Problems) {
        p.check(
            (1..=SHARD_COUNT_MAX).contains(&self.shard_count),
            format!(
                "shard_count = {}: must be 1..={SHARD_COUNT_MAX} (and the same on every node of a cluster)",
                self.shard_count
            ),
        );
        p.check(
            (1..=86_400).contains(&self.compactor.interval_s),
            format!("[compactor] interval_s = {}: 1..=86400", self.compactor.interval_s),
        );
        p.check(
            self.compactor.change_log_window >= 1,
            "[compactor] change_log_window = 0: keep at least one change".to_string(),
        );
        if let Err(e) = self.upgrade.formats() {
            p.check(false, format!("[upgrade] {e}"));
        }
        p.check(
            self.batchers() >= 1,
            format!("batchers = {}: at least one commit batcher", self.batchers()),
        );
        p.check(
            NodeId::new(self.node_name.clone()).is_ok(),
            format!(
                "node_name = {:?}: 1 to 63 of a-z, 0-9 and '-' (it is the node's mesh identity)",
                self.node_name
            ),
        );
        p.check(
            self.tls.cert.is_some() == self.tls.key.is_some(),
            "[tls] cert and key go together (neither: a self-signed certificate is made)".to_string(),
        );
    }

    /// `[publish]`: what would make a DNS record or policy receivers reject.
    fn check_publish(&self, p: &mut Problems) {
        use crate::config_publish::MTA_STS_MAX_AGE_S_MAX;
        let pb = &self.publish;
        p.check(
            (1..=MTA_STS_MAX_AGE_S_MAX).contains(&pb.mta_sts_max_age_s),
            format!(
                "[publish] mta_sts_max_age_s = {}: 1..={MTA_STS_MAX_AGE_S_MAX} (RFC 8461 §3.2)",
                pb.mta_sts_max_age_s
            ),
        );
        p.check(
            ["none", "quarantine", "reject"].contains(&pb.dmarc_policy.as_str()),
            format!(
                "[publish] dmarc_policy = {:?}: none, quarantine or reject",
                pb.dmarc_policy
            ),
        );
        for mx in &pb.mx_hosts {
            p.check(
                !mx.is_empty() && !mx.ends_with('.') && !mx.contains(char::is_whitespace),
                format!("[publish] mx_hosts: {mx:?} is not a host name (no trailing dot)"),
            );
        }
    }

    fn check_listeners(&self, p: &mut Problems) {
        let l = &self.listen;
        let mut seen: BTreeMap<SocketAddr, String> = BTreeMap::new();
        let listen = [
            ("smtp", l.smtp),
            ("submission", l.submission),
            ("submissions", l.submissions),
            ("lmtp", l.lmtp),
            ("imap", l.imap),
            ("imaps", l.imaps),
            ("http", l.http),
            ("https", l.https),
        ]
        .map(|(key, addr)| ("listen", key, addr));
        let pop3 = [("listen", self.pop3.listen), ("listen_tls", self.pop3.listen_tls)].map(|(k, a)| ("pop3", k, a));
        let managesieve = [("managesieve", "listen", self.managesieve.listen)];
        for (section, key, addr) in listen.into_iter().chain(pop3).chain(managesieve) {
            // Port 0 (tests) binds a fresh port each time: no clash.
            let Some(addr) = addr.filter(|a| a.port() != 0) else {
                continue;
            };
            // Named as in the file: `smtp` under [listen], `[pop3] listen`.
            let name = if section == "listen" {
                key.to_string()
            } else {
                format!("[{section}] {key}")
            };
            if let Some(other) = seen.insert(addr, name) {
                p.0.push(format!("[{section}] {key} = \"{addr}\": the same address as {other}"));
            }
        }
        p.positive("listen", "smtp_max_connections", l.smtp_max_connections as u64);
        p.positive("listen", "imap_max_connections", l.imap_max_connections as u64);
    }

    fn check_pop3(&self, p: &mut Problems) {
        let c = &self.pop3;
        p.positive("pop3", "max_sessions_per_account", c.max_sessions_per_account as u64);
        p.positive("pop3", "max_connections", c.max_connections as u64);
        let min_s = meshmail_protocols::pop3::session::IDLE_TIMEOUT_MIN.as_secs();
        p.check(
            c.idle_timeout_s >= min_s,
            format!(
                "[pop3] idle_timeout_s = {}: must be at least {min_s} (RFC 1939 §3: at least 10 minutes)",
                c.idle_timeout_s
            ),
        );
    }

    fn check_protocols(&self, p: &mut Problems) {
        let s = &self.smtp;
        p.positive("smtp", "max_message_bytes", s.max_message_bytes);
        p.positive("smtp", "max_recipients", s.max_recipients as u64);
        p.positive("smtp", "idle_timeout_s", s.idle_timeout_s);
        p.positive("smtp", "delivery_timeout_s", s.delivery_timeout_s);
        if let Err(e) = s.routing() {
            p.0.push(e.to_string());
        }
        p.positive(
            "imap",
            "max_sessions_per_account",
            self.imap.max_sessions_per_account as u64,
        );
        if let Some(n) = self.imap.max_literal_bytes {
            p.positive("imap", "max_literal_bytes", n);
        }
        self.check_pop3(p);
        p.positive(
            "managesieve",
            "max_connections",
            self.managesieve.max_connections as u64,
        );
        p.positive("managesieve", "idle_timeout_s", self.managesieve.idle_timeout_s);
        let j = &self.jmap;
        for (key, v) in [
            ("max_size_request_bytes", j.max_size_request_bytes as u64),
            ("max_size_upload_bytes", j.max_size_upload_bytes),
            ("max_concurrent_requests", j.max_concurrent_requests as u64),
            ("max_calls_in_request", j.max_calls_in_request as u64),
            ("max_objects_in_get", j.max_objects_in_get as u64),
            ("max_objects_in_set", j.max_objects_in_set as u64),
            ("max_connections", j.max_connections as u64),
        ] {
            p.positive("jmap", key, v);
        }
        p.positive("dns", "timeout_ms", self.dns.timeout_ms);
        let a = &self.auth;
        p.positive("auth", "failures_per_ip_max", u64::from(a.failures_per_ip_max));
        p.positive(
            "auth",
            "failures_per_account_max",
            u64::from(a.failures_per_account_max),
        );
        p.positive("auth", "failure_window_s", a.failure_window_s);
    }

    fn check_mesh(&self, p: &mut Problems) {
        let m = &self.mesh;
        for s in &m.seeds {
            if let Err(e) = s.parse::<Seed>() {
                p.0.push(format!("[mesh] seeds: {e}"));
            }
        }
        p.positive("mesh", "keep_alive_ms", m.keep_alive_ms);
        p.positive("mesh", "moves_per_round", m.moves_per_round as u64);
        p.check(
            m.idle_timeout_ms > m.keep_alive_ms,
            format!(
                "[mesh] idle_timeout_ms = {} must exceed keep_alive_ms = {}: QUIC would close every quiet link",
                m.idle_timeout_ms, m.keep_alive_ms
            ),
        );
        p.check(
            m.dead_after_ms >= 3 * m.keep_alive_ms,
            format!(
                "[mesh] dead_after_ms = {} is under 3 x keep_alive_ms = {}: one late heartbeat would kill a peer",
                m.dead_after_ms,
                3 * m.keep_alive_ms
            ),
        );
        p.check(
            m.suspect_after_ms <= m.dead_after_ms,
            format!(
                "[mesh] suspect_after_ms = {} exceeds dead_after_ms = {}: a peer is suspect before it is dead",
                m.suspect_after_ms, m.dead_after_ms
            ),
        );
        p.check(
            u128::from(m.dead_after_ms) <= MAX_DEAD_AFTER.as_millis(),
            format!(
                "[mesh] dead_after_ms = {}: at most {} (a crashed node's shards must not wait longer)",
                m.dead_after_ms,
                MAX_DEAD_AFTER.as_millis()
            ),
        );
        p.positive("mesh", "redial_min_ms", m.redial_min_ms);
        p.check(
            m.redial_min_ms <= m.redial_max_ms,
            format!(
                "[mesh] redial_min_ms = {} exceeds redial_max_ms = {}",
                m.redial_min_ms, m.redial_max_ms
            ),
        );
    }

    fn check_outbound(&self, p: &mut Problems) {
        let o = &self.outbound;
        if let Err(e) = o.runtime(&self.hostname) {
            p.0.push(e.to_string());
        }
        for (key, v) in [
            ("max_lifetime_s", o.max_lifetime_s),
            ("connect_timeout_s", o.connect_timeout_s),
            ("greeting_timeout_s", o.greeting_timeout_s),
            ("command_timeout_s", o.command_timeout_s),
            ("data_timeout_s", o.data_timeout_s),
            ("mta_sts_timeout_s", o.mta_sts_timeout_s),
            ("per_destination_max", o.per_destination_max as u64),
            ("in_flight_max", o.in_flight_max as u64),
        ] {
            p.positive("outbound", key, v);
        }
        if o.retry_schedule_s.contains(&0) {
            p.0.push("[outbound] retry_schedule_s: every delay is at least 1 s".to_string());
        }
        p.check(
            o.scan_interval_ms >= SCAN_INTERVAL_MS_MIN,
            format!(
                "[outbound] scan_interval_ms = {}: at least {SCAN_INTERVAL_MS_MIN}",
                o.scan_interval_ms
            ),
        );
    }
}

#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, problem: String) {
        if !ok {
            self.0.push(problem);
        }
    }

    fn positive(&mut self, section: &str, key: &str, v: u64) {
        self.check(v > 0, format!("[{section}] {key} = {v}: must be at least 1"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        toml::from_str(text).expect("parses")
    }

    #[test]
    fn defaults_and_shipped_configs_are_valid() {
        parse("").validate().expect("defaults");
        parse(include_str!("../../ops/config/dev.toml"))
            .validate()
            .expect("dev.toml");
        parse(include_str!("../../ops/config/production.toml"))
            .validate()
            .expect("production.toml");
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let cfg = parse(
            "shard_count = 0\n[mesh]\nkeep_alive_ms = 500\ndead_after_ms = 1000\nsuspect_after_ms = 2000\n\
             [listen]\nimap = \"127.0.0.1:2525\"\n[outbound]\nconnect_timeout_s = 0\n\
             [pop3]\nlisten = \"127.0.0.1:2587\"\nidle_timeout_s = 60\n",
        );
        let e = cfg.validate().unwrap_err();
        let text = e.to_string();
        for want in [
            "shard_count = 0",
            "dead_after_ms = 1000 is under 3 x keep_alive_ms = 1500",
            "suspect_after_ms = 2000 exceeds dead_after_ms = 1000",
            "[listen] imap = \"127.0.0.1:2525\": the same address as smtp",
            "[outbound] connect_timeout_s = 0: must be at least 1",
            "[pop3] listen = \"127.0.0.1:2587\": the same address as submission",
            "[pop3] idle_timeout_s = 60: must be at least 600",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        assert_eq!(e.problems.len(), 7, "{text}");
    }

    /// The docs state the mesh timeouts the code has (whitespace folded,
    /// so a re-wrapped paragraph still matches).
    #[test]
    fn docs_state_the_codes_mesh_timeouts() {
        let d = crate::config::MeshSection::default();
        let fold = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        let readme = fold(include_str!("../../README.md"));
        let arch = fold(include_str!("../../docs/ARCHITECTURE.md"));
        let idle_s = d.idle_timeout_ms / 1000;
        for (doc, text, want) in [
            (
                "README.md",
                &readme,
                format!("`[mesh] dead_after_ms`, default {} ms", d.dead_after_ms),
            ),
            ("README.md", &readme, format!("`keep_alive_ms`, {} ms", d.keep_alive_ms)),
            ("README.md", &readme, format!("idle timeout, {idle_s} s")),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("keep-alive {} ms, idle timeout {idle_s} s by default", d.keep_alive_ms),
            ),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("`keep_alive_ms`, {}, of quiet", d.keep_alive_ms),
            ),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("`suspect_after_ms` ({})", d.suspect_after_ms),
            ),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("`dead_after_ms` ({}, at least 3 ×", d.dead_after_ms),
            ),
            ("ARCHITECTURE.md", &arch, format!("timeout, {idle_s} s, only closes it")),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("`redial_max_ms` is {}", d.redial_max_ms),
            ),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("`drain_deadline_ms` ({})", d.drain_deadline_ms),
            ),
            (
                "ARCHITECTURE.md",
                &arch,
                format!("`moves_per_round` ({})", d.moves_per_round),
            ),
        ] {
            assert!(text.contains(&want), "{doc} should say {want:?} (the code's default)");
        }
    }

    #[test]
    fn port_zero_listeners_never_clash() {
        let cfg = parse("[listen]\nsmtp = \"127.0.0.1:0\"\nimap = \"127.0.0.1:0\"\n");
        cfg.validate().expect("port 0 twice is fine");
    }
}
