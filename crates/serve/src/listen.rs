//! The accept loop. Every connection is held to limits (how many at once, how many from one
//! address, how long its request head may take, how large it may be), so idle, slow or too many
//! clients cannot take the server away from Prometheus.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What a connection may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Connections at once from one address.
    pub max_per_address: usize,
    /// How long a request's head may take to arrive, counted from when the connection is idle:
    /// a client that sends nothing, or a byte at a time, is closed after it.
    pub head_timeout: Duration,
    /// The largest request head: a longer one is answered 431 and closed.
    pub max_head_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let files = raise_open_files();
        // Room for the recording, the NVML handles and the marks socket.
        let max_connections = files.saturating_sub(64).clamp(64, 16_384) as usize;
        Self {
            max_connections,
            max_per_address: (max_connections / 4).max(16),
            head_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
        }
    }
}

/// Raises this process's open-file limit to its hard limit (1,024 is a common soft default, and
/// every connection is a file); returns the limit now in force.
fn raise_open_files() -> u64 {
    // SAFETY: getrlimit and setrlimit on this process, with a correctly sized struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return 1024;
        }
        let want = l.rlim_max.min(1 << 20);
        if l.rlim_cur < want {
            let raised = libc::rlimit { rlim_cur: want, rlim_max: l.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return want;
            }
        }
        l.rlim_cur
    }
}

/// One address's count of open connections, given back when the connection ends.
struct AddressSlot {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl AddressSlot {
    fn take(counts: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, max: usize) -> Option<Self> {
        let mut c = counts.lock().ok()?;
        let n = c.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Self { counts: counts.clone(), ip })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock()
            && let Some(n) = c.get_mut(&self.ip)
        {
            *n -= 1;
            if *n == 0 {
                c.remove(&self.ip);
            }
        }
    }
}

/// Accepts and serves connections until the runtime ends.
pub(crate) async fn serve(listener: TcpListener, app: Router, limits: Limits) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = Arc::new(Mutex::new(HashMap::new()));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_header_size(limits.max_head_bytes)
        .max_buf_size(limits.max_head_bytes.max(8192) + 8192);
    let http = Arc::new(http);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            // Out of descriptors, or a connection reset before it was accepted: try again
            // shortly rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over a limit: closed at once, before a byte is read.
        let Ok(permit) = open.clone().try_acquire_owned() else { continue };
        let Some(slot) = AddressSlot::take(&per_address, peer.ip(), limits.max_per_address) else { continue };
        let _ = stream.set_nodelay(true);
        let (http, service) = (http.clone(), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
            drop((permit, slot));
        });
    }
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
