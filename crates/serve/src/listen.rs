//! The accept loop. Every connection is held to limits (how many at once, how many from one
//! address, how long its request head may take, how large it may be), so idle, slow or too many
//! clients cannot take the server away from Prometheus. With TLS, the handshake is held to the
//! head's timeout too, and a plain HTTP request is answered in plain HTTP: use https. Each
//! connection takes the certificate in force when it is accepted, so a renewed one needs no
//! restart.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::SharedWebConfig;

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

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Go's answer to plain HTTP on a TLS port, which curl and browsers show as it is.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 48\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// The TLS side of a new connection, or `None` when it is closed: a client that sent plain HTTP
/// (answered 400), or whose handshake failed.
async fn handshake(acceptor: &TlsAcceptor, stream: TcpStream) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await.ok()? == 0 {
        return None;
    }
    if first[0] != TLS_HANDSHAKE {
        let mut stream = stream;
        let _ = stream.write_all(PLAIN_HTTP_ANSWER).await;
        let _ = stream.shutdown().await;
        // Read what the client sent until it closes (the caller's timeout bounds this): closing
        // with its request unread would reset the connection and lose the answer.
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        return None;
    }
    acceptor.accept(stream).await.ok()
}

async fn serve_one<IO>(http: &http1::Builder, io: IO, app: Router)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _ = http.serve_connection(TokioIo::new(io), TowerToHyperService::new(app)).await;
}

/// Accepts and serves connections until the runtime ends; over TLS when `web` has it.
pub(crate) async fn serve(listener: TcpListener, app: Router, limits: Limits, web: Arc<SharedWebConfig>) {
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
        let tls = web.current().tls.clone().map(TlsAcceptor::from);
        let (http, app) = (http.clone(), app.clone());
        tokio::spawn(async move {
            match tls {
                None => serve_one(&http, stream, app).await,
                // A client that opens and sends nothing, or a byte at a time, is closed as an
                // idle HTTP one is.
                Some(acceptor) => {
                    if let Ok(Some(tls)) = tokio::time::timeout(limits.head_timeout, handshake(&acceptor, stream)).await
                    {
                        serve_one(&http, tls, app).await;
                    }
                }
            }
            drop((permit, slot));
        });
    }
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "listen_tls_tests.rs"]
mod tls_tests;
