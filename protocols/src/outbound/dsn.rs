//! Delivery status notifications (RFC 3464): a `multipart/report` with a
//! human-readable part, the `message/delivery-status` part and the original
//! message (RET=FULL) or its header (RET=HDRS, or when the original is too
//! large to return), sent from the null reverse path so it is never
//! answered by another DSN.

use meshmail_storage::model::id_to_string;
use meshmail_storage::model::outbound::{DsnRet, OutboundItem};

/// An original larger than this is returned as its header only.
pub const RETURN_FULL_MAX_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Failed,
    Delayed,
    /// Handed to a peer that does not offer DSN (RFC 3464 §2.3.3).
    Relayed,
}

impl Action {
    fn label(self) -> &'static str {
        match self {
            Action::Failed => "failed",
            Action::Delayed => "delayed",
            Action::Relayed => "relayed",
        }
    }
}

/// What one recipient's report says.
#[derive(Debug, Clone)]
pub struct Report {
    pub action: Action,
    /// RFC 3463 status, e.g. "5.1.1".
    pub status: String,
    /// The peer that answered, if one did.
    pub remote_mta: Option<String>,
    /// The peer's reply ("smtp; 550 5.1.1 ...") or our own reason.
    pub diagnostic: String,
    pub last_attempt_ms: u64,
    /// For delays: when we give up.
    pub retry_until_ms: Option<u64>,
}

fn rfc822_date(ms: u64) -> String {
    mail_parser::DateTime::from_timestamp((ms / 1000) as i64).to_rfc822()
}

/// The header of a message: everything before the first empty line.
fn header_of(raw: &[u8]) -> &[u8] {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 2)
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| p + 1))
        .unwrap_or(raw.len());
    &raw[..end]
}

/// Keeps a diagnostic on one line of printable ASCII.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { ' ' })
        .take(900)
        .collect()
}

