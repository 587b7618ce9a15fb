//! What an operator publishes on day one, rendered from the config's
//! public face (`config_publish`): the DNS records of a mail domain, the
//! MTA-STS policy (RFC 8461) and the Thunderbird autoconfig file
//! (wiki.mozilla.org/Thunderbird:Autoconfiguration:ConfigFileFormat).
//! Pure text; `admin_dns` prints the records, `http_day_one` serves the
//! files.

use std::fmt::Write;

use meshmail_storage::blob::content_hash;

use crate::config_publish::PublicFace;

/// One DNS record as a zone-file line: `name. TTL IN TYPE value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub kind: &'static str,
    pub value: String,
    /// What it is for, printed as a comment above it.
    pub why: &'static str,
}

/// TTL of every printed record: an hour, so a first mistake is fixed soon.
const TTL_S: u32 = 3600;

impl Record {
    pub fn zone_line(&self) -> String {
        format!("{}. {TTL_S} IN {} {}", self.name, self.kind, self.value)
    }
}

/// A TXT value as quoted strings of at most 255 octets (RFC 1035 §3.3).
pub fn txt(value: &str) -> String {
    value
        .as_bytes()
        .chunks(255)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The MTA-STS policy file (RFC 8461 §3.2), CRLF lines.
pub fn mta_sts_policy(face: &PublicFace) -> String {
    let mut out = String::new();
    let _ = write!(out, "version: STSv1\r\nmode: {}\r\n", face.mta_sts_mode.as_str());
    for mx in &face.mx_hosts {
        let _ = write!(out, "mx: {mx}\r\n");
    }
    let _ = write!(out, "max_age: {}\r\n", face.mta_sts_max_age_s);
    out
}

/// The `_mta-sts` record's id: derived from the policy, so it changes
/// exactly when the policy does (senders refetch on a new id, §3.1).
pub fn mta_sts_id(policy: &str) -> String {
    content_hash(policy.as_bytes())[..20].to_string()
}

fn srv(service: &'static str, domain: &str, port: Option<u16>, host: &str, why: &'static str) -> Record {
    // RFC 6186 §4: target "." says the service is not offered here.
    let value = match port {
        Some(p) => format!("0 1 {p} {host}."),
        None => "0 0 0 .".to_string(),
    };
    Record {
        name: format!("{service}.{domain}"),
        kind: "SRV",
        value,
        why,
    }
}

/// Every record `domain` needs; `dkim` is the domain's DKIM record (name
/// and TXT value) when it has a key.
pub fn records(face: &PublicFace, domain: &str, dkim: Option<(String, String)>) -> Vec<Record> {
    let report = face
        .report_address
        .clone()
        .unwrap_or_else(|| format!("postmaster@{domain}"));
    let host = face.hostname.as_str();
    let mut out: Vec<Record> = face
        .mx_hosts
        .iter()
        .enumerate()
        .map(|(i, mx)| Record {
            name: domain.to_string(),
            kind: "MX",
            value: format!("{} {mx}.", 10 * (i + 1)),
            why: "where mail for the domain goes",
        })
        .collect();
    let txt_record = |name: String, value: String, why| Record {
        name,
        kind: "TXT",
        value: txt(&value),
        why,
    };
    out.push(txt_record(
        domain.into(),
        face.spf.clone(),
        "SPF: who may send as the domain",
    ));
    if let Some((name, value)) = dkim {
        out.push(txt_record(name, value, "DKIM: the key outgoing mail is signed with"));
    }
    out.push(txt_record(
        format!("_dmarc.{domain}"),
        format!("v=DMARC1; p={}; rua=mailto:{report}", face.dmarc_policy),
        "DMARC: what receivers do with mail failing SPF and DKIM",
    ));
    let id = mta_sts_id(&mta_sts_policy(face));
    out.push(txt_record(
        format!("_mta-sts.{domain}"),
        format!("v=STSv1; id={id}"),
        "MTA-STS: senders fetch https://mta-sts.DOMAIN/.well-known/mta-sts.txt",
    ));
    out.push(txt_record(
        format!("_smtp._tls.{domain}"),
        format!("v=TLSRPTv1; rua=mailto:{report}"),
        "TLS-RPT: where senders report TLS failures",
    ));
    out.push(Record {
        name: format!("mta-sts.{domain}"),
        kind: "CNAME",
        value: format!("{host}."),
        why: "serves the MTA-STS policy (needs a certificate for this name)",
    });
    out.push(Record {
        name: format!("autoconfig.{domain}"),
        kind: "CNAME",
        value: format!("{host}."),
        why: "Thunderbird autoconfig (/mail/config-v1.1.xml)",
    });
    out.extend([
        srv("_imap._tcp", domain, face.imap, host, "IMAP with STARTTLS (RFC 6186)"),
        srv("_imaps._tcp", domain, face.imaps, host, "IMAP over TLS (RFC 6186)"),
        srv("_pop3._tcp", domain, face.pop3, host, "POP3 with STLS (RFC 6186)"),
        srv("_pop3s._tcp", domain, face.pop3s, host, "POP3 over TLS (RFC 6186)"),
        srv(
            "_submission._tcp",
            domain,
            face.submission,
            host,
            "submission with STARTTLS (RFC 6186)",
        ),
        srv(
            "_submissions._tcp",
            domain,
            face.submissions,
            host,
            "submission over TLS (RFC 8314)",
        ),
        srv("_jmap._tcp", domain, face.jmap, host, "JMAP (RFC 8620 §2.2)"),
    ]);
    out
}

/// `s` escaped for XML text and attribute values.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn server(out: &mut String, tag: &str, kind: &str, host: &str, port: u16, socket: &str) {
    let _ = write!(
        out,
        "    <{tag} type=\"{kind}\">\n      <hostname>{}</hostname>\n      <port>{port}</port>\n      \
         <socketType>{socket}</socketType>\n      <authentication>password-cleartext</authentication>\n      \
         <username>%EMAILADDRESS%</username>\n    </{tag}>\n",
        xml(host)
    );
}

