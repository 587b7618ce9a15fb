//! Runs a compiled script over one message: commands, implicit keep
//! (RFC 5228 §2.10.2), imap4flags' internal variable, variables and
//! include scopes, within a step budget and a redirect limit. Tests are
//! evaluated in [`super::eval`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::action::{Action, DuplicateMark, Outcome, VacationReply};
use super::error::{RuntimeError, SieveError};
use super::message::{Envelope, MessageView};
use super::program::{Command, FlagOp, Script, Str, Test, Vacation};
use super::variables::{self, Scope};

/// Commands, tests, comparisons and wildcard steps of one delivery.
pub const STEPS_MAX: u64 = 1_000_000;
/// Redirects one run may ask for (loops and mail bombs stay bounded).
pub const REDIRECTS_MAX: usize = 4;
/// Scripts included inside each other.
pub const INCLUDE_DEPTH_MAX: usize = 10;
/// RFC 5230 §4.1: `:days` default, and its bounds.
pub const VACATION_DAYS_DEFAULT: u64 = 7;
const VACATION_SECONDS_MAX: u64 = 90 * 86_400;
/// RFC 7352: how long a duplicate id is remembered when `:seconds` is not given.
pub const DUPLICATE_SECONDS_DEFAULT: u64 = 7 * 86_400;

/// What a run needs from outside the message: the store's answers,
/// fetched by the caller (a run itself never waits on I/O).
pub trait Env {
    fn mailbox_exists(&self, name: &str) -> bool;
    fn duplicate_seen(&self, id: &str) -> bool;
    /// A script for `include`: `None` when there is none.
    fn script(&self, personal: bool, name: &str) -> Option<Result<Arc<Script>, SieveError>>;
    fn now_s(&self) -> i64;
    /// The recipient's own addresses, lowercase (vacation's "to me").
    fn own_addresses(&self) -> &[String];
}

pub(super) enum Flow {
    Next,
    Stop,
    Return,
}

/// One script's variables (RFC 5229 scopes per script; `global` names
/// shared through [`Run::globals`]).
#[derive(Default)]
pub(super) struct Frame {
    pub locals: HashMap<String, String>,
    pub declared: HashSet<String>,
    pub matches: Vec<String>,
    pub variables: bool,
}

pub struct Run<'r, 'm, E: Env> {
    pub(super) env: &'r E,
    pub(super) msg: MessageView<'m>,
    pub(super) steps: u64,
    actions: Vec<Action>,
    implicit_keep: bool,
    pub(super) flags: String,
    pub(super) globals: HashMap<String, String>,
    included: HashSet<(bool, String)>,
    stack: Vec<(bool, String)>,
    pub(super) duplicates: Vec<DuplicateMark>,
    redirects: usize,
}

/// Runs `script` for the message `raw` delivered with `envelope`.
pub fn run<E: Env>(script: &Script, raw: &[u8], envelope: Envelope, env: &E) -> Result<Outcome, RuntimeError> {
    let mut r = Run {
        env,
        msg: MessageView::new(raw, envelope),
        steps: 0,
        actions: Vec::new(),
        implicit_keep: true,
        flags: String::new(),
        globals: HashMap::new(),
        included: HashSet::new(),
        stack: Vec::new(),
        duplicates: Vec::new(),
        redirects: 0,
    };
    let mut frame = Frame {
        variables: script.variables,
        ..Default::default()
    };
    r.block(&script.commands, &mut frame)?;
    if r.implicit_keep {
        let flags = split_flags(&r.flags);
        r.push(Action::Keep { flags })?;
    }
    Ok(Outcome {
        actions: r.actions,
        duplicates: r.duplicates,
        edited: r.msg.edited.then(|| r.msg.rebuilt()),
        steps: r.steps,
    })
}

impl<E: Env> Run<'_, '_, E> {
    pub(super) fn charge(&mut self, n: u64) -> Result<(), RuntimeError> {
        self.steps += n;
        if self.steps > STEPS_MAX {
            return Err(RuntimeError::Budget(STEPS_MAX));
        }
        Ok(())
    }