/// Builds one DSN for the recipients of one message in `entries` (each
/// item with its report; they share the sender, who receives the DSN, the
/// body and the envelope options): one per-recipient block each (RFC 3464
/// §2.3), the action of the first entry naming the subject. Panics on an
/// empty `entries` (a caller bug).
pub fn build(hostname: &str, entries: &[(&OutboundItem, &Report)], original: &[u8], now_ms: u64) -> Vec<u8> {
    let (item, report) = *entries.first().expect("a DSN reports on at least one recipient");
    let boundary = format!("=_meshmail_{}", id_to_string(&meshmail_storage::model::new_id()));
    let (subject, intro) = match report.action {
        Action::Failed => (
            "Undelivered Mail Returned to Sender",
            "Your message could not be delivered to one or more recipients.\r\n\
             It will not be retried. The details are below.",
        ),
        Action::Delayed => (
            "Delayed Mail (still being retried)",
            "Your message has not been delivered yet. It is still being retried;\r\n\
             you need not send it again. The details are below.",
        ),
        Action::Relayed => (
            "Successful Mail Relay",
            "Your message was handed to a server that does not report delivery.\r\n\
             This is the last notice you will get for it.",
        ),
    };
    let mut out = String::with_capacity(4096);
    out.push_str(&format!("From: Mail Delivery System <MAILER-DAEMON@{hostname}>\r\n"));
    out.push_str(&format!("To: <{}>\r\n", item.sender));
    out.push_str(&format!("Subject: {subject}\r\n"));
    out.push_str(&format!("Date: {}\r\n", rfc822_date(now_ms)));
    out.push_str(&format!("Message-ID: <dsn.{}@{hostname}>\r\n", id_to_string(&item.id)));
    // RFC 3834: machine-made, never to be auto-answered.
    out.push_str("Auto-Submitted: auto-replied\r\n");
    out.push_str("MIME-Version: 1.0\r\n");
    out.push_str(&format!(
        "Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"{boundary}\"\r\n\r\n"
    ));
    out.push_str("This is a MIME-encapsulated delivery status notification.\r\n\r\n");
    // 1. Human-readable.
    out.push_str(&format!(
        "--{boundary}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n"
    ));
    out.push_str(&format!(
        "This is the mail system at {hostname}.\r\n\r\n{intro}\r\n\r\n"
    ));
    for (i, r) in entries {
        out.push_str(&format!("<{}>: {}\r\n\r\n", i.recipient, one_line(&r.diagnostic)));
    }
    // 2. Machine-readable (RFC 3464 §2): the per-message fields, then one
    // block per recipient.
    out.push_str(&format!(
        "--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\n"
    ));
    out.push_str(&format!("Reporting-MTA: dns; {hostname}\r\n"));
    if let Some(envid) = &item.dsn.envid {
        out.push_str(&format!("Original-Envelope-Id: {}\r\n", one_line(envid)));
    }
    out.push_str(&format!("Arrival-Date: {}\r\n", rfc822_date(item.queued_ms)));
    for (i, r) in entries {
        out.push_str("\r\n");
        recipient_block(&mut out, i, r);
    }
    out.push_str("\r\n");
    // 3. The original, or its header.
    let full = item.dsn.ret != Some(DsnRet::Hdrs)
        && report.action == Action::Failed
        && original.len() <= RETURN_FULL_MAX_BYTES;
    let mut bytes = out.into_bytes();
    if full {
        bytes.extend_from_slice(format!("--{boundary}\r\nContent-Type: message/rfc822\r\n\r\n").as_bytes());
        bytes.extend_from_slice(original);
    } else {
        bytes.extend_from_slice(format!("--{boundary}\r\nContent-Type: text/rfc822-headers\r\n\r\n").as_bytes());
        bytes.extend_from_slice(header_of(original));
    }
    if !bytes.ends_with(b"\r\n") {
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    bytes
}

/// One per-recipient block (RFC 3464 §2.3), without the blank line before it.
fn recipient_block(out: &mut String, item: &OutboundItem, report: &Report) {
    if let Some(orcpt) = &item.dsn.orcpt {
        out.push_str(&format!("Original-Recipient: {}\r\n", one_line(orcpt)));
    }
    out.push_str(&format!("Final-Recipient: rfc822; {}\r\n", item.recipient));
    out.push_str(&format!("Action: {}\r\n", report.action.label()));
    out.push_str(&format!("Status: {}\r\n", report.status));
    if let Some(mta) = &report.remote_mta {
        out.push_str(&format!("Remote-MTA: dns; {mta}\r\n"));
    }
    out.push_str(&format!("Diagnostic-Code: {}\r\n", one_line(&report.diagnostic)));
    out.push_str(&format!(
        "Last-Attempt-Date: {}\r\n",
        rfc822_date(report.last_attempt_ms)
    ));
    if let Some(until) = report.retry_until_ms {
        out.push_str(&format!("Will-Retry-Until: {}\r\n", rfc822_date(until)));
    }
}

/// The RFC 3463 status for a reply: its enhanced code when it has one,
/// else the class (`5.0.0` / `4.0.0`).
pub fn status_of(code: u16, enhanced: Option<&str>) -> String {
    match enhanced {
        Some(e) => e.to_string(),
        None if code >= 500 => "5.0.0".into(),
        None => "4.0.0".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshmail_storage::model::messages::BodyRef;
    use meshmail_storage::model::outbound::DsnParams;

    fn item() -> OutboundItem {
        OutboundItem {
            id: [1; 16],
            acceptance_id: [2; 16],
            sender: "alice@local.test".into(),
            recipient: "bob@remote.test".into(),
            body: BodyRef {
                hash: String::new(),
                size: 0,
                inline: true,
            },
            queued_ms: 1_700_000_000_000,
            attempts: 1,
            last_error: None,
            shard: 0,
            next_attempt_ms: 0,
            last_attempt_ms: None,
            dsn: DsnParams {
                envid: Some("E1".into()),
                ret: Some(DsnRet::Hdrs),
                ..DsnParams::default()
            },
            smtputf8: false,
            eight_bit: false,
            require_tls: false,
            tls_optional: false,
            delay_warned: false,
            claim: None,
            bounce_requested: None,
            dsn_id: None,
        }
    }

    #[test]
    fn a_failure_report_parses_as_multipart_report() {
        let original = b"Subject: hi\r\nFrom: alice@local.test\r\n\r\nsecret body\r\n";
        let report = Report {
            action: Action::Failed,
            status: "5.1.1".into(),
            remote_mta: Some("mx.remote.test".into()),
            diagnostic: "smtp; 550 5.1.1 no such user".into(),
            last_attempt_ms: 1_700_000_100_000,
            retry_until_ms: None,
        };
        let raw = build("mail.local.test", &[(&item(), &report)], original, 1_700_000_100_000);
        use mail_parser::MimeHeaders;
        let msg = mail_parser::MessageParser::default().parse(&raw).unwrap();
        assert_eq!(msg.content_type().unwrap().subtype(), Some("report"));
        let text = String::from_utf8_lossy(&raw);
        assert!(text.contains("Final-Recipient: rfc822; bob@remote.test"));
        assert!(text.contains("Status: 5.1.1"));
        assert!(text.contains("Original-Envelope-Id: E1"));
        // RET=HDRS: the header, not the body.
        assert!(text.contains("Subject: hi") && !text.contains("secret body"));
    }

    #[test]
    fn one_report_for_every_failed_recipient_of_a_message() {
        let (a, mut b) = (item(), item());
        b.recipient = "carol@remote.test".into();
        let report = |status: &str| Report {
            action: Action::Failed,
            status: status.into(),
            remote_mta: Some("mx.remote.test".into()),
            diagnostic: format!("smtp; 550 {status} no"),
            last_attempt_ms: 1_700_000_100_000,
            retry_until_ms: None,
        };
        let (ra, rb) = (report("5.1.1"), report("5.2.2"));
        let raw = build(
            "mail.local.test",
            &[(&a, &ra), (&b, &rb)],
            b"Subject: hi\r\n\r\nx\r\n",
            1,
        );
        let text = String::from_utf8_lossy(&raw);
        assert_eq!(text.matches("Reporting-MTA:").count(), 1, "{text}");
        assert_eq!(text.matches("Final-Recipient:").count(), 2, "{text}");
        assert!(text.contains("Final-Recipient: rfc822; carol@remote.test\r\nAction: failed\r\nStatus: 5.2.2"));
        // Blocks are separated by a blank line (RFC 3464 §2.1).
        assert!(text.contains("Arrival-Date: ") && text.contains("\r\n\r\nFinal-Recipient: rfc822; bob@remote.test"));
    }
}
