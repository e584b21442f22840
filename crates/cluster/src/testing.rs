//! A stand-in node for tests: one Unix socket that answers the CRI's `ListContainers` and the
//! kubelet's pod-resources `List` as the real servers do (gRPC over HTTP/2, the status in the
//! trailers, UNIMPLEMENTED for any other method), from the messages a test hands it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;

use crate::grpc::{frame, unframe};
use crate::proto;

/// What the stand-in answers; a test may change it while it serves.
#[derive(Default)]
pub struct Answers {
    pub containers: Vec<proto::Container>,
    pub pods: Vec<proto::PodResources>,
    /// How long each answer waits first: a slow socket.
    pub delay: Duration,
}

/// A serving stand-in; dropping it stops it and removes the socket.
pub struct Node {
    pub path: PathBuf,
    pub answers: Arc<Mutex<Answers>>,
    pub calls: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serves `answers` on a new socket at `path`.
pub fn serve(path: &Path, answers: Answers) -> Node {
    let _ = std::fs::remove_file(path);
    let std_listener = std::os::unix::net::UnixListener::bind(path).expect("bind the stand-in socket");
    std_listener.set_nonblocking(true).unwrap();
    let answers = Arc::new(Mutex::new(answers));
    let calls = Arc::new(AtomicUsize::new(0));
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let (a, c) = (answers.clone(), calls.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(std_listener).unwrap();
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let (a, c) = (a.clone(), c.clone());
                        tokio::spawn(async move {
                            let svc = hyper::service::service_fn(move |req| answer(req, a.clone(), c.clone()));
                            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                }
            }
        });
    });
    Node { path: path.to_owned(), answers, calls, stop: Some(stop) }
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    answers: Arc<Mutex<Answers>>,
    calls: Arc<AtomicUsize>,
) -> Result<hyper::Response<Frames>, std::convert::Infallible> {
    use http_body_util::BodyExt;
    calls.fetch_add(1, Ordering::Relaxed);
    let grpc = req.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !grpc {
        let mut r = hyper::Response::new(Frames::default());
        *r.status_mut() = hyper::StatusCode::UNSUPPORTED_MEDIA_TYPE;
        return Ok(r);
    }
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let reply = match path.as_str() {
        proto::LIST_CONTAINERS => {
            unframe(body).ok().and_then(|b| proto::ListContainersRequest::decode(b).ok()).map(|_| {
                proto::ListContainersResponse { containers: answers.lock().unwrap().containers.clone() }.encode_to_vec()
            })
        }
        proto::LIST_POD_RESOURCES => {
            unframe(body).ok().and_then(|b| proto::ListPodResourcesRequest::decode(b).ok()).map(|_| {
                proto::ListPodResourcesResponse { pod_resources: answers.lock().unwrap().pods.clone() }.encode_to_vec()
            })
        }
        _ => None,
    };
    if reply.is_some() {
        let delay = answers.lock().unwrap().delay;
        tokio::time::sleep(delay).await;
    }
    let builder = hyper::Response::builder().header("content-type", "application/grpc");
    Ok(match reply {
        Some(message) => {
            let mut trailers = hyper::HeaderMap::new();
            trailers.insert("grpc-status", "0".parse().unwrap());
            let frames = Frames([Frame::data(frame(&message)), Frame::trailers(trailers)].into());
            builder.body(frames).unwrap()
        }
        // Trailers-only: the status in the headers, as grpc-go answers an unknown method.
        None => builder
            .header("grpc-status", "12")
            .header("grpc-message", "unknown method")
            .body(Frames::default())
            .unwrap(),
    })
}

/// A body of set frames: the message, then the trailers.
#[derive(Default)]
pub struct Frames(VecDeque<Frame<Bytes>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// A container as containerd lists it, with the kubelet's labels.
pub fn container(id: &str, uid: &str, namespace: &str, pod: &str, name: &str) -> proto::Container {
    proto::Container {
        id: id.into(),
        pod_sandbox_id: format!("sandbox-{pod}"),
        metadata: Some(proto::ContainerMetadata { name: name.into(), attempt: 0 }),
        labels: [
            ("io.kubernetes.pod.uid", uid),
            ("io.kubernetes.pod.namespace", namespace),
            ("io.kubernetes.pod.name", pod),
            ("io.kubernetes.container.name", name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
        annotations: Default::default(),
    }
}

/// A pod whose one container holds `gpus` (device IDs, as the NVIDIA device plugin gives them).
pub fn pod_with_gpus(namespace: &str, pod: &str, container: &str, gpus: &[&str]) -> proto::PodResources {
    proto::PodResources {
        name: pod.into(),
        namespace: namespace.into(),
        containers: vec![proto::ContainerResources {
            name: container.into(),
            devices: vec![proto::ContainerDevices {
                resource_name: "nvidia.com/gpu".into(),
                device_ids: gpus.iter().map(|g| (*g).to_owned()).collect(),
            }],
        }],
    }
}