    pub(super) fn expand(&self, frame: &Frame, s: &Str) -> String {
        if !(s.vars && frame.variables) {
            return s.text.clone();
        }
        let scope = Scope {
            locals: &frame.locals,
            globals: &self.globals,
            declared_global: &frame.declared,
            matches: &frame.matches,
        };
        variables::expand(&s.text, &scope)
    }

    pub(super) fn expand_all(&self, frame: &Frame, v: &[Str]) -> Vec<String> {
        v.iter().map(|s| self.expand(frame, s)).collect()
    }

    fn block(&mut self, commands: &[Command], frame: &mut Frame) -> Result<Flow, RuntimeError> {
        for c in commands {
            self.charge(1)?;
            match self.command(c, frame)? {
                Flow::Next => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Next)
    }

    fn command(&mut self, c: &Command, frame: &mut Frame) -> Result<Flow, RuntimeError> {
        match c {
            Command::If { branches, otherwise } => return self.if_command(branches, otherwise.as_deref(), frame),
            Command::Stop => return Ok(Flow::Stop),
            Command::Return => return Ok(Flow::Return),
            Command::Keep { flags } => {
                let flags = self.flags_arg(frame, flags.as_deref());
                self.implicit_keep = false;
                self.push(Action::Keep { flags })?;
            }
            Command::Discard => {
                self.implicit_keep = false;
                self.push(Action::Discard)?;
            }
            Command::FileInto {
                mailbox,
                flags,
                copy,
                create,
            } => self.file_into(frame, mailbox, flags.as_deref(), *copy, *create)?,
            Command::Redirect { address, copy } => self.redirect(frame, address, *copy)?,
            Command::Reject { reason, extended } => {
                let reason = self.expand(frame, reason);
                self.implicit_keep = false;
                self.push(Action::Reject {
                    reason,
                    extended: *extended,
                })?;
            }
            Command::Vacation(v) => self.vacation(v, frame)?,
            Command::Set { name, value, modifiers } => {
                let v = variables::apply(self.expand(frame, value), modifiers);
                self.set_var(frame, name, variables::bounded(v))?;
            }
            Command::Flags { op, var, flags } => self.flags_command(*op, var.as_ref(), flags, frame)?,
            Command::AddHeader { last, name, value } => {
                let (name, value) = (self.expand(frame, name), self.expand(frame, value));
                super::edit::add(&mut self.msg, *last, name, value);
            }
            Command::DeleteHeader { .. } => self.delete_header(c, frame)?,
            Command::Include {
                personal,
                name,
                once,
                optional,
            } => {
                return self.include(*personal, name, *once, *optional);
            }
            Command::Global(names) => {
                for n in names {
                    frame.declared.insert(n.clone());
                }
            }
        }
        Ok(Flow::Next)
    }

    /// if/elsif/else: the block of the first test that holds, else the
    /// else block; none ends the command normally.
    fn if_command(
        &mut self,
        branches: &[(Test, Vec<Command>)],
        otherwise: Option<&[Command]>,
        frame: &mut Frame,
    ) -> Result<Flow, RuntimeError> {
        for (test, body) in branches {
            if self.test(test, frame)? {
                return self.block(body, frame);
            }
        }
        if let Some(body) = otherwise {
            return self.block(body, frame);
        }
        Ok(Flow::Next)
    }

    /// fileinto; without `:copy` (RFC 3894) it cancels the implicit keep.
    fn file_into(
        &mut self,
        frame: &Frame,
        mailbox: &Str,
        flags: Option<&[Str]>,
        copy: bool,
        create: bool,
    ) -> Result<(), RuntimeError> {
        let flags = self.flags_arg(frame, flags);
        let mailbox = self.expand(frame, mailbox);
        if mailbox.is_empty() {
            return Err(RuntimeError::Invalid {
                what: "mailbox name",
                value: mailbox,
            });
        }
        self.implicit_keep &= copy;
        self.push(Action::FileInto { mailbox, flags, create })
    }

    /// redirect, at most `REDIRECTS_MAX` per run: a script must not turn
    /// one message into a flood.
    fn redirect(&mut self, frame: &Frame, address: &Str, copy: bool) -> Result<(), RuntimeError> {
        let value = self.expand(frame, address);
        let Some(address) = super::address::parse_single(&value) else {
            return Err(RuntimeError::Invalid {
                what: "redirect address",
                value,
            });
        };
        self.redirects += 1;
        if self.redirects > REDIRECTS_MAX {
            return Err(RuntimeError::TooManyRedirects(REDIRECTS_MAX));
        }
        self.implicit_keep &= copy;
        self.push(Action::Redirect { address })
    }

    pub(super) fn set_var(&mut self, frame: &mut Frame, name: &str, value: String) -> Result<(), RuntimeError> {
        let lower = name.to_ascii_lowercase();
        let (map, key) = if let Some(rest) = lower.strip_prefix("global.") {
            (&mut self.globals, rest.to_string())
        } else if frame.declared.contains(&lower) {
            (&mut self.globals, lower)
        } else {
            (&mut frame.locals, lower)
        };
        if map.len() >= variables::VARIABLES_MAX && !map.contains_key(&key) {
            return Err(RuntimeError::Invalid {
                what: "variable (too many)",
                value: key,
            });
        }
        map.insert(key, value);
        Ok(())
    }

    /// `:flags` when given, else the internal variable (RFC 5232 §5).
    fn flags_arg(&self, frame: &Frame, flags: Option<&[Str]>) -> Vec<String> {
        match flags {
            Some(list) => split_flags(&self.expand_all(frame, list).join(" ")),
            None => split_flags(&self.flags),
        }
    }

    fn flags_command(
        &mut self,
        op: FlagOp,
        var: Option<&Str>,
        flags: &[Str],
        frame: &mut Frame,
    ) -> Result<(), RuntimeError> {
        let given = split_flags(&self.expand_all(frame, flags).join(" "));
        let var_name = var.map(|v| self.expand(frame, v));
        let current = match &var_name {
            Some(n) => {
                let scope = Scope {
                    locals: &frame.locals,
                    globals: &self.globals,
                    declared_global: &frame.declared,
                    matches: &frame.matches,
                };
                scope.get(n).unwrap_or("").to_string()
            }
            None => self.flags.clone(),
        };
        let mut list = if op == FlagOp::Set {
            Vec::new()
        } else {
            split_flags(&current)
        };
        match op {
            FlagOp::Set | FlagOp::Add => {
                for f in given {
                    if !list.iter().any(|x| x.eq_ignore_ascii_case(&f)) {
                        list.push(f);
                    }
                }
            }
            FlagOp::Remove => list.retain(|x| !given.iter().any(|g| g.eq_ignore_ascii_case(x))),
        }
        let value = list.join(" ");
        match var_name {
            Some(n) => self.set_var(frame, &n, value),
            None => {
                self.flags = value;
                Ok(())
            }
        }
    }

    fn include(&mut self, personal: bool, name: &str, once: bool, optional: bool) -> Result<Flow, RuntimeError> {
        let key = (personal, name.to_string());
        if once && self.included.contains(&key) {
            return Ok(Flow::Next);
        }
        if self.stack.contains(&key) || self.stack.len() >= INCLUDE_DEPTH_MAX {
            return Err(RuntimeError::IncludeTooDeep(INCLUDE_DEPTH_MAX));
        }
        let script = match self.env.script(personal, name) {
            Some(Ok(s)) => s,
            Some(Err(error)) => {
                return Err(RuntimeError::IncludeInvalid {
                    name: name.to_string(),
                    error,
                });
            }
            None if optional => return Ok(Flow::Next),
            None => return Err(RuntimeError::IncludeMissing(name.to_string())),
        };
        self.included.insert(key.clone());
        self.stack.push(key);
        let mut frame = Frame {
            variables: script.variables,
            ..Default::default()
        };
        let flow = self.block(&script.commands, &mut frame);
        self.stack.pop();
        match flow? {
            Flow::Stop => Ok(Flow::Stop),
            Flow::Next | Flow::Return => Ok(Flow::Next),
        }
    }

    /// Adds an action, folding duplicates (the same mailbox twice is one
    /// copy, RFC 5228 §2.10.3) and refusing conflicts (RFC 5429 §2.1: a
    /// reject cannot go with a delivery).
    pub(super) fn push(&mut self, a: Action) -> Result<(), RuntimeError> {
        let delivers = |x: &Action| {
            matches!(
                x,
                Action::Keep { .. } | Action::FileInto { .. } | Action::Redirect { .. }
            )
        };
        let rejects = |x: &Action| matches!(x, Action::Reject { .. });
        if (rejects(&a)
            && self
                .actions
                .iter()
                .any(|x| delivers(x) || rejects(x) || matches!(x, Action::Vacation(_))))
            || ((delivers(&a) || matches!(a, Action::Vacation(_))) && self.actions.iter().any(rejects))
        {
            return Err(RuntimeError::Conflict(format!("{} cannot go with reject", a.kind())));
        }
        for existing in self.actions.iter_mut() {
            if same_target(existing, &a) {
                merge_flags(existing, &a);
                return Ok(());
            }
        }
        if matches!(a, Action::Vacation(_)) && self.actions.iter().any(|x| matches!(x, Action::Vacation(_))) {
            return Err(RuntimeError::Conflict("vacation twice".into()));
        }
        self.actions.push(a);
        Ok(())
    }

    fn vacation(&mut self, v: &Vacation, frame: &mut Frame) -> Result<(), RuntimeError> {
        let addresses: Vec<String> = self
            .expand_all(frame, &v.addresses)
            .into_iter()
            .map(|a| a.to_ascii_lowercase())
            .collect();
        if !super::eval::vacation_applies(&self.msg, self.env.own_addresses(), &addresses) {
            return Ok(());
        }
        let reason = self.expand(frame, &v.reason);
        let subject = v.subject.as_ref().map(|s| self.expand(frame, s));
        let from = v.from.as_ref().map(|s| self.expand(frame, s));
        let period_s = match (v.seconds, v.days) {
            (Some(s), _) => s.min(VACATION_SECONDS_MAX),
            (None, Some(d)) => d.clamp(1, 90) * 86_400,
            (None, None) => VACATION_DAYS_DEFAULT * 86_400,
        };
        let handle = match &v.handle {
            Some(h) => self.expand(frame, h),
            None => format!(
                "{}\u{0}{}\u{0}{reason}\u{0}{}",
                subject.clone().unwrap_or_default(),
                from.clone().unwrap_or_default(),
                v.mime
            ),
        };
        let to = self.msg.envelope.from.clone();
        self.push(Action::Vacation(Box::new(VacationReply {
            to,
            reason,
            subject,
            from,
            mime: v.mime,
            handle,
            period_s,
        })))
    }
}

/// Flags as a list: whitespace-separated, each once (case-insensitive).
pub(super) fn split_flags(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in s.split_whitespace() {
        if !out.iter().any(|x| x.eq_ignore_ascii_case(f)) {
            out.push(f.to_string());
        }
    }
    out
}

fn target(a: &Action) -> Option<String> {
    match a {
        Action::Keep { .. } => Some("mailbox:INBOX".into()),
        Action::FileInto { mailbox, .. } if mailbox.eq_ignore_ascii_case("INBOX") => Some("mailbox:INBOX".into()),
        Action::FileInto { mailbox, .. } => Some(format!("mailbox:{mailbox}")),
        Action::Redirect { address } => Some(format!("redirect:{}", address.to_ascii_lowercase())),
        Action::Discard => Some("discard".into()),
        _ => None,
    }
}

fn same_target(a: &Action, b: &Action) -> bool {
    target(a).is_some() && target(a) == target(b)
}

fn merge_flags(existing: &mut Action, new: &Action) {
    let more = match new {
        Action::Keep { flags } | Action::FileInto { flags, .. } => flags.clone(),
        _ => return,
    };
    if let Action::Keep { flags } | Action::FileInto { flags, .. } = existing {
        for f in more {
            if !flags.iter().any(|x| x.eq_ignore_ascii_case(&f)) {
                flags.push(f);
            }
        }
    }
    if let (Action::FileInto { create, .. }, Action::FileInto { create: c2, .. }) = (existing, new) {
        *create |= *c2;
    }
}
