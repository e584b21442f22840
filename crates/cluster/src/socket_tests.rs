//! The clients against stand-ins that speak the real APIs over Unix sockets.

use std::time::{Duration, Instant};

use crate::directory::{list_containers, list_gpus};
use crate::grpc::{GrpcError, unary};
use crate::testing::{Answers, container, pod_with_gpus, serve};
use crate::{Cluster, Sockets};
use gpulse_sample::workload::Directory;

const ID_A: &str = "3baf66ee56a52a8765c3deb2444315411a888fa3e2f8f7ddd75e9ded3c34425e";

/// A socket's path in a directory of the test's own, which is removed when dropped.
fn socket(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new().prefix(&format!("gpulse-cluster-{name}-")).tempdir().unwrap();
    let path = dir.path().join("api.sock");
    (dir, path)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn containers_and_gpus_come_back_named() {
    let (_dir, path) = socket("named");
    let node = serve(
        &path,
        Answers {
            containers: vec![container(ID_A, "u-1", "team-a", "train-0", "main")],
            pods: vec![
                pod_with_gpus("team-a", "train-0", "main", &["GPU-aaa"]),
                // Time-slicing: two containers on replicas of one GPU; it is neither's alone.
                pod_with_gpus("team-b", "x", "c", &["GPU-bbb::0"]),
                pod_with_gpus("team-c", "y", "c", &["GPU-bbb::1"]),
            ],
            ..Answers::default()
        },
    );
    let rt = rt();
    let c = rt.block_on(list_containers(&node.path)).unwrap();
    let p = &c[ID_A];
    assert_eq!(
        (p.uid.as_deref(), p.namespace.as_deref(), p.name.as_deref(), p.container.as_deref()),
        (Some("u-1"), Some("team-a"), Some("train-0"), Some("main"))
    );
    let g = rt.block_on(list_gpus(&node.path)).unwrap();
    assert_eq!(g["GPU-aaa"].name.as_deref(), Some("train-0"));
    assert!(!g.contains_key("GPU-bbb"), "shared by two containers: {g:?}");
}

#[test]
fn an_unknown_method_is_its_status_and_a_slow_server_a_timeout() {
    let (_dir, path) = socket("slow");
    let node = serve(&path, Answers { delay: Duration::from_secs(5), ..Answers::default() });
    let rt = rt();
    let e = rt.block_on(unary(&node.path, "/nope.Service/Nope", &[], Duration::from_secs(2), 1024)).unwrap_err();
    assert!(matches!(e, GrpcError::Status { code: 12, .. }), "{e}");
    let started = Instant::now();
    let e = rt.block_on(list_containers(&node.path)).unwrap_err();
    assert!(matches!(e, GrpcError::Timeout(_)), "{e}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    let (_absent, path) = socket("absent");
    let e = rt.block_on(list_containers(&path.with_file_name("none.sock"))).unwrap_err();
    assert!(matches!(e, GrpcError::Connect(..)), "{e}");
}

#[test]
fn an_answer_past_the_limit_is_refused() {
    let many = (0..200).map(|i| container(&format!("{i:064x}"), "u", "ns", "p", &"c".repeat(100))).collect();
    let (_dir, path) = socket("big");
    let node = serve(&path, Answers { containers: many, ..Answers::default() });
    let e =
        rt().block_on(unary(&node.path, crate::proto::LIST_CONTAINERS, &[], Duration::from_secs(2), 4096)).unwrap_err();
    assert!(matches!(e, GrpcError::Malformed(_)), "{e}");
}

/// The directory answers from its cache at once, even while the socket is slow, and asks again
/// when told a new container appeared.
#[test]
fn the_directory_never_waits_on_the_socket() {
    let (_dir, path) = socket("dir");
    let node = serve(&path, Answers::default());
    let cluster = Cluster::start(Sockets { cri: Some(node.path.clone()), pod_resources: None }).unwrap();
    let wait = |n: usize| {
        let t = Instant::now();
        while cluster.asked() < n {
            assert!(t.elapsed() < Duration::from_secs(10), "asked {} times", cluster.asked());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait(1);
    assert!(cluster.container(ID_A).is_none());
    {
        let mut a = node.answers.lock().unwrap();
        a.containers = vec![container(ID_A, "u-1", "team-a", "train-0", "main")];
        a.delay = Duration::from_millis(1500);
    }
    cluster.refresh();
    let t = Instant::now();
    assert!(cluster.container(ID_A).is_none(), "not yet");
    assert!(t.elapsed() < Duration::from_millis(50), "a lookup never waits: {:?}", t.elapsed());
    wait(2);
    assert_eq!(cluster.container(ID_A).and_then(|p| p.name), Some("train-0".into()));
    assert!(Cluster::start(Sockets::default()).is_none());
}
