//! One unary gRPC call over a Unix socket: HTTP/2 (hyper's client), a request framed as gRPC
//! frames it (a compression flag byte, a 4-byte big-endian length, the message), the status in
//! the trailers. Every call is bounded: one deadline over connect, handshake and answer, and a
//! cap on the answer's size.

use std::path::Path;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// A call that did not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("HTTP/2: {0}")]
    Http(String),
    #[error("gRPC status {code}: {message}")]
    Status { code: u32, message: String },
    #[error("malformed answer: {0}")]
    Malformed(String),
}

/// `[0, len as u32 big-endian, message…]`: one uncompressed gRPC frame.
pub fn frame(message: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(5 + message.len());
    b.push(0);
    b.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
    b.extend_from_slice(message);
    b.into()
}

/// The message inside one uncompressed gRPC frame; an empty body is the empty message.
pub fn unframe(mut body: Bytes) -> Result<Bytes, GrpcError> {
    if body.is_empty() {
        return Ok(body);
    }
    if body.len() < 5 {
        return Err(GrpcError::Malformed(format!("a frame of {} bytes", body.len())));
    }
    let compressed = body.get_u8();
    let len = body.get_u32() as usize;
    if compressed != 0 {
        return Err(GrpcError::Malformed("a compressed message, which was not asked for".into()));
    }
    if body.len() != len {
        return Err(GrpcError::Malformed(format!("a frame says {len} bytes and holds {}", body.len())));
    }
    Ok(body)
}

/// Calls `method` on the server at `socket` with `request` (an encoded message); the encoded
/// answer, at most `max_bytes`, within `timeout`.
pub async fn unary(
    socket: &Path,
    method: &str,
    request: &[u8],
    timeout: Duration,
    max_bytes: usize,
) -> Result<Bytes, GrpcError> {
    tokio::time::timeout(timeout, call(socket, method, request, max_bytes))
        .await
        .map_err(|_| GrpcError::Timeout(timeout))?
}

async fn call(socket: &Path, method: &str, request: &[u8], max_bytes: usize) -> Result<Bytes, GrpcError> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| GrpcError::Connect(socket.display().to_string(), e))?;
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .max_frame_size(16 * 1024)
        .max_header_list_size(16 * 1024)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| GrpcError::Http(e.to_string()))?;
    // The connection is driven beside the call and ends with it (the deadline drops both).
    let driver = tokio::spawn(conn);
    let req = hyper::Request::post(format!("http://localhost{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("user-agent", concat!("gpulse/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(frame(request)))
        .map_err(|e| GrpcError::Http(e.to_string()))?;
    let answer = send.send_request(req).await.map_err(|e| GrpcError::Http(e.to_string()));
    let result = async {
        let resp = answer?;
        if resp.status() != hyper::StatusCode::OK {
            return Err(GrpcError::Http(format!("HTTP status {}", resp.status())));
        }
        let head_status = status(resp.headers());
        let body = Limited::new(resp.into_body(), max_bytes + 5)
            .collect()
            .await
            .map_err(|e| GrpcError::Malformed(format!("the answer: {e}")))?;
        // A trailers-only answer carries its status in the headers.
        let st = body.trailers().and_then(status).or(head_status);
        match st {
            Some((0, _)) => unframe(body.to_bytes()),
            Some((code, message)) => Err(GrpcError::Status { code, message }),
            None => Err(GrpcError::Malformed("no grpc-status".into())),
        }
    }
    .await;
    driver.abort();
    result
}

fn status(h: &hyper::HeaderMap) -> Option<(u32, String)> {
    let code = h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()?;
    let message = h.get("grpc-message").and_then(|m| m.to_str().ok()).unwrap_or_default();
    Some((code, message.chars().take(200).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_refused() {
        let f = frame(b"abc");
        assert_eq!(&f[..], [0, 0, 0, 0, 3, b'a', b'b', b'c']);
        assert_eq!(&unframe(f).unwrap()[..], b"abc");
        assert!(unframe(Bytes::from_static(&[0, 0, 0, 0, 9, 1])).is_err(), "short");
        assert!(unframe(Bytes::from_static(&[1, 0, 0, 0, 1, 1])).is_err(), "compressed");
        assert!(unframe(Bytes::from_static(&[0, 0])).is_err());
        assert!(unframe(Bytes::new()).unwrap().is_empty());
    }
}
