//! `-i`: which devices a query covers, by index, UUID or PCI bus id, as a comma list.

use gpulse_model::DeviceInfo;

use crate::QueryError;

/// Positions in `devices` that `spec` names, in the order of `devices`. `None` selects all.
pub fn select(devices: &[DeviceInfo], spec: Option<&str>) -> Result<Vec<usize>, QueryError> {
    let Some(spec) = spec else {
        return Ok((0..devices.len()).collect());
    };
    let mut chosen = Vec::new();
    for id in spec.split(',').map(str::trim) {
        let pos = devices.iter().position(|d| matches(d, id)).ok_or(QueryError::NoDevices)?;
        if !chosen.contains(&pos) {
            chosen.push(pos);
        }
    }
    chosen.sort_unstable();
    Ok(chosen)
}

fn matches(d: &DeviceInfo, id: &str) -> bool {
    if let Ok(n) = id.parse::<u32>() {
        return d.index == n;
    }
    if id.len() >= 5 && d.uuid.eq_ignore_ascii_case(id) {
        return true;
    }
    d.pci_bus_id.as_deref().is_some_and(|bus| same_bus_id(bus, id))
}

/// Bus ids match when their bus:device.function agree and their domains agree numerically, so
/// `00000000:00:06.0`, `0000:00:06.0` and `00:06.0` name one device.
fn same_bus_id(a: &str, b: &str) -> bool {
    fn parts(s: &str) -> Option<(u64, String)> {
        let mut it = s.rsplitn(3, ':');
        let (dev_fn, bus) = (it.next()?, it.next()?);
        let domain = it.next().map_or(Some(0), |d| u64::from_str_radix(d, 16).ok())?;
        Some((domain, format!("{}:{}", bus.to_ascii_lowercase(), dev_fn.to_ascii_lowercase())))
    }
    matches!((parts(a), parts(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devs() -> Vec<DeviceInfo> {
        (0..3)
            .map(|i| DeviceInfo {
                index: i,
                uuid: format!("GPU-{i}aaa"),
                pci_bus_id: Some(format!("00000000:0{i}:00.0")),
                ..DeviceInfo::default()
            })
            .collect()
    }

    #[test]
    fn selects_by_index_uuid_and_bus_id() {
        let d = devs();
        assert_eq!(select(&d, None), Ok(vec![0, 1, 2]));
        assert_eq!(select(&d, Some("2,0")), Ok(vec![0, 2]));
        assert_eq!(select(&d, Some("GPU-1aaa")), Ok(vec![1]));
        assert_eq!(select(&d, Some("0000:02:00.0")), Ok(vec![2]));
        assert_eq!(select(&d, Some("01:00.0")), Ok(vec![1]));
        assert_eq!(select(&d, Some("5")), Err(QueryError::NoDevices));
        assert_eq!(select(&d, Some("GPU-bogus")), Err(QueryError::NoDevices));
    }
}
