//! `gpulse serve` over real sockets, scraped by a real Prometheus, opened in a real browser.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::support::{KillOnDrop, fixture, fresh_dir, gpulse, root, skipped};

pub(super) const SCENARIO: &str = "scenarios/serve_three_gpus.json";
pub(super) const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A running `gpulse serve` (or `run --serve`) on a free loopback port; killed when dropped.
pub(super) struct Serving {
    pub(super) child: KillOnDrop,
    pub(super) addr: String,
    /// Up to the line that says where it serves.
    pub(super) stderr: String,
    /// What it has said since.
    later: Arc<Mutex<String>>,
}

impl Serving {
    /// Reads `child`'s stderr (piped) until it says where it serves (http or https), then keeps
    /// gathering it, so the server never blocks on it.
    pub(super) fn from_child(mut child: KillOnDrop) -> Self {
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let mut stderr = String::new();
        let addr = loop {
            let mut line = String::new();
            assert!(lines.read_line(&mut line).unwrap() > 0, "gpulse ended before serving: {stderr}");
            stderr += &line;
            let rest = line.strip_prefix("gpulse: serving on http://");
            if let Some(rest) = rest.or_else(|| line.strip_prefix("gpulse: serving on https://")) {
                break rest.trim().trim_end_matches('/').split('/').next().unwrap().to_owned();
            }
        };
        let later = Arc::new(Mutex::new(String::new()));
        let gathered = later.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while matches!(lines.read_line(&mut line), Ok(1..)) {
                gathered.lock().unwrap().push_str(&std::mem::take(&mut line));
            }
        });
        Serving { child, addr, stderr, later }
    }

    /// The complete lines said since the address.
    pub(super) fn later_lines(&self) -> Vec<String> {
        self.later.lock().unwrap().lines().map(str::to_owned).collect()
    }
}

/// Starts `gpulse serve` with `args` and waits until it has a sample.
pub(super) fn serve(args: &[&str]) -> Serving {
    let s = serve_started(args);
    super::support::wait_until(20, "the server's first sample", || get(&s.addr, "/ready", &[]).0 == 200);
    s
}

/// Starts `gpulse serve` with `args` and returns once it has said where it serves (http or https).
pub(super) fn serve_started(args: &[&str]) -> Serving {
    serve_scenario(SCENARIO, args)
}

/// As [`serve_started`], on the stand-in's `scenario` (relative to the fixtures, or absolute).
pub(super) fn serve_scenario(scenario: &str, args: &[&str]) -> Serving {
    serve_scenario_env(scenario, args, &[])
}

/// As [`serve_scenario`], with `env` set for the server.
pub(super) fn serve_scenario_env(scenario: &str, args: &[&str], env: &[(&str, &str)]) -> Serving {
    let child = KillOnDrop::spawn(
        gpulse(Some(scenario))
            .args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms"])
            .args(args)
            .envs(env.iter().copied())
            .env("GPULSE_TOKEN", TOKEN)
            .stderr(Stdio::piped()),
    );
    Serving::from_child(child)
}

pub(super) fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    super::support::http_get(addr, path, headers)
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

#[test]
fn a_public_address_without_auth_is_refused_in_one_line() {
    let (code, _, err) =
        super::support::run(gpulse(Some(SCENARIO)).args(["serve", "--listen", "0.0.0.0:0", "--no-auth"]));
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--no-auth serves loopback addresses only"), "{err}");
}

