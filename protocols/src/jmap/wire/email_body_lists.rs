//! textBody, htmlBody and attachments (RFC 8621 §4.1.4): the RFC's
//! `parseStructure` algorithm, step for step, over mail-parser's part tree.
//! mail-parser's own lists differ from it (an inline image beside a
//! multipart/alternative lands in its attachments only), and clients render
//! from these lists, so they must be the RFC's.

use mail_parser::{Message, MimeHeaders, PartType};

use super::email_parts::{PARTS_MAX, media_type};
use crate::summary::MAX_DEPTH;

/// The three lists, as indexes into `Message::parts` (the part ids).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BodyLists {
    pub text: Vec<usize>,
    pub html: Vec<usize>,
    pub attachments: Vec<usize>,
}

/// The lists of a parsed message: `parseStructure([bodyStructure], 'mixed', false, ...)`.
pub fn body_lists(msg: &Message<'_>) -> BodyLists {
    let mut out = BodyLists::default();
    if !msg.parts.is_empty() {
        let walk = Walk { msg };
        walk.parse_structure(
            &[0],
            "mixed",
            false,
            Lists {
                text: Some(&mut out.text),
                html: Some(&mut out.html),
                attachments: &mut out.attachments,
            },
            0,
        );
    }
    out
}

fn is_inline_media_type(t: &str) -> bool {
    t.starts_with("image/") || t.starts_with("audio/") || t.starts_with("video/")
}

/// The lists as one level of the algorithm sees them: textBody or htmlBody
/// is `null` (None) below a text/plain or text/html part met inside an
/// alternative, for the rest of that level only.
struct Lists<'a> {
    text: Option<&'a mut Vec<usize>>,
    html: Option<&'a mut Vec<usize>>,
    attachments: &'a mut Vec<usize>,
}

struct Walk<'m, 'x> {
    msg: &'m Message<'x>,
}

