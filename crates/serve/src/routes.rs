//! The endpoints, behind the web configuration's basic auth and headers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::BroadcastStream;

use crate::{Shared, WebConfig};

const DASHBOARD: &str = include_str!("dashboard.html");
const DASHBOARD_JS: &str = include_str!("dashboard.js");

/// The page runs only the script it names and reaches only this server: an injected inline
/// script would not run, and nothing leaves for another origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

type S = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .route("/api/v1/snapshot", get(snapshot))
        .route("/api/v1/history", get(history))
        .route("/api/v1/stream", get(stream))
        .route("/report", get(report))
        .route("/dashboard.js", get(script))
        .layer(middleware::from_fn_with_state(shared.clone(), web_config))
        .layer(middleware::map_response(guard_headers))
        .with_state(shared)
}

/// On every answer: no type sniffing, no framing, and no address (which may hold `?token=`)
/// sent on as a referrer; a web configuration's own values of these stand.
async fn guard_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.entry(header::X_CONTENT_TYPE_OPTIONS).or_insert(header::HeaderValue::from_static("nosniff"));
    h.entry(header::X_FRAME_OPTIONS).or_insert(header::HeaderValue::from_static("DENY"));
    h.entry(header::REFERRER_POLICY).or_insert(header::HeaderValue::from_static("no-referrer"));
    r
}

/// What stands before the dashboard and the API: the `Host` must be this server's (a page of
/// another site, its name pointed at this address by DNS rebinding, is refused), then the token.
fn refused(s: &Shared, headers: &HeaderMap) -> Option<Response> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !s.hosts.allows(host) {
        return Some(
            (
                StatusCode::MISDIRECTED_REQUEST,
                "gpulse: this Host header names another server; if it is this one (a proxy's name), \
                 start gpulse serve with --allow-host NAME\n",
            )
                .into_response(),
        );
    }
    (!s.auth.allows(headers)).then(unauthorized)
}

async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], DASHBOARD_JS)
        .into_response()
}

/// Around every request: basic auth when the web configuration has users (all but `/healthz`,
/// which a liveness probe asks), and the configuration's headers on every answer. The
/// configuration is the one in force when the request came.
async fn web_config(State(s): S, req: Request, next: Next) -> Response {
    let web = s.web.current();
    let open = web.basic.is_none() || req.uri().path() == "/healthz";
    let mut answer = if open || basic_allows(&web, req.headers()).await {
        next.run(req).await
    } else {
        let why = "gpulse: this needs the user name and password of the web configuration\n";
        (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Basic")], why).into_response()
    };
    for (name, value) in &web.headers {
        answer.headers_mut().insert(name.clone(), value.clone());
    }
    answer
}

/// Whether the request's basic credentials are right: remembered, else by bcrypt on a blocking
/// thread (one at a time), so the runtime's thread never spends a bcrypt.
async fn basic_allows(web: &Arc<WebConfig>, headers: &HeaderMap) -> bool {
    let Some(basic) = &web.basic else { return true };
    let Some((user, password)) = crate::basic::credentials(headers) else { return false };
    let key = basic.key(&user, &password);
    if basic.remembered(&key, Instant::now()) {
        return true;
    }
    let Ok(_one) = basic.verifying.acquire().await else { return false };
    // The same scraper's other request may have verified it meanwhile.
    if basic.remembered(&key, Instant::now()) {
        return true;
    }
    let web = web.clone();
    let verify = move || web.basic.as_ref().is_some_and(|b| b.verify(&user, &password));
    let right = tokio::task::spawn_blocking(verify).await.unwrap_or(false);
    if right {
        basic.remember(key, Instant::now());
    }
    right
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "gpulse: this needs the token: open the URL gpulse printed, or add ?token=TOKEN to this one, or send \
         `Authorization: Bearer TOKEN`\n",
    )
        .into_response()
}

fn not_ready() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "gpulse: no sample yet\n").into_response()
}

