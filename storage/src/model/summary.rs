//! The typed summary of a message: what an IMAP (or JMAP) server needs to
//! know about it without reading it again — the ENVELOPE, the BODYSTRUCTURE
//! tree and the byte offsets of every part's header and body in the raw
//! message, so that `BODY[1.2.MIME]` or `BODY[1.TEXT]` is a slice of the
//! stored bytes.
//!
//! The types live here, in the data model, because the store keeps them
//! (the write-once `msum` value, [`super::summary_codec`]) and reads fields
//! of them itself (threading reads Message-ID, In-Reply-To, References).
//! The protocols crate fills them in (`summary::summarize`, its parser)
//! and renders them (IMAP FETCH, JMAP Email/get). The serde derives are the
//! JSON form earlier builds stored and the mesh and quarantine records
//! carry; the stored form of this build is binary.

use serde::{Deserialize, Serialize};

/// The summary of one message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// The parser refused or panicked: `structure` is a text/plain part
    /// spanning the whole message and the envelope is empty.
    pub parse_failed: bool,
    /// Octets in the raw message (RFC822.SIZE).
    pub size: u64,
    /// Octets of the header section including the empty line that ends it
    /// (`BODY[HEADER]`); the whole message when there is no empty line.
    pub header_len: u64,
    /// Where the body starts (`BODY[TEXT]` is `raw[body_offset..]`).
    pub body_offset: u64,
    pub envelope: Envelope,
    pub structure: BodyPart,
    /// JMAP `preview` (up to 256 characters of the text body) and
    /// `hasAttachment`, computed here so a message list never reads bodies.
    /// None in summaries stored before they were kept.
    pub preview: Option<String>,
    pub has_attachment: Option<bool>,
}

/// An unstructured header value: as written and RFC 2047-decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeaderText {
    pub raw: String,
    pub decoded: String,
}

/// One IMAP address structure `(name adl mailbox host)`. A group is a
/// start marker (mailbox = group name, host = None) and an end marker (all
/// None) around its members, as RFC 3501 §7.4.2 lays it out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImapAddress {
    /// Display name, RFC 2047-decoded.
    pub name: Option<String>,
    /// Display name as written (encoded words and 8-bit bytes kept), what
    /// IMAP's ENVELOPE sends. None in summaries stored before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_name: Option<String>,
    /// Source route: always None (obsolete syntax, dropped by the parser).
    pub adl: Option<String>,
    pub mailbox: Option<String>,
    pub host: Option<String>,
}

/// An address header: its raw value and the IMAP address list (empty means
/// NIL).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AddressList {
    pub raw: Option<String>,
    pub addresses: Vec<ImapAddress>,
}

/// The IMAP ENVELOPE (RFC 3501 §7.4.2 / RFC 9051 §7.5.2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Envelope {
    /// The Date header as written.
    pub date: Option<String>,
    /// The Date header as seconds since the Unix epoch, when it parses.
    pub date_timestamp: Option<i64>,
    pub subject: Option<HeaderText>,
    /// The earlier Subject headers of a message that has several (SEARCH
    /// SUBJECT looks at every one, as Dovecot does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_subjects: Vec<HeaderText>,
    pub from: AddressList,
    /// Set to `from` when absent or empty (RFC 3501: the server does this).
    pub sender: AddressList,
    /// Set to `from` when absent or empty.
    pub reply_to: AddressList,
    pub to: AddressList,
    pub cc: AddressList,
    pub bcc: AddressList,
    pub in_reply_to: Option<String>,
    pub message_id: Option<String>,
    /// The References header as written (threading; not part of IMAP's
    /// ENVELOPE). Absent in summaries stored before it was kept.
    pub references: Option<String>,
}

/// Content-Disposition: its value and parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Disposition {
    pub kind: String,
    pub params: Vec<(String, String)>,
}

/// One node of BODYSTRUCTURE, with where its bytes are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BodyPart {
    /// Lowercase media type (`text`, `multipart`, ...).
    pub media_type: String,
    /// Lowercase subtype (`plain`, `mixed`, ...).
    pub subtype: String,
    /// Type and subtype as written, when that is not lowercase (IMAP
    /// sends them as written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written_type: Option<(String, String)>,
    /// Content-Type parameters as written: RFC 2231 continuations joined,
    /// extended values (`name*`) left encoded. A text part without a
    /// charset gets `charset=us-ascii` (RFC 2045 §5.2).
    pub params: Vec<(String, String)>,
    /// Content-ID as written.
    pub id: Option<String>,
    /// Content-Description as written.
    pub description: Option<String>,
    /// Content-Transfer-Encoding as written, `7bit` when absent.
    pub encoding: String,
    /// Octets of the body in its transfer encoding.
    pub size: u64,
    /// Lines of the body, for text/* and message/rfc822 parts.
    pub lines: Option<u64>,
    /// Content-MD5: never computed.
    pub md5: Option<String>,
    pub disposition: Option<Disposition>,
    pub language: Vec<String>,
    /// Content-Location as written.
    pub location: Option<String>,
    /// Offset of the part's MIME header (`BODY[n.MIME]` is
    /// `raw[header_offset..body_offset]`).
    pub header_offset: u64,
    /// Offset of the part's body (`BODY[n]` is `raw[body_offset..end_offset]`).
    pub body_offset: u64,
    pub end_offset: u64,
    /// The parts of a multipart, in order (never empty for a multipart).
    pub children: Vec<BodyPart>,
    /// For message/rfc822 and message/global in identity encoding: the
    /// encapsulated message. None for an encoded one (its bytes are not in
    /// the raw message as they are), which an IMAP server then describes
    /// as a basic part.
    pub message: Option<Box<NestedMessage>>,
}