impl Walk<'_, '_> {
    /// The children of a multipart part (bounded: parts past [`PARTS_MAX`]
    /// are not described, and a child index always follows its parent).
    fn children(&self, index: usize) -> Vec<usize> {
        match self.msg.parts.get(index).map(|p| &p.body) {
            Some(PartType::Multipart(c)) => c
                .iter()
                .map(|&c| c as usize)
                .filter(|&c| c > index && c < self.msg.parts.len().min(PARTS_MAX))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The RFC's "is this a body part rather than an attachment".
    fn is_inline(&self, index: usize, position: usize, multipart_type: &str, media: &str) -> bool {
        let Some(part) = self.msg.parts.get(index) else {
            return false;
        };
        let disposition = part.content_disposition().map(|d| d.c_type.to_ascii_lowercase());
        disposition.as_deref() != Some("attachment")
            && (media == "text/plain" || media == "text/html" || is_inline_media_type(media))
            // In multipart/related only the first part is inline; a named
            // text part that is not first is taken as an attachment.
            && (position == 0
                || (multipart_type != "related"
                    && (is_inline_media_type(media) || part.attachment_name().is_none())))
    }

    fn parse_structure(
        &self,
        parts: &[usize],
        multipart_type: &str,
        in_alternative: bool,
        mut l: Lists<'_>,
        depth: usize,
    ) {
        let text_length = l.text.as_ref().map(|t| t.len());
        let html_length = l.html.as_ref().map(|h| h.len());
        for (position, &index) in parts.iter().enumerate() {
            let Some(part) = self.msg.parts.get(index) else {
                continue;
            };
            let media = media_type(part);
            if matches!(part.body, PartType::Multipart(_)) {
                if depth >= MAX_DEPTH {
                    continue; // a hostile tree stays bounded
                }
                let sub = media.split_once('/').map_or("", |(_, s)| s).to_string();
                let lists = Lists {
                    text: l.text.as_deref_mut(),
                    html: l.html.as_deref_mut(),
                    attachments: &mut *l.attachments,
                };
                let children = self.children(index);
                self.parse_structure(
                    &children,
                    &sub,
                    in_alternative || sub == "alternative",
                    lists,
                    depth + 1,
                );
            } else if self.is_inline(index, position, multipart_type, &media) {
                if multipart_type == "alternative" {
                    let list = match media.as_str() {
                        "text/plain" => l.text.as_deref_mut(),
                        "text/html" => l.html.as_deref_mut(),
                        _ => Some(&mut *l.attachments),
                    };
                    if let Some(list) = list {
                        list.push(index);
                    }
                    continue;
                } else if in_alternative {
                    if media == "text/plain" {
                        l.html = None;
                    }
                    if media == "text/html" {
                        l.text = None;
                    }
                }
                if let Some(t) = l.text.as_deref_mut() {
                    t.push(index);
                }
                if let Some(h) = l.html.as_deref_mut() {
                    h.push(index);
                }
                if (l.text.is_none() || l.html.is_none()) && is_inline_media_type(&media) {
                    l.attachments.push(index);
                }
            } else {
                l.attachments.push(index);
            }
        }
        if multipart_type == "alternative"
            && let (Some(text), Some(html), Some(text_length), Some(html_length)) =
                (l.text, l.html, text_length, html_length)
        {
            // Only an HTML part was found: it is the text body too.
            if text.len() == text_length && html.len() != html_length {
                text.extend_from_slice(&html[html_length..]);
            }
            // Only a plain-text part was found: it is the HTML body too.
            if html.len() == html_length && text.len() != text_length {
                html.extend_from_slice(&text[text_length..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_parser::MessageParser;

    fn lists(raw: &str) -> BodyLists {
        let msg = MessageParser::default().parse(raw.as_bytes()).unwrap();
        body_lists(&msg)
    }

    fn types(raw: &str, ids: &[usize]) -> Vec<String> {
        let msg = MessageParser::default().parse(raw.as_bytes()).unwrap();
        ids.iter().map(|&i| media_type(&msg.parts[i])).collect()
    }

    /// The RFC's own example shape: mixed(plain, alternative(plain,
    /// html), inline image, attachment).
    const MIXED: &str = "From: a@x\r\nContent-Type: multipart/mixed; boundary=m\r\n\r\n\
--m\r\nContent-Type: text/plain\r\n\r\nintro\r\n\
--m\r\nContent-Type: multipart/alternative; boundary=a\r\n\r\n\
--a\r\nContent-Type: text/plain\r\n\r\nplain\r\n\
--a\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n\
--a--\r\n\
--m\r\nContent-Type: image/png\r\nContent-Disposition: inline; filename=i.png\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n\
--m\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=x.pdf\r\n\r\npdf\r\n\
--m--\r\n";

    #[test]
    fn an_inline_image_next_to_an_alternative_is_body_in_both_lists() {
        let l = lists(MIXED);
        assert_eq!(types(MIXED, &l.text), ["text/plain", "text/plain", "image/png"]);
        assert_eq!(types(MIXED, &l.html), ["text/plain", "text/html", "image/png"]);
        assert_eq!(types(MIXED, &l.attachments), ["application/pdf"]);
    }

    #[test]
    fn html_only_alternative_is_the_text_body_too() {
        let raw = "Content-Type: multipart/alternative; boundary=a\r\n\r\n--a\r\nContent-Type: text/html\r\n\r\n<b>x</b>\r\n--a--\r\n";
        let l = lists(raw);
        assert_eq!(l.text, l.html);
        assert_eq!(types(raw, &l.text), ["text/html"]);
        assert!(l.attachments.is_empty());
    }

    #[test]
    fn related_keeps_only_its_first_part_inline() {
        let raw = "Content-Type: multipart/alternative; boundary=a\r\n\r\n\
--a\r\nContent-Type: text/plain\r\n\r\nplain\r\n\
--a\r\nContent-Type: multipart/related; boundary=r\r\n\r\n\
--r\r\nContent-Type: text/html\r\n\r\n<img src=cid:i>\r\n\
--r\r\nContent-Type: image/gif\r\nContent-ID: <i>\r\n\r\nGIF\r\n\
--r--\r\n--a--\r\n";
        let l = lists(raw);
        assert_eq!(types(raw, &l.text), ["text/plain"]);
        assert_eq!(types(raw, &l.html), ["text/html"]);
        assert_eq!(types(raw, &l.attachments), ["image/gif"]);
    }

    #[test]
    fn a_plain_message_and_a_named_text_part() {
        let raw = "Subject: x\r\n\r\nhello\r\n";
        let l = lists(raw);
        assert_eq!((l.text.as_slice(), l.html.as_slice()), (&[0][..], &[0][..]));
        let raw = "Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\n\r\nbody\r\n--m\r\nContent-Type: text/plain; name=notes.txt\r\n\r\nnotes\r\n--m--\r\n";
        let l = lists(raw);
        assert_eq!(l.text.len(), 1);
        assert_eq!(
            l.attachments.len(),
            1,
            "a named text part after the first is an attachment"
        );
    }

    #[test]
    fn an_image_inside_an_alternative_is_an_attachment_only() {
        let raw = "Content-Type: multipart/alternative; boundary=a\r\n\r\n\
--a\r\nContent-Type: text/plain\r\n\r\nplain\r\n\
--a\r\nContent-Type: image/png\r\n\r\nPNG\r\n--a--\r\n";
        let l = lists(raw);
        assert_eq!(types(raw, &l.attachments), ["image/png"]);
        assert_eq!(
            types(raw, &l.html),
            ["text/plain"],
            "plain-only alternative: its html body is the plain part"
        );
    }
}
