//! The messages of `proto/*.proto`, written out as prost derives (what `prost-build` would
//! generate, less the fields gpulse never reads), so that building gpulse needs no `protoc`.
//! A test encodes each and checks the bytes against protobuf's wire format by hand.

use std::collections::HashMap;

/// `runtime.v1.ListContainersRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainersRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<ContainerFilter>,
}

/// `runtime.v1.ContainerFilter`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerFilter {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub state: Option<ContainerStateValue>,
    #[prost(string, tag = "3")]
    pub pod_sandbox_id: String,
    #[prost(map = "string, string", tag = "4")]
    pub label_selector: HashMap<String, String>,
}

/// `runtime.v1.ContainerStateValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStateValue {
    #[prost(int32, tag = "1")]
    pub state: i32,
}

/// `runtime.v1.ContainerMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerMetadata {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(uint32, tag = "2")]
    pub attempt: u32,
}

/// `runtime.v1.Container`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    #[prost(message, optional, tag = "3")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(map = "string, string", tag = "8")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "9")]
    pub annotations: HashMap<String, String>,
}

/// `runtime.v1.ListContainersResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainersResponse {
    #[prost(message, repeated, tag = "1")]
    pub containers: Vec<Container>,
}

/// `v1.ListPodResourcesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

/// `v1.ListPodResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// `v1.PodResources`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub namespace: String,
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// `v1.ContainerResources`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
}

/// `v1.ContainerDevices`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    #[prost(string, tag = "1")]
    pub resource_name: String,
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}

/// The gRPC method paths, `/package.Service/Method`.
pub const LIST_CONTAINERS: &str = "/runtime.v1.RuntimeService/ListContainers";
pub const LIST_POD_RESOURCES: &str = "/v1.PodResourcesLister/List";

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// The wire bytes, by hand from protobuf's encoding rules: a key is `tag << 3 | wire type`
    /// (2: length-delimited), then a varint length.
    #[test]
    fn messages_encode_as_the_wire_format_says() {
        let pd = PodResources {
            name: "p".into(),
            namespace: "n".into(),
            containers: vec![ContainerResources {
                name: "c".into(),
                devices: vec![ContainerDevices { resource_name: "g".into(), device_ids: vec!["u".into()] }],
            }],
        };
        let dev = [0x0a, 1, b'g', 0x12, 1, b'u'];
        let mut cont = vec![0x0a, 1, b'c', 0x12, dev.len() as u8];
        cont.extend(dev);
        let mut want = vec![0x0a, 1, b'p', 0x12, 1, b'n', 0x1a, cont.len() as u8];
        want.extend(cont);
        assert_eq!(pd.encode_to_vec(), want);
        // A map entry is a message of key (1) and value (2), under the map's tag (8 → 0x42).
        let c = Container { id: "i".into(), labels: [("k".into(), "v".into())].into(), ..Default::default() };
        assert_eq!(c.encode_to_vec(), [0x0a, 1, b'i', 0x42, 6, 0x0a, 1, b'k', 0x12, 1, b'v']);
        // Fields gpulse leaves out (image, 4) are skipped when read.
        let mut with_image = c.encode_to_vec();
        with_image.extend([0x22, 2, 0x0a, 0]);
        assert_eq!(Container::decode(with_image.as_slice()).unwrap(), c);
    }
}
