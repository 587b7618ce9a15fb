//! One mail transaction on an open [`SmtpClient`]: MAIL with the
//! parameters the peer announced, the RCPTs, DATA and the body, pipelined
//! when the peer offers PIPELINING (RFC 2920), one command at a time
//! otherwise.

use meshmail_storage::model::outbound::{DsnNotify, DsnRet};

use super::{ClientError, Envelope, RcptSpec, SmtpClient, SmtpReply, TxnOutcome, xtext};

/// The replies to MAIL, each RCPT and DATA.
struct Replies {
    mail: SmtpReply,
    rcpts: Vec<SmtpReply>,
    data: SmtpReply,
}

impl SmtpClient {
    /// Runs one mail transaction. `Err` concerns every recipient (the
    /// connection failed or MAIL/DATA was refused); `Ok` has one reply per
    /// recipient. The body is dot-stuffed and its line ends made CRLF here.
    pub async fn send_mail(&mut self, env: &Envelope, body: &[u8]) -> Result<TxnOutcome, ClientError> {
        let mail = self.mail_command(env);
        let rcpt_lines: Vec<String> = env.rcpts.iter().map(|r| self.rcpt_command(r)).collect();
        let replies = if self.caps.pipelining {
            self.exchange_pipelined(mail, &rcpt_lines).await?
        } else {
            match self.exchange_stepwise(mail, &rcpt_lines).await? {
                Ok(replies) => replies,
                Err(done) => return Ok(done),
            }
        };
        self.conclude(replies, body).await
    }

    /// MAIL FROM with the parameters the peer supports: SIZE, BODY,
    /// SMTPUTF8, REQUIRETLS, and DSN's RET and ENVID.
    fn mail_command(&self, env: &Envelope) -> String {
        let mut mail = format!("MAIL FROM:<{}>", env.from);
        if self.caps.size.is_some() {
            mail.push_str(&format!(" SIZE={}", env.size));
        }
        if env.eight_bit && self.caps.eight_bit_mime {
            mail.push_str(" BODY=8BITMIME");
        }
        if env.smtputf8 && self.caps.smtputf8 {
            mail.push_str(" SMTPUTF8");
        }
        if env.require_tls && self.caps.requiretls {
            mail.push_str(" REQUIRETLS");
        }
        if self.caps.dsn {
            match env.ret {
                Some(DsnRet::Full) => mail.push_str(" RET=FULL"),
                Some(DsnRet::Hdrs) => mail.push_str(" RET=HDRS"),
                None => {}
            }
            if let Some(id) = &env.envid {
                mail.push_str(&format!(" ENVID={}", xtext(id)));
            }
        }
        mail.push_str("\r\n");
        mail
    }

    /// RCPT TO with DSN's NOTIFY and ORCPT when the peer supports DSN.
    fn rcpt_command(&self, r: &RcptSpec) -> String {
        let mut line = format!("RCPT TO:<{}>", r.address);
        if self.caps.dsn {
            if let Some(n) = r.notify {
                line.push_str(&format!(" NOTIFY={}", notify_value(n)));
            }
            if let Some(o) = &r.orcpt
                && let Some((kind, addr)) = o.split_once(';')
            {
                line.push_str(&format!(" ORCPT={kind};{}", xtext(addr)));
            }
        }
        line.push_str("\r\n");
        line
    }

    /// RFC 2920: MAIL, every RCPT and DATA in one write, then the replies
    /// in order.
    async fn exchange_pipelined(&mut self, mail: String, rcpt_lines: &[String]) -> Result<Replies, ClientError> {
        let t = self.timeouts.command;
        let mut batch = mail.into_bytes();
        for l in rcpt_lines {
            batch.extend_from_slice(l.as_bytes());
        }
        batch.extend_from_slice(b"DATA\r\n");
        self.send(&batch).await?;
        let mail = self.read_reply(t, "MAIL").await?;
        let mut rcpts = Vec::with_capacity(rcpt_lines.len());
        for _ in rcpt_lines {
            rcpts.push(self.read_reply(t, "RCPT").await?);
        }
        let data = self.read_reply(t, "DATA").await?;
        Ok(Replies { mail, rcpts, data })
    }

    /// One command at a time: a refused MAIL ends the transaction (`Err`),
    /// and so does every RCPT refused (`Ok(Err)`: the outcome), before DATA.
    async fn exchange_stepwise(
        &mut self,
        mail: String,
        rcpt_lines: &[String],
    ) -> Result<Result<Replies, TxnOutcome>, ClientError> {
        let t = self.timeouts.command;
        self.send(mail.as_bytes()).await?;
        let mail = self.read_reply(t, "MAIL").await?;
        if !mail.is_positive() {
            self.reset().await;
            return Err(ClientError::Rejected {
                stage: "MAIL",
                reply: mail,
            });
        }
        let mut rcpts = Vec::with_capacity(rcpt_lines.len());
        for l in rcpt_lines {
            self.send(l.as_bytes()).await?;
            rcpts.push(self.read_reply(t, "RCPT").await?);
        }
        if !rcpts.iter().any(|r| r.is_positive()) {
            self.reset().await;
            return Ok(Err(TxnOutcome { rcpts }));
        }
        self.send(b"DATA\r\n").await?;
        let data = self.read_reply(t, "DATA").await?;
        Ok(Ok(Replies { mail, rcpts, data }))
    }

    /// Judges the replies and, when MAIL, DATA and a recipient at least
    /// were taken, sends the body; each accepted recipient gets the reply
    /// to the end of data. A 354 nothing is to follow still gets its lone
    /// dot, so the session stays usable.
    async fn conclude(&mut self, replies: Replies, body: &[u8]) -> Result<TxnOutcome, ClientError> {
        let Replies { mail, rcpts, data } = replies;
        if !mail.is_positive() {
            if data.code == 354 {
                self.send(b".\r\n").await?;
                let _ = self.read_reply(self.timeouts.data_end, "end of data").await?;
            }
            self.reset().await;
            return Err(ClientError::Rejected {
                stage: "MAIL",
                reply: mail,
            });
        }
        let accepted = rcpts.iter().filter(|r| r.is_positive()).count();
        if data.code != 354 {
            self.reset().await;
            if accepted == 0 {
                return Ok(TxnOutcome { rcpts });
            }
            return Err(ClientError::Rejected {
                stage: "DATA",
                reply: data,
            });
        }
        if accepted == 0 {
            // A 354 with no recipient (RFC 2920 §3.1): end the empty data.
            self.send(b".\r\n").await?;
            let _ = self.read_reply(self.timeouts.data_end, "end of data").await?;
            return Ok(TxnOutcome { rcpts });
        }
        self.send_body(body).await?;
        let end = self.read_reply(self.timeouts.data_end, "end of data").await?;
        self.transactions += 1;
        let rcpts = rcpts
            .into_iter()
            .map(|r| if r.is_positive() { end.clone() } else { r })
            .collect();
        Ok(TxnOutcome { rcpts })
    }
}

fn notify_value(n: DsnNotify) -> String {
    if n.never {
        return "NEVER".into();
    }
    let mut v = Vec::new();
    if n.success {
        v.push("SUCCESS");
    }
    if n.failure {
        v.push("FAILURE");
    }
    if n.delay {
        v.push("DELAY");
    }
    v.join(",")
}