#[test]
fn the_token_guards_the_dashboard_and_the_api_but_not_metrics_or_health() {
    let s = serve(&[]);
    assert!(!s.stderr.contains(TOKEN), "a given token is never printed: {}", s.stderr);
    assert_eq!(get(&s.addr, "/", &[]).0, 401);
    assert_eq!(get(&s.addr, "/api/v1/snapshot", &[]).0, 401);
    assert_eq!(get(&s.addr, "/api/v1/history", &[]).0, 401);
    assert_eq!(get(&s.addr, "/api/v1/stream", &[]).0, 401);
    assert_eq!(get(&s.addr, &format!("/?token={}", &TOKEN[..31]), &[]).0, 401);
    assert_eq!(get(&s.addr, "/", &[("Authorization", "Bearer wrong")]).0, 401);
    // The token once; then the cookie.
    let (code, head, _) = get(&s.addr, &format!("/?token={TOKEN}"), &[]);
    assert_eq!(code, 303);
    let cookie = head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).expect("a cookie").to_owned();
    assert!(cookie.contains("httponly") && cookie.contains("samesite=strict"), "{cookie}");
    let session = cookie.split(';').next().unwrap().replace("gpulse_session=", "");
    let (code, _, page) = get(&s.addr, "/", &[("Cookie", &format!("gpulse_session={session}"))]);
    assert_eq!(code, 200);
    assert!(cookie.contains("max-age=43200"), "a session ends: {cookie}");
    // Loads nothing from the network but its own script: the only addresses are XML namespace names.
    let (code, _, script) = get(&s.addr, "/dashboard.js", &[]);
    assert_eq!(code, 200);
    let both = format!("{page}{script}");
    let names_removed = both.replace("http://www.w3.org/2000/svg", "").replace("http://www.w3.org/1999/xhtml", "");
    assert!(
        script.contains("EventSource") && !names_removed.contains("http://") && !names_removed.contains("https://")
    );
    assert_eq!(page.matches(" src=").count(), 1, "one script, by address");
    assert!(page.contains(" src=\"/dashboard.js\"") && !page.contains("<link"), "nothing else to fetch");
    // The API, by bearer: the scenario's readings, and nothing invented for the lost GPU.
    let (code, _, json) = get(&s.addr, "/api/v1/snapshot", &[("Authorization", &bearer())]);
    assert_eq!(code, 200);
    let snap: serde_json::Value = serde_json::from_str(&json).unwrap();
    let gpus = snap["gpus"].as_array().unwrap();
    assert_eq!((gpus[0]["util_gpu_pct"].as_u64(), gpus[1]["temperature_c"].as_u64()), (Some(87), Some(35)));
    assert_eq!(gpus[0]["processes"][0]["pid"], 4242);
    assert_eq!((gpus[2]["status"].as_str(), gpus[2]["temperature_c"].is_null()), (Some("lost"), true));
    // Open as dcgm-exporter's are.
    assert_eq!(get(&s.addr, "/healthz", &[]).0, 200);
    let (code, head, metrics) = get(&s.addr, "/metrics", &[]);
    assert_eq!(code, 200);
    assert!(head.contains("content-type: text/plain; version=0.0.4"), "{head}");
    assert!(metrics.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
}

#[test]
fn metrics_auth_asks_for_the_bearer_token() {
    let s = serve(&["--metrics-auth"]);
    assert_eq!(get(&s.addr, "/metrics", &[]).0, 401);
    assert_eq!(get(&s.addr, "/metrics", &[("Authorization", &bearer())]).0, 200);
}

#[test]
fn the_stream_sends_one_frame_per_poll_to_a_bounded_number_of_subscribers() {
    let s = serve(&[]);
    let open = || {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!("GET /api/v1/stream HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\r\n", s.addr, bearer());
        c.write_all(req.as_bytes()).unwrap();
        BufReader::new(c)
    };
    let mut first = open();
    let mut stamps_us = Vec::new();
    while stamps_us.len() < 4 {
        let mut line = String::new();
        assert!(first.read_line(&mut line).unwrap() > 0);
        if let Some(data) = line.strip_prefix("data: ") {
            let v: serde_json::Value = serde_json::from_str(data).unwrap();
            assert_eq!(v["gpus"].as_array().unwrap().len(), 3);
            stamps_us.push(v["timestamp_us"].as_i64().unwrap());
        }
    }
    // The latest at once, then each new poll once: no frame is sent twice.
    assert!(stamps_us.windows(2).all(|w| w[0] < w[1]), "{stamps_us:?}");
    let _held: Vec<_> = (0..63).map(|_| open()).collect();
    let mut refused = open();
    let mut status = String::new();
    refused.read_line(&mut status).unwrap();
    assert!(status.contains(" 503 "), "the 65th subscriber: {status}");
}

/// A free loopback port (released at once; the caller binds it next).
/// Whether a real Prometheus runs here: where it does not, the check fails under
/// `GPULSE_REQUIRE_PROMETHEUS`, else says it is skipped.
pub(super) fn have_prometheus(what: &str) -> bool {
    if Command::new("prometheus").arg("--version").output().is_err() {
        assert!(std::env::var_os("GPULSE_REQUIRE_PROMETHEUS").is_none(), "prometheus is required");
        skipped(&format!("{what} (no prometheus; CI installs it)"));
        return false;
    }
    true
}