/// A message inside a message/rfc822 part: `BODY[n.HEADER]` is
/// `raw[header_offset..body_offset]`, `BODY[n.TEXT]` is
/// `raw[body_offset..structure.end_offset]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NestedMessage {
    pub header_offset: u64,
    pub body_offset: u64,
    pub envelope: Envelope,
    pub structure: BodyPart,
}

impl BodyPart {
    pub fn is_multipart(&self) -> bool {
        self.media_type == "multipart"
    }
}

impl Summary {
    /// The part an IMAP section number names (`[1, 2]` for `1.2`), with
    /// RFC 3501 §6.4.5 numbering: a non-multipart message has only part 1
    /// (its body), and the numbers after a message/rfc822 part count in the
    /// encapsulated message. A single part inside a multipart has itself
    /// as its only subpart (`1.1` of a multipart's text part is that part,
    /// as Dovecot reads §6.4.5's "only a part 1"). None for an empty path
    /// or a part that does not exist.
    pub fn part(&self, path: &[u32]) -> Option<&BodyPart> {
        let (&first, rest) = path.split_first()?;
        let mut cur = nth_in_message(&self.structure, first)?;
        // Was `cur` reached as the child of a multipart?
        let mut in_multipart = self.structure.is_multipart();
        for &n in rest {
            let parent_multipart = cur.is_multipart();
            cur = if parent_multipart {
                cur.children.get((n as usize).checked_sub(1)?)?
            } else if let Some(m) = &cur.message {
                nth_in_message(&m.structure, n)?
            } else if in_multipart {
                (n == 1).then_some(cur)?
            } else {
                return None;
            };
            in_multipart = parent_multipart;
        }
        Some(cur)
    }
}

/// Part `n` of a message whose body structure is `root`.
fn nth_in_message(root: &BodyPart, n: u32) -> Option<&BodyPart> {
    if root.is_multipart() {
        root.children.get((n as usize).checked_sub(1)?)
    } else {
        (n == 1).then_some(root)
    }
}

/// A summary in the JSON shape the mesh and quarantine records have always
/// carried it in: two fields, `envelope` and `body_structure` (the rest of
/// the summary). `#[serde(flatten)]` it into a record, so records written
/// and nodes running before the summary was typed still read (null, as
/// some carried for "no summary", reads as the empty one).
/// Boxed: records carrying it travel inside enums (mesh requests), and a
/// summary is ~1 KB.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SplitSummary(pub Box<Summary>);

/// The summary without its envelope, borrowed (serialization only).
#[derive(Serialize)]
struct BodyView<'a> {
    parse_failed: bool,
    size: u64,
    header_len: u64,
    body_offset: u64,
    structure: &'a BodyPart,
    preview: &'a Option<String>,
    has_attachment: Option<bool>,
}

impl Serialize for SplitSummary {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let s = &self.0;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("envelope", &s.envelope)?;
        map.serialize_entry(
            "body_structure",
            &BodyView {
                parse_failed: s.parse_failed,
                size: s.size,
                header_len: s.header_len,
                body_offset: s.body_offset,
                structure: &s.structure,
                preview: &s.preview,
                has_attachment: s.has_attachment,
            },
        )?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for SplitSummary {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Split {
            #[serde(default)]
            envelope: Option<Envelope>,
            #[serde(default)]
            body_structure: Option<Summary>,
        }
        let split = Split::deserialize(deserializer)?;
        let mut summary = split.body_structure.unwrap_or_default();
        summary.envelope = split.envelope.unwrap_or_default();
        Ok(SplitSummary(Box::new(summary)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Record {
        n: u32,
        #[serde(flatten)]
        summary: SplitSummary,
    }

    #[test]
    fn split_summaries_keep_the_json_shape_records_always_had() {
        let s = Summary {
            size: 9,
            preview: Some("p".into()),
            envelope: Envelope {
                message_id: Some("<m@x>".into()),
                ..Envelope::default()
            },
            ..Summary::default()
        };
        let r = Record {
            n: 1,
            summary: SplitSummary(Box::new(s.clone())),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["envelope"]["message_id"], "<m@x>");
        assert_eq!(v["body_structure"]["size"], 9);
        assert!(v["body_structure"].get("envelope").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<Record>(v).unwrap(), r);
        // As earlier builds wrote it: the two fields as free JSON values
        // (the rest without its envelope), or null for no summary.
        let mut rest = serde_json::to_value(&s).unwrap();
        let env = rest.as_object_mut().unwrap().remove("envelope").unwrap();
        let old = serde_json::json!({"n": 1, "envelope": env, "body_structure": rest});
        assert_eq!(serde_json::from_value::<Record>(old).unwrap(), r);
        let nulls = serde_json::json!({"n": 2, "envelope": null, "body_structure": null});
        let back: Record = serde_json::from_value(nulls).unwrap();
        assert_eq!(back.summary, SplitSummary::default());
    }
}
