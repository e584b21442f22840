//! Names for the pods gpulse finds in cgroups, from the node alone: the container runtime's CRI
//! socket (`RuntimeService/ListContainers`: each container's pod name, namespace and UID, as
//! the kubelet labels it) and the kubelet's pod-resources socket (`PodResourcesLister/List`:
//! which container each GPU was assigned to). No API server, no RBAC. Both are gRPC over Unix
//! sockets, spoken here with prost's messages over hyper's HTTP/2 client (`grpc.rs`).

pub mod directory;
pub mod grpc;
pub mod proto;
#[cfg(any(test, feature = "test-server"))]
pub mod testing;

pub use directory::{Cluster, Sockets};
#[cfg(test)]
mod socket_tests;