/// A real Prometheus with `dir/prometheus.yml`, its data in `dir/data`, its API on `port`.
/// A Prometheus on `port` with `dir`'s `prometheus.yml`, its data in `dir` and its log in
/// `dir/prometheus.log` (for a test's failure message).
/// Prometheus on `port`, configured by `dir/prometheus.yml`; killed when dropped.
pub(super) fn prometheus(dir: &std::path::Path, port: u16) -> KillOnDrop {
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    KillOnDrop::spawn(
        Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log),
    )
}

/// Writes `dir/prometheus.yml`: `target` scraped every second, and with `alerts` the documented
/// alert rules (docs/cluster/alerts.yml) evaluated every second.
pub(super) fn scrape_config(dir: &std::path::Path, target: &str, alerts: bool) {
    let rules = if alerts {
        format!("  evaluation_interval: 1s\nrule_files: [{}]\n", root().join("docs/cluster/alerts.yml").display())
    } else {
        String::new()
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n{rules}scrape_configs:\n  - job_name: gpulse\n    static_configs:\n      - targets: ['{target}']\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
}

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(super) fn prometheus_query(port: u16, expr: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let q: String = expr
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (code, _, body) = get(&format!("127.0.0.1:{port}"), &format!("/api/v1/query?query={q}"), &[]);
    assert_eq!(code, 200, "{expr}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let labels =
                r["metric"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()));
            (labels.collect(), r["value"][1].as_str().unwrap().parse().unwrap())
        })
        .collect()
}