async fn index(State(s): S, Query(q): Query<HashMap<String, String>>, headers: HeaderMap) -> Response {
    if let Some(t) = q.get("token") {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !s.hosts.allows(host) || !s.auth.is_token(t) {
            return refused(&s, &headers).unwrap_or_else(unauthorized);
        }
        // Signed in by the cookie from now on; the token leaves the address bar.
        return (StatusCode::SEE_OTHER, [(header::LOCATION, "/".to_owned()), (header::SET_COOKIE, s.auth.sign_in())])
            .into_response();
    }
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let latest = s.latest.read().ok().and_then(|l| l.snapshot.clone());
    let initial = latest.map_or_else(|| "null".to_owned(), |j| json_in_script(&j));
    let history = s.history.read().map_or_else(|_| "null".to_owned(), |h| json_in_script(&h.to_json().to_string()));
    // The snapshot last: a process's name could spell another placeholder.
    let page = DASHBOARD
        .replace("{{REPORT}}", if s.report.is_some() { "" } else { "hidden" })
        .replace("{{HISTORY}}", &history)
        .replace("{{SNAPSHOT}}", &initial);
    ([(header::CACHE_CONTROL, "no-store"), (header::CONTENT_SECURITY_POLICY, CSP)], Html(page)).into_response()
}

/// JSON for a `<script type="application/json">` element. These characters only occur inside
/// JSON strings, where the escape means the same: no name can close the element, open a comment
/// in it, or end a line of script.
fn json_in_script(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
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
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let Some(j) = s.latest.read().ok().and_then(|l| l.snapshot.clone()) else { return not_ready() };
    ([(header::CONTENT_TYPE, "application/json")], j.to_string()).into_response()
}

