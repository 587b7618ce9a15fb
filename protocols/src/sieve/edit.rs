//! editheader (RFC 5293): adding and deleting header fields of the
//! message the rest of the script (and the mailbox) sees.

use super::message::{Field, MessageView};

/// Fields a script may neither add nor delete (RFC 5293 §6: trace
/// fields; Auto-Submitted keeps vacation loops detectable).
const PROTECTED: &[&str] = &["received", "auto-submitted"];
/// Field values a script may add, in bytes.
pub const VALUE_BYTES_MAX: usize = 1024;

pub fn protected(name: &str) -> bool {
    PROTECTED.iter().any(|p| p.eq_ignore_ascii_case(name))
}

pub fn add(msg: &mut MessageView<'_>, last: bool, name: String, value: String) {
    if protected(&name) || !super::compile::valid_header_name(&name) {
        return;
    }
    let mut value: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    while value.len() > VALUE_BYTES_MAX {
        value.pop();
    }
    let field = Field { name, value };
    if last {
        msg.fields.push(field);
    } else {
        msg.fields.insert(0, field);
    }
    msg.edited = true;
}

/// Deletes the occurrences of `name` that `keep_this(occurrence, count,
/// decoded value)` says go (its answer: delete or not).
pub fn delete(msg: &mut MessageView<'_>, name: &str, mut goes: impl FnMut(usize, usize, &str) -> bool) {
    if protected(name) {
        return;
    }
    let count = msg.fields.iter().filter(|f| f.name.eq_ignore_ascii_case(name)).count();
    let mut n = 0;
    let before = msg.fields.len();
    msg.fields.retain(|f| {
        if !f.name.eq_ignore_ascii_case(name) {
            return true;
        }
        n += 1;
        !goes(n, count, &super::message::decode_words(&f.value))
    });
    msg.edited |= msg.fields.len() != before;
}