/// Every expression of NVIDIA's dashboard 12239, as published, evaluated by a real Prometheus
/// scraping gpulse: each returns the scenario's values. Then the alert rules.
#[test]
fn prometheus_evaluates_nvidias_dashboard_and_the_alerts_on_gpulses_metrics() {
    if !have_prometheus("Prometheus scraping gpulse serve") {
        return;
    }
    let s = serve(&[]);
    let dir = fresh_dir("serve", "prometheus");
    let port = free_port();
    scrape_config(&dir, &s.addr, true);
    let _prom = prometheus(&dir, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    while {
        let up = std::panic::catch_unwind(|| prometheus_query(port, "DCGM_FI_DEV_GPU_TEMP"));
        up.map_or(true, |r| r.len() < 2)
    } {
        assert!(Instant::now() < deadline, "Prometheus never scraped gpulse");
        std::thread::sleep(Duration::from_millis(300));
    }
    let path = fixture("anchors/dcgm-dashboard-12239-exprs.tsv");
    let tsv = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // The scenario's readings of GPUs 0 and 1 (GPU 2 is lost and has none).
    let expected: BTreeMap<&str, Vec<f64>> = [
        ("GPU Temperature", vec![61.0, 35.0]),
        ("GPU Avg. Temp", vec![48.0]),
        ("GPU Power Usage", vec![512.25, 120.5]),
        ("GPU Power Total", vec![632.75]),
        ("GPU SM Clocks", vec![1755e6, 1980e6]),
        ("GPU Utilization", vec![87.0, 12.0]),
        ("GPU Framebuffer Mem Used", vec![41088.0, 2048.0]),
        ("Tensor Core Utilization", vec![0.3, 0.0]),
    ]
    .into();
    let mut checked = 0;
    for line in tsv.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (title, expr) = line.split_once('\t').unwrap();
        let expr = expr.replace("$instance", &s.addr).replace("$gpu", "0|1|2");
        let mut got = prometheus_query(port, &expr);
        got.sort_by(|a, b| a.0.get("gpu").cmp(&b.0.get("gpu")));
        let values: Vec<f64> = got.iter().map(|g| g.1).collect();
        let want = &expected[title];
        assert_eq!(values.len(), want.len(), "{title}: {expr} gave {got:?}");
        for (v, w) in values.iter().zip(want) {
            assert!((v - w).abs() <= 1e-6 * w.abs().max(1.0), "{title}: {v} ≠ {w}");
        }
        checked += 1;
    }
    assert_eq!(checked, expected.len(), "every panel of the dashboard");
    // gpulse's own Grafana dashboard: every expression is valid PromQL, and those over series this
    // scenario has return them (findings, steps and forecasts need a job and a diagnosis).
    let grafana: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("docs/grafana/gpulse.json")).unwrap()).unwrap();
    for panel in grafana["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap().replace("$instance", &s.addr).replace("$gpu", "0|1|2");
            let got = prometheus_query(port, &expr);
            let has_data = !["Findings", "Steps", "Data wait", "Time to OOM"].iter().any(|p| title.starts_with(p));
            assert_eq!(!got.is_empty(), has_data, "{title}: {expr} gave {got:?}");
        }
    }
    // The lost GPU fires its alert; nothing else does on this scenario.
    let deadline = Instant::now() + Duration::from_secs(30);
    let firing = loop {
        let alerts = prometheus_query(port, "ALERTS{alertstate=\"firing\"}");
        if !alerts.is_empty() || Instant::now() > deadline {
            break alerts;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let names: Vec<(&str, &str)> = firing.iter().map(|a| (a.0["alertname"].as_str(), a.0["gpu"].as_str())).collect();
    assert_eq!(names, [("GpuLost", "2")]);
}

/// promtool lints the whole exposition: gpulse's own series pass clean; what it reports on the
/// DCGM series is only what dcgm-exporter's own names carry (camelCase labels, counters without
/// `_total`), which gpulse keeps so that dashboards work unchanged.
#[test]
fn promtool_finds_nothing_but_dcgm_exporters_own_naming() {
    let s = serve(&[]);
    let (_, _, metrics) = get(&s.addr, "/metrics", &[]);
    let Some(problems) = promtool_dcgm_naming_only(&metrics, "promtool check metrics") else { return };
    assert!(problems >= 10, "promtool ran: {problems} lines");
}

/// Lints `exposition` with `promtool check metrics` and asserts that every line it reports is
/// one dcgm-exporter's own names carry (camelCase labels, counters without `_total`); returns
/// how many it reported. `None`, with `what` said skipped, where promtool is not installed
/// (CI installs it and never skips).
pub fn promtool_dcgm_naming_only(exposition: &str, what: &str) -> Option<usize> {
    let Ok(_) = Command::new("promtool").arg("--version").output() else {
        assert!(std::env::var_os("GPULSE_REQUIRE_PROMETHEUS").is_none(), "promtool is required");
        skipped(&format!("{what} (no prometheus; CI installs it)"));
        return None;
    };
    let mut lint = KillOnDrop::spawn(
        Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    lint.stdin.take().unwrap().write_all(exposition.as_bytes()).unwrap();
    let out = lint.wait_with_output().unwrap();
    let problems = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    for p in problems.lines() {
        let dcgm_naming = p.starts_with("DCGM_FI_")
            && (p.ends_with("label names should be written in 'snake_case' not 'camelCase'")
                || p.ends_with("counter metrics should have \"_total\" suffix"));
        assert!(dcgm_naming, "{p}");
    }
    Some(problems.lines().count())
}

/// `name="…"`'s value in the element or tag text `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let rest = &tag[tag.find(&key)? + key.len()..];
    Some(&rest[..rest.find('"')?])
}

/// The text from `start`'s first occurrence in `dom` to the end of the element `end` closes.
fn element<'a>(dom: &'a str, start: &str, end: &str) -> &'a str {
    let from = dom.find(start).unwrap_or_else(|| panic!("no {start} in {dom}"));
    let rest = &dom[from..];
    &rest[..rest.find(end).map_or(rest.len(), |e| e + end.len())]
}