async fn history(State(s): S, headers: HeaderMap) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let Ok(json) = s.history.read().map(|h| h.to_json().to_string()) else { return not_ready() };
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// Counts a stream's subscriber for as long as the stream lives.
struct Subscriber(Arc<Shared>);

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn stream(State(s): S, headers: HeaderMap) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
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
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    if s.report.is_none() {
        return (StatusCode::NOT_FOUND, "gpulse: no recording (start with --record FILE)\n").into_response();
    }
    // Drawn on a thread of its own, one at a time: a scrape never waits behind a report.
    let Ok(_drawing) = s.report_drawing.acquire().await else { return not_ready() };
    let shared = s.clone();
    let drawn = tokio::task::spawn_blocking(move || shared.report.as_ref().map(|render| render())).await;
    match drawn {
        Ok(Some(Ok(html))) => Html(html).into_response(),
        Ok(Some(Err(e))) => (StatusCode::INTERNAL_SERVER_ERROR, format!("gpulse: no report: {e}\n")).into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "gpulse: no report: drawing it failed\n").into_response(),
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

    use gpulse_live::{Frame, Sink};

    use super::*;
    use crate::history::History;
    use crate::history::tests::poll;
    use crate::{Auth, Latest, ServeSink};

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn shared(history_cap: usize) -> Arc<Shared> {
        Arc::new(Shared {
            latest: RwLock::new(Latest { metrics: Some("m 1\n".into()), snapshot: Some("{}".into()) }),
            history: RwLock::new(History::new(history_cap)),
            frames: tokio::sync::broadcast::channel(4).0,
            subscribers: AtomicUsize::new(0),
            auth: Arc::new(Auth::new(Some(TOKEN.into()), false)),
            hosts: crate::hosts::Hosts::new(&[]),
            max_subscribers: 4,
            report: None,
            report_drawing: tokio::sync::Semaphore::new(1),
            web: Default::default(),
        })
    }

    fn app() -> Router {
        router(shared(4))
    }

    fn status(req: Request<Body>) -> StatusCode {
        answer(app(), req).0
    }

    /// The answer to `req`, sent to this server by its address unless it names a `Host`.
    fn answer(app: Router, mut req: Request<Body>) -> (StatusCode, String) {
        if !req.headers().contains_key(header::HOST) {
            req.headers_mut().insert(header::HOST, header::HeaderValue::from_static("127.0.0.1:9400"));
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let r = app.oneshot(req).await.unwrap();
            let status = r.status();
            let body = axum::body::to_bytes(r.into_body(), 64 << 20).await.unwrap();
            (status, String::from_utf8(body.to_vec()).unwrap())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Whatever the path, query string and headers: never a server error, and nothing behind
        /// the token answers 200 without it.
        #[test]
        fn any_request_is_answered_and_the_lock_holds(
            path in prop::sample::select(vec!["/", "/api/v1/snapshot", "/api/v1/history", "/api/v1/stream", "/report", "/metrics", "/healthz", "/ready", "/nope", "/api/v1/", "//", "/%2e%2e/metrics"]),
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
            let locked = ["/", "/api/v1/snapshot", "/api/v1/history", "/api/v1/stream", "/report"].contains(&path);
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

    /// A page of another site, its name rebound to this address, reaches nothing behind the
    /// token, even holding it; the open paths stay open to any name, as Prometheus uses them.
    #[test]
    fn only_this_servers_names_reach_the_dashboard_and_the_api() {
        let get = |uri: &str, host: &str| {
            let r = Request::get(uri).header("host", host).header("authorization", format!("bearer {TOKEN}"));
            status(r.body(Body::empty()).unwrap())
        };
        for path in ["/", "/api/v1/snapshot", "/api/v1/history", &format!("/?token={TOKEN}")] {
            assert_eq!(get(path, "evil.example:9400"), StatusCode::MISDIRECTED_REQUEST, "{path}");
            assert_ne!(get(path, "localhost:9400"), StatusCode::MISDIRECTED_REQUEST, "{path}");
        }
        assert_eq!(get("/metrics", "gpu-node-01.cluster:9400"), StatusCode::OK);
        assert_eq!(get("/healthz", "evil.example"), StatusCode::OK);
    }

    /// The page runs only its own script, named by address: an inline one would not run.
    #[test]
    fn the_page_forbids_inline_scripts_and_serves_its_own() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let req = Request::get("/").header("host", "127.0.0.1").header("authorization", format!("Bearer {TOKEN}"));
        let r = rt.block_on(app().oneshot(req.body(Body::empty()).unwrap())).unwrap();
        let csp = r.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_owned();
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline'; connect"), "{csp}");
        assert!(!csp.split(';').any(|d| d.trim().starts_with("script-src") && d.contains("unsafe")), "{csp}");
        assert_eq!(r.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let page = rt.block_on(axum::body::to_bytes(r.into_body(), 1 << 20)).unwrap();
        let page = String::from_utf8(page.to_vec()).unwrap();
        // Every script element is data (JSON) or names its source.
        for tag in page.split("<script").skip(1).map(|t| t.split('>').next().unwrap()) {
            assert!(tag.contains("type=\"application/json\"") || tag.contains("src=\"/dashboard.js\""), "{tag}");
        }
        let (code, js) = answer(app(), Request::get("/dashboard.js").body(Body::empty()).unwrap());
        assert_eq!(code, StatusCode::OK);
        assert!(js.contains("EventSource"));
    }

    /// With users in the web configuration: every path but `/healthz` needs the pair, the token
    /// stays on top of it for the dashboard and the API, a verified pair is remembered, and the
    /// configured headers come with every answer, refusals included.
    #[test]
    fn basic_auth_guards_everything_but_health_and_the_token_stays_on_top() {
        use base64::Engine as _;
        let s = shared(4);
        let users = [("prom".to_owned(), bcrypt::hash("pw", 4).unwrap())].into();
        let hsts = axum::http::HeaderValue::from_static("max-age=31536000");
        let web = WebConfig {
            tls: None,
            basic: Some(crate::basic::BasicAuth::new(users).unwrap()),
            headers: vec![(header::STRICT_TRANSPORT_SECURITY, hsts)],
        };
        s.web.replace(web).unwrap();
        let app = router(s.clone());
        let ask = |path: &str, auth: &[&str]| {
            let mut req = Request::get(path).header("host", "127.0.0.1");
            for a in auth {
                req = req.header("authorization", *a);
            }
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let r = rt.block_on(app.clone().oneshot(req.body(Body::empty()).unwrap())).unwrap();
            let challenge = r.headers().get(header::WWW_AUTHENTICATE).map(|v| v.to_str().unwrap().to_owned());
            assert_eq!(r.headers()[header::STRICT_TRANSPORT_SECURITY], "max-age=31536000", "{path}");
            assert_eq!(r.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
            (r.status(), challenge)
        };
        let pair = |p: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(p));
        let (right, wrong, bearer) = (pair("prom:pw"), pair("prom:pW"), format!("Bearer {TOKEN}"));
        let basic = (StatusCode::UNAUTHORIZED, Some("Basic".to_owned()));
        for path in ["/metrics", "/ready", "/", "/api/v1/snapshot", "/nope"] {
            assert_eq!(ask(path, &[]), basic, "{path}");
            assert_eq!(ask(path, &[&wrong]), basic, "{path}");
            assert_eq!(ask(path, &[&bearer]), basic, "{path}: the token is not the pair");
        }
        assert_eq!(ask("/healthz", &[]).0, StatusCode::OK);
        let remembered = || s.web.current().basic.as_ref().map(|b| b.remembered(&b.key("prom", "pw"), Instant::now()));
        assert_eq!(remembered(), Some(false));
        assert_eq!(ask("/metrics", &[&right]).0, StatusCode::OK);
        assert_eq!(remembered(), Some(true), "verified once, remembered");
        assert_eq!(ask("/metrics", &[&right]).0, StatusCode::OK);
        assert_eq!(ask("/api/v1/snapshot", &[&right]), (StatusCode::UNAUTHORIZED, Some("Bearer".to_owned())));
        assert_eq!(ask("/api/v1/snapshot", &[&right, &bearer]).0, StatusCode::OK);
        // A new file (SIGHUP): its password works from the next request, and the old one, though
        // remembered, does not; nor do the old headers stay.
        let users = [("prom".to_owned(), bcrypt::hash("pw2", 4).unwrap())].into();
        let hsts = axum::http::HeaderValue::from_static("max-age=31536000");
        let basic = Some(crate::basic::BasicAuth::new(users).unwrap());
        s.web
            .replace(WebConfig { tls: None, basic, headers: vec![(header::STRICT_TRANSPORT_SECURITY, hsts)] })
            .unwrap();
        assert_eq!(ask("/metrics", &[&right]).0, StatusCode::UNAUTHORIZED);
        assert_eq!(ask("/metrics", &[&pair("prom:pw2")]).0, StatusCode::OK);
    }

    /// Polls fed through the server's own sink come back from `/api/v1/history` oldest first,
    /// each with its own reading, no more than the cap, and only to the token.
    #[test]
    fn history_is_the_last_polls_in_order_bounded_and_locked() {
        let shared = shared(8);
        let mut sink =
            ServeSink { shared: shared.clone(), devices: Vec::new(), hostname: "h".into(), host_label: "Hostname" };
        // Twenty polls a second apart, each GPU-Util its second; one poll arrives twice.
        for s in (1..=20).chain([20]) {
            sink.frame(&Frame { poll: &poll(s * 1_000_000, s as u32), rolling: None, findings: &[] });
        }
        let app = router(shared);
        let get = |auth: Option<&str>| {
            let mut req = Request::get("/api/v1/history");
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            answer(app.clone(), req.body(Body::empty()).unwrap())
        };
        assert_eq!(get(None).0, StatusCode::UNAUTHORIZED);
        assert_eq!(get(Some("Bearer 0123456789abcdef0123456789abcdeX")).0, StatusCode::UNAUTHORIZED);
        let (code, body) = get(Some(&format!("Bearer {TOKEN}")));
        assert_eq!(code, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let frames = v["frames"].as_array().unwrap();
        let stamps: Vec<i64> = frames.iter().map(|f| f["timestamp_us"].as_i64().unwrap()).collect();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "strictly ordered: {stamps:?}");
        assert_eq!(stamps, (13..=20).map(|s| s * 1_000_000).collect::<Vec<_>>(), "the newest 8 of 20");
        for f in frames {
            assert_eq!(f["gpus"][0]["util_gpu_pct"].as_i64(), Some(f["timestamp_us"].as_i64().unwrap() / 1_000_000));
        }
    }

    /// A process named to close the data element or open a comment in it leaves the page's JSON
    /// whole: it parses back to the same snapshot.
    #[test]
    fn names_in_the_page_cannot_break_out_of_the_json() {
        let name = "</script><!--<script>{{HISTORY}} & -->\u{2028}\u{2029}";
        let json = serde_json::json!({ "processes": [{ "name": name }] }).to_string();
        let embedded = json_in_script(&json);
        for c in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
            assert!(!embedded.contains(c), "{c:?} in {embedded}");
        }
        let back: serde_json::Value = serde_json::from_str(&embedded).unwrap();
        assert_eq!(back["processes"][0]["name"], name);
        let shared = shared(4);
        shared.latest.write().unwrap().snapshot = Some(json.into());
        let req = Request::get("/").header("authorization", format!("Bearer {TOKEN}")).body(Body::empty()).unwrap();
        let (code, page) = answer(router(shared), req);
        assert_eq!(code, StatusCode::OK);
        let data = page.split("<script id=\"initial\" type=\"application/json\">").nth(1).unwrap();
        let data = &data[..data.find("</script>").unwrap()];
        assert_eq!(serde_json::from_str::<serde_json::Value>(data).unwrap()["processes"][0]["name"], name);
    }
}
