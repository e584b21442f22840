//! `gpulse serve`: the live pipeline's frames over HTTP. `/metrics` speaks dcgm-exporter's
//! names, so its dashboards and alerts work unchanged; `/api/v1/snapshot` and the
//! `/api/v1/stream` events carry one poll as JSON, `/api/v1/history` the last ten minutes of what
//! the charts plot; `/` is a dashboard that loads nothing from the network. Everything but
//! `/metrics`, `/healthz` and `/ready` needs the token. A web configuration (exporter-toolkit's
//! file) adds TLS and basic auth in front of all of it, as Prometheus's own exporters have them.
//!
//! The server runs on its own thread with a single-threaded runtime; the pipeline's sink renders
//! each poll once, so an answer is a copy of what is already rendered, however many clients ask.
//! The history alone is written out when asked, from a ring of a fixed size.

mod auth;
mod basic;
mod history;
mod hosts;
mod listen;
mod routes;
mod web_config;

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};

use gpulse_live::{Frame, Sink};
use gpulse_model::DeviceInfo;
use gpulse_report::{prometheus, snapshot};
use history::History;
use tokio::sync::broadcast;

pub use auth::{Auth, check_token, random_token};
pub use listen::Limits;
pub use web_config::{SharedWebConfig, WebConfig, WebConfigError};

/// Renders the HTML report of the recording being written, or says why it cannot.
pub type ReportFn = Box<dyn Fn() -> Result<String, String> + Send + Sync>;

pub struct Config {
    pub listen: SocketAddr,
    /// Shared with the caller, which may reload the token.
    pub auth: Arc<Auth>,
    /// The names this server answers to besides its addresses and `localhost`: the machine's,
    /// and a proxy's.
    pub hosts: Vec<String>,
    /// The most `/api/v1/stream` subscribers at once; more are answered 503.
    pub max_subscribers: usize,
    pub report: Option<ReportFn>,
    pub limits: Limits,
    /// TLS, basic auth and headers from `--web-config`; plain HTTP by default. Shared with the
    /// caller, which may replace it.
    pub web: Arc<SharedWebConfig>,
}

/// What every request reads: the latest poll, rendered, and the recent ones.
struct Shared {
    latest: RwLock<Latest>,
    history: RwLock<History>,
    frames: broadcast::Sender<Arc<str>>,
    subscribers: AtomicUsize,
    auth: Arc<Auth>,
    hosts: hosts::Hosts,
    max_subscribers: usize,
    report: Option<ReportFn>,
    /// One report drawn at a time, off the runtime's thread.
    report_drawing: tokio::sync::Semaphore,
    /// Basic auth, asked of every request but `/healthz` before the token, and headers added to
    /// every answer: read afresh by each request.
    web: Arc<SharedWebConfig>,
}

#[derive(Default)]
struct Latest {
    metrics: Option<Arc<str>>,
    snapshot: Option<Arc<str>>,
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl Server {
    /// Binds now (so a port in use is an error here), then serves on its own thread.
    pub fn start(config: Config) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(config.listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        // The session cookie never leaves an encrypted connection (TLS stays on once it is).
        config.auth.secure_cookie.store(config.web.is_tls(), std::sync::atomic::Ordering::Relaxed);
        let shared = Arc::new(Shared {
            latest: RwLock::new(Latest::default()),
            history: RwLock::new(History::new(history::MAX_FRAMES)),
            frames: broadcast::channel(16).0,
            subscribers: AtomicUsize::new(0),
            auth: config.auth,
            hosts: hosts::Hosts::new(&config.hosts),
            max_subscribers: config.max_subscribers,
            report: config.report,
            report_drawing: tokio::sync::Semaphore::new(1),
            web: config.web.clone(),
        });
        let web = config.web;
        let limits = config.limits;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let app = routes::router(shared.clone());
        std::thread::Builder::new().name("gpulse-serve".into()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                listen::serve(listener, app, limits, web).await;
            });
        })?;
        Ok(Self { shared, addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The pipeline's sink that feeds this server.
    pub fn sink(&self, devices: Vec<DeviceInfo>, hostname: String, host_label: &'static str) -> ServeSink {
        ServeSink { shared: self.shared.clone(), devices, hostname, host_label }
    }
}

/// Renders each frame once, for every client to copy.
pub struct ServeSink {
    shared: Arc<Shared>,
    devices: Vec<DeviceInfo>,
    hostname: String,
    host_label: &'static str,
}

impl Sink for ServeSink {
    fn frame(&mut self, frame: &Frame) {
        let metrics = prometheus::render(&prometheus::Exposition {
            devices: &self.devices,
            poll: frame.poll,
            hostname: &self.hostname,
            host_label: self.host_label,
            rolling: frame.rolling,
        });
        let json: Arc<str> = snapshot::render(&self.devices, frame.poll, frame.rolling).to_string().into();
        if let Ok(mut l) = self.shared.latest.write() {
            *l = Latest { metrics: Some(metrics.into()), snapshot: Some(json.clone()) };
        }
        if let Ok(mut h) = self.shared.history.write() {
            h.push(frame.poll);
        }
        // No subscriber is not an error.
        let _ = self.shared.frames.send(json);
    }
}
