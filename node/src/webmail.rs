//! The webmail page: plain HTML, CSS and JavaScript compiled into the
//! binary (no build step, nothing fetched at run time). It is a JMAP
//! client of this node like any other.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("webmail/index.html");
const SCRIPT: &str = include_str!("webmail/app.js");
const STYLE: &str = include_str!("webmail/app.css");

/// Only our own script and style; no inline code, no foreign origin, no
/// frames: a message's content can never run in the page.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn page(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

pub async fn index() -> Response {
    page(INDEX, "text/html; charset=utf-8")
}

pub async fn script() -> Response {
    page(SCRIPT, "text/javascript; charset=utf-8")
}

pub async fn style() -> Response {
    page(STYLE, "text/css; charset=utf-8")
}
