//! SASL PLAIN (RFC 4616) and LOGIN for SMTP AUTH (RFC 4954).

use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use meshmail_actors::auth::{AuthOutcome, Authenticator};
use meshmail_storage::model::accounts::Account;

use crate::net::{Conn, ConnError, Line};
use crate::smtp::wire::command::AUTH_LINE_MAX;
use crate::smtp::wire::reply::Reply;

pub enum AuthStep {
    Ok(Account),
    /// Send this and stay unauthenticated.
    Reply(Reply),
}

fn malformed() -> AuthStep {
    AuthStep::Reply(Reply::new(
        501,
        Some((5, 5, 2)),
        "Cannot decode the authentication data",
    ))
}

/// Asks for one SASL response; `None` when the client cancelled with `*`.
async fn challenge(conn: &mut Conn, prompt: &str, listener: &'static str) -> Result<Option<Vec<u8>>, ConnError> {
    let reply = Reply::auth_challenge(prompt);
    metrics::counter!("meshmail_smtp_replies_total", "listener" => listener, "code" => "334").increment(1);
    conn.send(&reply.to_bytes());
    let line = match conn.read_line(AUTH_LINE_MAX).await? {
        Line::Complete(l) => l,
        Line::TooLong => return Ok(Some(Vec::new())),
    };
    if line == b"*" {
        return Ok(None);
    }
    Ok(Some(line))
}

fn decode(data: &[u8]) -> Option<Vec<u8>> {
    if data == b"=" {
        return Some(Vec::new()); // RFC 4954: "=" is an empty initial response.
    }
    B64.decode(data).ok()
}

pub async fn sasl_auth(
    conn: &mut Conn,
    auth: &Authenticator,
    ip: IpAddr,
    mechanism: &str,
    initial: Option<String>,
    listener: &'static str,
) -> Result<AuthStep, ConnError> {
    let credentials = match mechanism.to_ascii_uppercase().as_str() {
        "PLAIN" => plain_credentials(conn, initial, listener).await?,
        "LOGIN" => login_credentials(conn, initial, listener).await?,
        _ => {
            return Ok(AuthStep::Reply(Reply::new(
                504,
                Some((5, 5, 4)),
                "Unrecognized authentication type",
            )));
        }
    };
    let (user, password) = match credentials {
        Ok(c) => c,
        Err(step) => return Ok(step),
    };
    Ok(match auth.authenticate(&user, &password, ip).await {
        AuthOutcome::Ok(account) => AuthStep::Ok(account),
        AuthOutcome::Failed => AuthStep::Reply(Reply::auth_failed()),
        AuthOutcome::RateLimited { retry_after } => AuthStep::Reply(Reply::new(
            454,
            Some((4, 7, 0)),
            format!("Too many failed attempts, try again in {} s", retry_after.as_secs()),
        )),
        AuthOutcome::Unavailable(why) => {
            tracing::warn!(error = %why, "authentication unavailable");
            AuthStep::Reply(Reply::new(454, Some((4, 7, 0)), "Temporary authentication failure"))
        }
    })
}

/// (user, password) from the client, or the reply that ends the exchange.
type Credentials = Result<(String, String), AuthStep>;

fn cancelled() -> AuthStep {
    AuthStep::Reply(Reply::new(501, Some((5, 0, 0)), "Authentication cancelled"))
}

/// PLAIN (RFC 4616): one message, in the command or after an empty challenge.
async fn plain_credentials(
    conn: &mut Conn,
    initial: Option<String>,
    listener: &'static str,
) -> Result<Credentials, ConnError> {
    let data = match initial {
        Some(i) => i.into_bytes(),
        None => match challenge(conn, "", listener).await? {
            Some(d) => d,
            None => return Ok(Err(cancelled())),
        },
    };
    let Some(raw) = decode(&data) else {
        return Ok(Err(malformed()));
    };
    // authzid NUL authcid NUL passwd; an authzid other than the
    // authcid would be a proxy login, which is not offered.
    let parts: Vec<&[u8]> = raw.split(|&b| b == 0).collect();
    let [authz, authc, pass] = parts.as_slice() else {
        return Ok(Err(malformed()));
    };
    let (Ok(authz), Ok(authc), Ok(pass)) = (
        std::str::from_utf8(authz),
        std::str::from_utf8(authc),
        std::str::from_utf8(pass),
    ) else {
        return Ok(Err(malformed()));
    };
    if !authz.is_empty() && !authz.eq_ignore_ascii_case(authc) {
        return Ok(Err(AuthStep::Reply(Reply::auth_failed())));
    }
    Ok(Ok((authc.to_string(), pass.to_string())))
}

/// LOGIN: the user name (in the command or after "Username:"), then the
/// password after "Password:".
async fn login_credentials(
    conn: &mut Conn,
    initial: Option<String>,
    listener: &'static str,
) -> Result<Credentials, ConnError> {
    let user = match initial {
        Some(i) => i.into_bytes(),
        None => match challenge(conn, "VXNlcm5hbWU6", listener).await? {
            Some(d) => d,
            None => return Ok(Err(cancelled())),
        },
    };
    let Some(user) = decode(&user).and_then(|u| String::from_utf8(u).ok()) else {
        return Ok(Err(malformed()));
    };
    let pass = match challenge(conn, "UGFzc3dvcmQ6", listener).await? {
        Some(d) => d,
        None => return Ok(Err(cancelled())),
    };
    let Some(pass) = decode(&pass).and_then(|p| String::from_utf8(p).ok()) else {
        return Ok(Err(malformed()));
    };
    Ok(Ok((user, pass)))
}
