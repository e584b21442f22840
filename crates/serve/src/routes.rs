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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, RwLock};

    use axum::body::Body;
    use axum::http::Request;
    use proptest::prelude::*;
    use tower::ServiceExt;

    use super::*;
    use crate::{Auth, Latest};

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn app() -> Router {
        let shared = Arc::new(Shared {
            latest: RwLock::new(Latest { metrics: Some("m 1\n".into()), snapshot: Some("{}".into()) }),
            frames: tokio::sync::broadcast::channel(4).0,
            subscribers: AtomicUsize::new(0),
            auth: Auth::new(Some(TOKEN.into()), false),
            max_subscribers: 4,
            report: None,
        });
        router(shared)
    }

    fn status(req: Request<Body>) -> StatusCode {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async { app().oneshot(req).await.unwrap().status() })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Whatever the path, query string and headers: never a server error, and nothing behind
        /// the token answers 200 without it.
        #[test]
        fn any_request_is_answered_and_the_lock_holds(
            path in prop::sample::select(vec!["/", "/api/v1/snapshot", "/api/v1/stream", "/report", "/metrics", "/healthz", "/ready", "/nope", "/api/v1/", "//", "/%2e%2e/metrics"]),
            query in "[ -~]{0,40}",
            header in "[ -~]{0,60}",
        ) {
            let q: String = query.bytes().map(|b| if b.is_ascii_alphanumeric() || b"=&-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
            let mut req = Request::get(format!("{path}?{q}"));
            if let Ok(v) = axum::http::HeaderValue::from_str(&header) {
                req = req.header("authorization", v.clone()).header("cookie", v);
            }
            let code = status(req.body(Body::empty()).unwrap());
            prop_assert!(!code.is_server_error(), "{path}?{q}: {code}");
            let locked = ["/", "/api/v1/snapshot", "/api/v1/stream", "/report"].contains(&path);
            let has_token = q.contains(TOKEN) || header.contains(TOKEN);
            if locked && !has_token {
                prop_assert!(code == StatusCode::UNAUTHORIZED, "{path}?{q} [{header}]: {code}");
            }
        }
    }

    #[test]
    fn the_open_paths_and_the_token_paths() {
        let get = |uri: &str| Request::get(uri).body(Body::empty()).unwrap();
        assert_eq!(status(get("/healthz")), StatusCode::OK);
        assert_eq!(status(get("/metrics")), StatusCode::OK);
        assert_eq!(status(get("/api/v1/snapshot")), StatusCode::UNAUTHORIZED);
        assert_eq!(status(get(&format!("/?token={TOKEN}"))), StatusCode::SEE_OTHER);
        let bearer = Request::get("/api/v1/snapshot").header("authorization", format!("Bearer {TOKEN}"));
        assert_eq!(status(bearer.body(Body::empty()).unwrap()), StatusCode::OK);
        assert_eq!(status(get("/nope")), StatusCode::NOT_FOUND);
    }
}