/// The autoconfig file for `domain`: IMAP and submission servers, implicit
/// TLS first (Thunderbird tries them in order).
pub fn autoconfig_xml(face: &PublicFace, domain: &str) -> String {
    let (host, d) = (face.hostname.as_str(), xml(domain));
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<clientConfig version=\"1.1\">\n  \
         <emailProvider id=\"{d}\">\n    <domain>{d}</domain>\n    <displayName>{d} mail</displayName>\n    \
         <displayShortName>{d}</displayShortName>\n"
    );
    let incoming = [(face.imaps, "SSL"), (face.imap, "STARTTLS")];
    for (port, socket) in incoming {
        if let Some(p) = port {
            server(&mut out, "incomingServer", "imap", host, p, socket);
        }
    }
    // POP3 after IMAP: Thunderbird offers the first server of a kind it
    // supports, and IMAP keeps folders and flags on the server.
    let pop3 = [(face.pop3s, "SSL"), (face.pop3, "STARTTLS")];
    for (port, socket) in pop3 {
        if let Some(p) = port {
            server(&mut out, "incomingServer", "pop3", host, p, socket);
        }
    }
    let outgoing = [(face.submissions, "SSL"), (face.submission, "STARTTLS")];
    for (port, socket) in outgoing {
        if let Some(p) = port {
            server(&mut out, "outgoingServer", "smtp", host, p, socket);
        }
    }
    out.push_str("  </emailProvider>\n</clientConfig>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_publish::MtaStsMode;

    fn face() -> PublicFace {
        PublicFace {
            hostname: "mail.example.org".into(),
            mx_hosts: vec!["mail.example.org".into(), "mx2.example.org".into()],
            spf: "v=spf1 mx -all".into(),
            dmarc_policy: "reject".into(),
            report_address: None,
            mta_sts_mode: MtaStsMode::Enforce,
            mta_sts_max_age_s: 86_400,
            imap: Some(143),
            imaps: Some(993),
            pop3: None,
            pop3s: Some(995),
            submission: Some(587),
            submissions: None,
            jmap: Some(443),
        }
    }

    #[test]
    fn the_policy_and_its_id() {
        let p = mta_sts_policy(&face());
        assert_eq!(
            p,
            "version: STSv1\r\nmode: enforce\r\nmx: mail.example.org\r\nmx: mx2.example.org\r\nmax_age: 86400\r\n"
        );
        let id = mta_sts_id(&p);
        assert!(id.len() <= 32 && id.bytes().all(|b| b.is_ascii_alphanumeric()));
        let mut other = face();
        other.mta_sts_mode = MtaStsMode::Testing;
        assert_ne!(mta_sts_id(&mta_sts_policy(&other)), id, "a new policy, a new id");
    }

    #[test]
    fn records_name_every_service() {
        let lines: Vec<String> = records(&face(), "example.org", None)
            .iter()
            .map(Record::zone_line)
            .collect();
        let text = lines.join("\n");
        for want in [
            "example.org. 3600 IN MX 10 mail.example.org.",
            "example.org. 3600 IN MX 20 mx2.example.org.",
            "_dmarc.example.org. 3600 IN TXT \"v=DMARC1; p=reject; rua=mailto:postmaster@example.org\"",
            "_imaps._tcp.example.org. 3600 IN SRV 0 1 993 mail.example.org.",
            "_pop3s._tcp.example.org. 3600 IN SRV 0 1 995 mail.example.org.",
            "_pop3._tcp.example.org. 3600 IN SRV 0 0 0 .",
            "_submissions._tcp.example.org. 3600 IN SRV 0 0 0 .",
            "_jmap._tcp.example.org. 3600 IN SRV 0 1 443 mail.example.org.",
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
    }

    #[test]
    fn long_txt_values_are_split_at_255() {
        let v = "k".repeat(300);
        assert_eq!(txt(&v), format!("\"{}\" \"{}\"", "k".repeat(255), "k".repeat(45)));
    }

    #[test]
    fn autoconfig_lists_what_is_on_and_escapes() {
        let x = autoconfig_xml(&face(), "a&b.org");
        assert!(x.contains("<emailProvider id=\"a&amp;b.org\">"), "{x}");
        assert_eq!(x.matches("<incomingServer").count(), 3);
        assert!(x.find("type=\"imap\"") < x.find("type=\"pop3\""), "IMAP first: {x}");
        assert_eq!(x.matches("<outgoingServer").count(), 1, "no submissions listener: {x}");
    }
}