/// The dashboard in a real browser, signed in by the token's URL: the charts draw the history
/// the server kept, at once, on labelled axes. Without the token, the page is refused.
#[test]
fn the_dashboard_draws_in_a_browser_with_the_token_and_is_refused_without() {
    let Some(chromium) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
    else {
        assert!(std::env::var_os("GPULSE_REQUIRE_CHROMIUM").is_none(), "chromium is required");
        skipped("the dashboard in a real browser (no chromium; CI installs it)");
        return;
    };
    let s = serve(&[]);
    let dir = fresh_dir("serve", "chromium");
    let browse = |url: &str, extra: &[&str]| {
        let out = Command::new(chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .args(["--timeout=3000", "--enable-logging=stderr", "--v=0"])
            .args(extra)
            .arg(url)
            .output()
            .unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Enough history that the few polls the stream brings while the page loads cannot fill a chart.
    let kept = || {
        let (_, _, json) = get(&s.addr, "/api/v1/history", &[("Authorization", &bearer())]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["frames"].as_array().unwrap().iter().map(|f| f["timestamp_us"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while kept().len() < 15 {
        assert!(Instant::now() < deadline, "history never grew");
        std::thread::sleep(Duration::from_millis(200));
    }
    let history_us = kept();
    let (dom, log) = browse(&format!("http://{}/?token={TOKEN}", s.addr), &["--dump-dom"]);
    assert!(dom.matches("<polyline").count() + dom.matches("<circle").count() >= 8, "two GPUs' charts drew: {dom}");
    // GPU 0's GPU-Util, 87% in every poll: one point per poll kept, each at 87% on the value axis
    // and at its own time on the time axis.
    let card = element(&dom, "data-gpu=\"0\"", "</table>");
    let util = element(card, "data-chart=\"util\"", "</figure>");
    let line_at = |class: &str, value: &str| -> f64 {
        let tag = util.split('<').find(|t| attr(t, "class") == Some(class) && attr(t, "data-value") == Some(value));
        attr(tag.unwrap_or_else(|| panic!("no {class} {value} in {util}")), "y1").unwrap().parse().unwrap()
    };
    let (y0, y100) = (line_at("tick y", "0"), line_at("tick y", "100"));
    let polyline = util.split('<').find(|t| t.starts_with("polyline") && attr(t, "data-name") == Some("GPU-Util"));
    let points: Vec<(f64, f64)> = attr(polyline.expect("GPU-Util is a line"), "points")
        .unwrap()
        .split(' ')
        .map(|p| p.split_once(',').map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap())).unwrap())
        .collect();
    assert!(points.len() >= history_us.len(), "{} points for {} polls kept", points.len(), history_us.len());
    let y87 = y0 + 0.87 * (y100 - y0);
    assert!(points.iter().all(|p| (p.1 - y87).abs() <= 0.15), "all at 87% ({y87}): {points:?}");
    assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "in time order: {points:?}");
    // The time axis: ten minutes to "now", labelled; the first point as far left of the last as
    // the history's first poll is older than its last, at least.
    let tick_x = |label: &str| -> f64 {
        let end = util.find(&format!(">{label}</text>")).unwrap_or_else(|| panic!("no {label} label: {util}"));
        let tag = &util[util[..end].rfind("<line").unwrap()..end];
        attr(tag, "x1").unwrap().parse().unwrap()
    };
    let px_per_us = (tick_x("now") - tick_x("-10 min")) / 600e6;
    let span_us = (history_us[history_us.len() - 1] - history_us[0]) as f64;
    let drawn = points[points.len() - 1].0 - points[0].0;
    assert!(drawn + 0.2 >= span_us * px_per_us, "{drawn} px for {span_us} µs at {px_per_us} px/µs");
    // Every chart has both axes labelled, each in its unit.
    for (chart, unit_label) in
        [("util", ">100%<"), ("memory", ">140 GiB<"), ("power", ">700 W<"), ("temperature", " °C<")]
    {
        let fig = element(card, &format!("data-chart=\"{chart}\""), "</figure>");
        for label in [">-10 min<", ">-4 min<", ">now<", ">0", unit_label] {
            assert!(fig.contains(label), "{chart} has {label}: {fig}");
        }
    }
    assert!(dom.contains("4242"), "the process table");
    assert!(!log.contains("Uncaught"), "script errors: {log}");
    // The docs' picture is made by `tools/docs/serve_dashboard.sh`; a test writes only its own folder.
    let png = dir.join("dashboard.png");
    let (_, _) = browse(
        &format!("http://{}/?token={TOKEN}", s.addr),
        &["--window-size=1200,1400", &format!("--screenshot={}", png.display())],
    );
    assert!(std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000), "a screenshot");
    let fresh = fresh_dir("serve", "chromium-anon");
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--timeout=4000", "--dump-dom"])
        .arg(format!("--user-data-dir={}", fresh.join("profile").display()))
        .arg(format!("http://{}/", s.addr))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("this needs the token") && !dom.contains("<polyline") && !dom.contains("<circle"), "{dom}");
}

/// 100 clients asking for 30 s beside 50 stream subscribers: every request is answered and the
/// server's memory stays flat.
#[test]
fn a_hundred_clients_and_fifty_subscribers_are_all_answered() {
    let s = serve(&[]);
    let rss = |pid: u32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .trim()
            .trim_end_matches(" kB")
            .parse::<u64>()
            .unwrap()
    };
    let pid = s.child.id();
    let subscribers: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut c = TcpStream::connect(&s.addr).unwrap();
            let req = format!("GET /api/v1/stream HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\r\n", s.addr, bearer());
            c.write_all(req.as_bytes()).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let before_kib = rss(pid);
    // A count, not a duration: what is checked is that every request is answered and memory
    // stays bounded, not how fast (BENCHMARKS.md has the speed).
    let clients: Vec<_> = (0..100)
        .map(|i| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut answered = 0u32;
                for _ in 0..20 {
                    let path = ["/metrics", "/healthz", "/ready"][i % 3];
                    assert_eq!(get(&addr, path, &[]).0, 200, "{path}");
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    let answered: u32 = clients.into_iter().map(|c| c.join().expect("every request answered")).sum();
    let after_kib = rss(pid);
    assert_eq!(answered, 2000);
    assert!(after_kib < before_kib + 32 * 1024, "memory grew from {before_kib} to {after_kib} kB");
    drop(subscribers);
    let _ = fixture(SCENARIO);
}

/// `gpulse run --serve`: the job's own pace in the metrics while it runs, 20 steps a second.
#[test]
fn run_serve_exports_the_jobs_steps_per_second() {
    let dir = fresh_dir("serve", "run");
    // The loop writes its own step times and data waits: the truth the metrics are held to.
    let script = "import gpulse, time\nf = open('truth.txt', 'w', buffering=1)\nfor i in range(200):\n    t0 = time.monotonic()\n    with gpulse.phase('data'):\n        time.sleep(0.01)\n    t1 = time.monotonic()\n    time.sleep(0.04)\n    gpulse.step()\n    f.write(f'{t0} {t1} {time.monotonic()}\\n')\n";
    let child = KillOnDrop::spawn(
        gpulse(Some(SCENARIO))
            .env("TMPDIR", &dir)
            .args([
                "run",
                "--serve",
                "127.0.0.1:0",
                "--status",
                "off",
                "--no-report",
                "-o",
                "r.db",
                "--",
                "python3",
                "-c",
                script,
            ])
            .env("PYTHONPATH", root().join("python"))
            .env("GPULSE_TOKEN", TOKEN)
            .current_dir(&dir)
            .stderr(Stdio::piped()),
    );
    let mut s = Serving::from_child(child);
    let addr = s.addr.clone();
    // The loop's own steps: (start, data ready, end) in seconds.
    let truth = || -> Vec<[f64; 3]> {
        let text = std::fs::read_to_string(dir.join("truth.txt")).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |i| &text[..i]);
        whole
            .lines()
            .map(|l| {
                let v: Vec<f64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
                [v[0], v[1], v[2]]
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (rate, wait, steps) = loop {
        let (_, _, m) = get(&addr, "/metrics", &[]);
        let value = |name: &str| {
            m.lines().find(|l| l.starts_with(name)).map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        };
        let steps = truth();
        // A few seconds of steps first, well before the loop's end.
        if let Some(r) = value("gpulse_job_steps_per_second{").filter(|_| (60..150).contains(&steps.len())) {
            break (r, value("gpulse_job_data_wait_ratio{"), steps);
        }
        assert!(Instant::now() < deadline && steps.len() < 150, "no steps in the metrics:\n{m}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The loop's own pace and data-wait share over its last 40 steps, against the metrics' window.
    let last = &steps[steps.len() - 40..];
    let own_rate = (last.len() - 1) as f64 / (last[last.len() - 1][2] - last[0][2]);
    let own_wait = last.iter().map(|s| s[1] - s[0]).sum::<f64>() / last.iter().map(|s| s[2] - s[0]).sum::<f64>();
    // The sleeps bound the pace from above: 50 ms a step at least.
    assert!(rate <= 20.5 && (rate / own_rate - 1.0).abs() < 0.2, "{rate} against the loop's {own_rate}");
    assert!(wait.is_some_and(|w| (w - own_wait).abs() < 0.08), "{wait:?} against the loop's {own_wait}");
    assert!(s.child.wait().unwrap().success());
}
