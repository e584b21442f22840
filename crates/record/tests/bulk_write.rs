//! The import's fast path (`Writer::gpu_samples`) writes every reading it is given: a parameter
//! it leaves bound from an earlier row must still hold that row's value, whether a reading comes,
//! goes or changes from one row to the next, within one call or across calls.

use gpulse_model::{DeviceInfo, GpuSample};
use gpulse_record::{RunMeta, Writer};
use proptest::prelude::*;

/// The base readings of one sample, each present or absent.
type Base = [Option<u32>; 10];

fn sample(gpu: u32, b: &Base) -> GpuSample {
    GpuSample {
        gpu_index: gpu,
        util_gpu_pct: b[0],
        util_mem_pct: b[1],
        memory_used_bytes: b[2].map(|k| u64::from(k) * 1024),
        temperature_gpu_c: b[3],
        temperature_memory_c: b[4],
        power_draw_mw: b[5],
        clock_sm_mhz: b[6],
        clock_mem_mhz: b[7],
        pstate: b[8],
        fan_speed_pct: b[9],
        ..Default::default()
    }
}

fn base_of(s: &GpuSample) -> Base {
    [
        s.util_gpu_pct,
        s.util_mem_pct,
        s.memory_used_bytes.map(|b| (b / 1024) as u32),
        s.temperature_gpu_c,
        s.temperature_memory_c,
        s.power_draw_mw,
        s.clock_sm_mhz,
        s.clock_mem_mhz,
        s.pstate,
        s.fan_speed_pct,
    ]
}

/// A reading that is often the same as the last one and sometimes absent, as a log's are.
fn reading() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![3 => Just(Some(7)), 1 => Just(None), 1 => (0u32..3).prop_map(Some)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_reading_written_is_read_back(
        rows in proptest::collection::vec(proptest::array::uniform10(reading()), 250..1400),
        cut in 1usize..1400,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bulk.db");
        let meta = RunMeta {
            host: None,
            gpulse_version: "test".into(),
            command: None,
            started_at_us: 0,
            source: "test".into(),
            interval_ms: None,
            extra: Default::default(),
        };
        let devices: Vec<DeviceInfo> =
            (0..2).map(|i| DeviceInfo { index: i, uuid: format!("GPU-{i}"), ..Default::default() }).collect();
        let mut w = Writer::create_bulk(&path, &meta, &devices).unwrap();
        // Two GPUs a poll, 100 ms apart; written in two calls, cut anywhere.
        let samples: Vec<(i64, GpuSample)> = rows
            .iter()
            .enumerate()
            .map(|(i, b)| (1_000_000 + (i as i64 / 2) * 100_000, sample(i as u32 % 2, b)))
            .collect();
        let (first, second) = samples.split_at(cut.min(samples.len()));
        w.gpu_samples(first.iter().map(|(t, s)| (*t, s))).unwrap();
        w.gpu_samples(second.iter().map(|(t, s)| (*t, s))).unwrap();
        w.finish().unwrap();
        let back = gpulse_record::read(&path).unwrap();
        let read: Vec<Base> = back.snapshots.iter().flat_map(|s| s.gpus.iter().map(base_of)).collect();
        let written: Vec<Base> = rows.to_vec();
        prop_assert_eq!(read, written);
    }
}
