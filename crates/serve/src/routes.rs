//! The endpoints.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::BroadcastStream;

use crate::Shared;

const DASHBOARD: &str = include_str!("dashboard.html");

type S = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .route("/api/v1/snapshot", get(snapshot))
        .route("/api/v1/stream", get(stream))
        .route("/report", get(report))
        .with_state(shared)
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "gpulse: this needs the token: open the URL `gpulse serve` printed, or send `Authorization: Bearer TOKEN`\n",
    )
        .into_response()
}

fn not_ready() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "gpulse: no sample yet\n").into_response()
}

async fn index(State(s): S, Query(q): Query<HashMap<String, String>>, headers: HeaderMap) -> Response {
    if let Some(t) = q.get("token") {
        if !s.auth.is_token(t) {
            return unauthorized();
        }
        // Signed in by the cookie from now on; the token leaves the address bar.
        return (StatusCode::SEE_OTHER, [(header::LOCATION, "/".to_owned()), (header::SET_COOKIE, s.auth.cookie())])
            .into_response();
    }
    if !s.auth.allows(&headers) {
        return unauthorized();
    }
    let latest = s.latest.read().ok().and_then(|l| l.snapshot.clone());
    // Inside a <script> element, `</` could end it early; JSON allows `<\/` for it.
    let initial = latest.map_or_else(|| "null".to_owned(), |j| j.replace("</", "<\\/"));
    let page = DASHBOARD
        .replace("{{REPORT}}", if s.report.is_some() { "" } else { "hidden" })
        .replace("{{SNAPSHOT}}", &initial);
    ([(header::CACHE_CONTROL, "no-store")], Html(page)).into_response()
}

async fn metrics(State(s): S, headers: HeaderMap) -> Response {
    if s.auth.metrics_need_token && !s.auth.allows(&headers) {
        return unauthorized();
    }
    let Some(m) = s.latest.read().ok().and_then(|l| l.metrics.clone()) else { return not_ready() };
    ([(header::CONTENT_TYPE, gpulse_report::prometheus::CONTENT_TYPE)], m.to_string()).into_response()
}

async fn ready(State(s): S) -> Response {
    match s.latest.read().ok().is_some_and(|l| l.snapshot.is_some()) {
        true => "ready\n".into_response(),
        false => not_ready(),
    }
}

async fn snapshot(State(s): S, headers: HeaderMap) -> Response {
    if !s.auth.allows(&headers) {
        return unauthorized();
    }
    let Some(j) = s.latest.read().ok().and_then(|l| l.snapshot.clone()) else { return not_ready() };
    ([(header::CONTENT_TYPE, "application/json")], j.to_string()).into_response()
}

/// Counts a stream's subscriber for as long as the stream lives.
struct Subscriber(Arc<Shared>);

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn stream(State(s): S, headers: HeaderMap) -> Response {
    if !s.auth.allows(&headers) {
        return unauthorized();
    }
    if s.subscribers.fetch_add(1, Ordering::SeqCst) >= s.max_subscribers {
        s.subscribers.fetch_sub(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, "gpulse: too many subscribers\n").into_response();
    }
    let guard = Subscriber(s.clone());
    let first = s.latest.read().ok().and_then(|l| l.snapshot.clone());
    // A subscriber that falls behind skips frames rather than holding memory.
    let frames = BroadcastStream::new(s.frames.subscribe()).filter_map(Result::ok);
    let events = tokio_stream::iter(first).chain(frames).map(move |json| {
        let _ = &guard;
        Ok::<_, Infallible>(Event::default().data(&*json))
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

async fn report(State(s): S, headers: HeaderMap) -> Response {
    if !s.auth.allows(&headers) {
        return unauthorized();
    }
    let Some(render) = &s.report else {
        return (StatusCode::NOT_FOUND, "gpulse: no recording (start with --record FILE)\n").into_response();
    };
    match render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("gpulse: no report: {e}\n")).into_response(),
    }
}
