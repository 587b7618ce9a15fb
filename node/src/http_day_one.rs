//! Files a mail domain serves over HTTP from the node's config: the
//! MTA-STS policy (`/.well-known/mta-sts.txt`, RFC 8461 §3.2; senders
//! fetch it from `https://mta-sts.DOMAIN/`) and the Thunderbird autoconfig
//! file (`/mail/config-v1.1.xml` on `autoconfig.DOMAIN`, and
//! `/.well-known/autoconfig/mail/config-v1.1.xml` on the domain itself),
//! for local domains only. Rendering is `day_one`'s.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use meshmail_storage::Database;
use meshmail_storage::model::domains;
use serde::Deserialize;

use crate::config_publish::PublicFace;
use crate::day_one;

#[derive(Clone)]
struct DayOne {
    db: Database,
    face: PublicFace,
}

pub fn routes(db: Database, face: PublicFace) -> Router {
    Router::new()
        .route("/.well-known/mta-sts.txt", get(mta_sts))
        .route("/.well-known/autoconfig/mail/config-v1.1.xml", get(autoconfig))
        .route("/mail/config-v1.1.xml", get(autoconfig))
        .with_state(DayOne { db, face })
}

async fn mta_sts(State(s): State<DayOne>) -> Response {
    // RFC 8461 §3.3: "text/plain".
    let policy = day_one::mta_sts_policy(&s.face);
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], policy).into_response()
}

#[derive(Debug, Deserialize)]
struct AutoconfigQuery {
    /// Thunderbird sends the address being set up.
    emailaddress: Option<String>,
}

/// The domain asked about: the address's, else the Host's without
/// `autoconfig.` and the port.
fn asked_domain(q: &AutoconfigQuery, headers: &HeaderMap) -> Option<String> {
    if let Some((_, d)) = q.emailaddress.as_deref().and_then(|a| a.rsplit_once('@')) {
        return Some(d.to_ascii_lowercase());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    Some(host.strip_prefix("autoconfig.").unwrap_or(host).to_ascii_lowercase())
}

async fn autoconfig(State(s): State<DayOne>, Query(q): Query<AutoconfigQuery>, headers: HeaderMap) -> Response {
    let Some(domain) = asked_domain(&q, &headers) else {
        return (StatusCode::BAD_REQUEST, "no emailaddress and no Host\n").into_response();
    };
    let d = domain.clone();
    let local =
        s.db.read("autoconfig_domain", move |txn| {
            let d = d.clone();
            async move { domains::get(&txn, &d).await }
        })
        .await;
    match local {
        Ok(Some(_)) => (
            [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
            day_one::autoconfig_xml(&s.face, &domain),
        )
            .into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "not a domain of this server\n").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store unavailable: {e}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_domain_comes_from_the_address_or_the_host() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "autoconfig.Example.org:8080".parse().unwrap());
        let none = AutoconfigQuery { emailaddress: None };
        assert_eq!(asked_domain(&none, &h).as_deref(), Some("example.org"));
        let q = AutoconfigQuery {
            emailaddress: Some("a@Other.test".into()),
        };
        assert_eq!(asked_domain(&q, &h).as_deref(), Some("other.test"));
        assert_eq!(asked_domain(&none, &HeaderMap::new()), None);
    }
}
