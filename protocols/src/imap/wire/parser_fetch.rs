//! FETCH and STORE arguments: the FETCH item list (macros, BODY[section]
//! and BINARY[part] with partial ranges, CHANGEDSINCE/VANISHED modifiers)
//! and the STORE action with its flags (UNCHANGEDSINCE modifier). Called
//! from [`super::parser`] once the sequence set is read.

use super::parser_reader::{R, Reader, err};
use super::sequence::SequenceSet;
use super::types::{FetchAttr, FetchCommand, Partial, Section, SectionText, StoreCommand, StoreMode};

pub(super) fn fetch(r: &mut Reader<'_>, uid: bool, set: SequenceSet) -> R<FetchCommand> {
    use FetchAttr as A;
    let mut attrs = if r.peek() == Some(b'(') {
        let attrs = r.list(fetch_attr)?;
        if attrs.is_empty() {
            return err("empty FETCH item list");
        }
        attrs
    } else if r.eat_word("ALL") {
        vec![A::Flags, A::InternalDate, A::Rfc822Size, A::Envelope]
    } else if r.eat_word("FAST") {
        vec![A::Flags, A::InternalDate, A::Rfc822Size]
    } else if r.eat_word("FULL") {
        vec![A::Flags, A::InternalDate, A::Rfc822Size, A::Envelope, A::Body]
    } else {
        vec![fetch_attr(r)?]
    };
    let (mut changed_since, mut vanished) = (None, false);
    if r.more() {
        r.sp()?;
        r.list(|r| {
            if r.eat_word("CHANGEDSINCE") {
                r.sp()?;
                changed_since = Some(r.number64()?);
            } else if r.eat_word("VANISHED") {
                vanished = true;
            } else {
                return err("unknown FETCH modifier");
            }
            Ok(())
        })?;
    }
    if vanished && !(uid && changed_since.is_some()) {
        return err("VANISHED needs UID FETCH and CHANGEDSINCE");
    }
    if uid && !attrs.contains(&A::Uid) {
        attrs.insert(0, A::Uid);
    }
    if changed_since.is_some() && !attrs.contains(&A::ModSeq) {
        attrs.push(A::ModSeq);
    }
    Ok(FetchCommand {
        uid,
        set,
        attrs,
        changed_since,
        vanished,
    })
}

fn fetch_attr(r: &mut Reader<'_>) -> R<FetchAttr> {
    use FetchAttr as A;
    let name = r
        .take_while(|b| b.is_ascii_alphanumeric() || b == b'.')
        .to_ascii_uppercase();
    let partial = |r: &mut Reader<'_>| -> R<Option<Partial>> {
        if !r.eat(b'<') {
            return Ok(None);
        }
        let offset = r.number64()?;
        r.expect(b'.', "expected '.' in a partial range")?;
        let count = r.number64()?;
        r.expect(b'>', "expected '>'")?;
        if count == 0 {
            return err("a partial range cannot be empty");
        }
        Ok(Some(Partial { offset, count }))
    };
    Ok(match name.as_slice() {
        b"ENVELOPE" => A::Envelope,
        b"FLAGS" => A::Flags,
        b"INTERNALDATE" => A::InternalDate,
        b"RFC822" => A::Rfc822,
        b"RFC822.HEADER" => A::Rfc822Header,
        b"RFC822.SIZE" => A::Rfc822Size,
        b"RFC822.TEXT" => A::Rfc822Text,
        b"BODYSTRUCTURE" => A::BodyStructure,
        b"UID" => A::Uid,
        b"MODSEQ" => A::ModSeq,
        b"EMAILID" => A::EmailId,
        b"THREADID" => A::ThreadId,
        b"BODY" if r.peek() != Some(b'[') => A::Body,
        b"BODY" | b"BODY.PEEK" => A::BodySection {
            peek: name.len() > 4,
            section: section(r)?,
            partial: partial(r)?,
        },
        b"BINARY" | b"BINARY.PEEK" => A::Binary {
            peek: name.len() > 6,
            part: binary_part(r)?,
            partial: partial(r)?,
        },
        b"BINARY.SIZE" => A::BinarySize { part: binary_part(r)? },
        _ => return err("unknown FETCH item"),
    })
}

fn section(r: &mut Reader<'_>) -> R<Section> {
    r.expect(b'[', "expected '['")?;
    let mut s = Section::default();
    while r.peek() != Some(b']') {
        if r.peek().is_some_and(|b| b.is_ascii_digit()) {
            s.part.push(r.nz_number()?);
            if r.eat(b'.') {
                continue;
            }
            break;
        }
        let text = r
            .take_while(|b| b.is_ascii_alphabetic() || b == b'.')
            .to_ascii_uppercase();
        s.text = Some(match text.as_slice() {
            b"HEADER" => SectionText::Header,
            b"HEADER.FIELDS" => SectionText::HeaderFields(fields(r)?),
            b"HEADER.FIELDS.NOT" => SectionText::HeaderFieldsNot(fields(r)?),
            b"TEXT" => SectionText::Text,
            b"MIME" if !s.part.is_empty() => SectionText::Mime,
            _ => return err("invalid section"),
        });
        break;
    }
    r.expect(b']', "expected ']'")?;
    Ok(s)
}

fn fields(r: &mut Reader<'_>) -> R<Vec<String>> {
    r.sp()?;
    let names = r.list(Reader::text)?;
    if names.is_empty() {
        err("empty header field list")
    } else {
        Ok(names)
    }
}

fn binary_part(r: &mut Reader<'_>) -> R<Vec<u32>> {
    r.expect(b'[', "expected '['")?;
    let mut part = Vec::new();
    while r.peek() != Some(b']') {
        if !part.is_empty() {
            r.expect(b'.', "expected '.' between part numbers")?;
        }
        part.push(r.nz_number()?);
    }
    r.expect(b']', "expected ']'")?;
    Ok(part)
}

pub(super) fn store(r: &mut Reader<'_>, uid: bool, set: SequenceSet) -> R<StoreCommand> {
    let mut unchanged_since = None;
    if r.peek() == Some(b'(') {
        r.list(|r| {
            if !r.eat_word("UNCHANGEDSINCE") {
                return err("unknown STORE modifier");
            }
            r.sp()?;
            unchanged_since = Some(r.number64()?);
            Ok(())
        })?;
        r.sp()?;
    }
    let action = r
        .take_while(|b| b.is_ascii_alphabetic() || b"+-.".contains(&b))
        .to_ascii_uppercase();
    let (mode, rest) = match action.split_first() {
        Some((b'+', rest)) => (StoreMode::Add, rest),
        Some((b'-', rest)) => (StoreMode::Remove, rest),
        _ => (StoreMode::Replace, &action[..]),
    };
    let silent = match rest {
        b"FLAGS" => false,
        b"FLAGS.SILENT" => true,
        _ => return err("expected FLAGS, +FLAGS or -FLAGS"),
    };
    r.sp()?;
    let flags = if r.peek() == Some(b'(') {
        r.flag_list()?
    } else {
        let mut flags = vec![r.flag()?];
        while r.more() {
            r.sp()?;
            flags.push(r.flag()?);
        }
        flags
    };
    Ok(StoreCommand {
        uid,
        set,
        unchanged_since,
        mode,
        silent,
        flags,
    })
}
