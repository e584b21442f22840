use gpulse_model::{DeviceInfo, GpmMetrics, GpuSample, HostSample, Poll, ProcessSample, Snapshot};

use super::*;

/// dcgm-exporter's published counter list: (name, type, help) of every line, and whether it is
/// enabled (not commented out), as the project keeps it in `tests/fixtures/anchors/`.
fn default_counters() -> Vec<(String, String, String, bool)> {
    let path = gpulse_fixtures::path("anchors/dcgm-exporter-default-counters.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let counters: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 4, "{l}");
            (cols[0].to_owned(), cols[1].to_owned(), cols[3].to_owned(), cols[2] == "1")
        })
        .collect();
    assert!(counters.len() >= 50, "the whole list: {}", counters.len());
    counters
}

fn device(i: u32) -> DeviceInfo {
    DeviceInfo {
        index: i,
        uuid: format!("GPU-{i}"),
        name: "NVIDIA H200".into(),
        pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x19 + i)),
        driver_version: Some("580.159.04".into()),
        ..Default::default()
    }
}

fn full_gpu(i: u32) -> GpuSample {
    GpuSample {
        gpu_index: i,
        util_gpu_pct: Some(87),
        util_mem_pct: Some(40),
        memory_used_bytes: Some(41_088 * MIB),
        memory_free_bytes: Some(100_000 * MIB),
        memory_reserved_bytes: Some(512 * MIB),
        memory_total_bytes: Some(143_771 * MIB),
        temperature_gpu_c: Some(61),
        temperature_memory_c: Some(55),
        power_draw_mw: Some(512_340),
        enforced_power_limit_mw: Some(700_000),
        energy_mj: Some(123_456_789),
        clock_sm_mhz: Some(1980),
        clock_mem_mhz: Some(3201),
        clocks_event_reasons: Some(gpulse_model::clocks::SW_POWER_CAP),
        probes: vec![
            (gpulse_model::Probe::UtilEncoder, Ok(gpulse_model::Reading::Num(3))),
            (gpulse_model::Probe::RemappedFailure, Ok(gpulse_model::Reading::Flag(false))),
            (gpulse_model::Probe::UtilDecoder, Err(gpulse_model::Absence::NotSupported)),
        ],
        gpm: Some(Box::new(GpmMetrics {
            sm_util_pct: Some(62.5),
            any_tensor_util_pct: Some(30.0),
            graphics_util_pct: Some(90.0),
            dram_bw_util_pct: Some(45.0),
            pcie_rx_bytes_per_s: Some(2.5e9),
            ..Default::default()
        })),
        ..Default::default()
    }
}

const MIB: u64 = gpulse_model::MIB;

fn expose(gpus: Vec<GpuSample>) -> String {
    let devices: Vec<DeviceInfo> = gpus.iter().map(|g| device(g.gpu_index)).collect();
    let poll = Poll {
        snapshot: Some(Snapshot { timestamp_us: 1, gpus }),
        host: HostSample {
            timestamp_us: 1,
            cpu_busy_pct: Some(25.0),
            swap_used_bytes: Some(MIB),
            swap_total_bytes: Some(4 * MIB),
            ..Default::default()
        },
        ..Default::default()
    };
    render(&Exposition { devices: &devices, poll: &poll, hostname: "node-a", host_label: "Hostname", rolling: None })
}

/// The value of the series `name` whose labels contain `has`.
fn value(text: &str, name: &str, has: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split(['{', ' ']).next() == Some(name) && l.contains(has))
        .map(|l| l.rsplit(' ').next().unwrap().to_owned())
}

#[test]
fn dcgm_names_types_and_help_are_dcgm_exporters_own() {
    let published = default_counters();
    assert!(published.len() > 20, "read the published list");
    for f in dcgm::fields() {
        // The enabled line when the list has the name twice (PCIe: a commented-out counter too).
        let (_, kind, help, _) = published
            .iter()
            .filter(|p| p.0 == f.name)
            .max_by_key(|p| p.3)
            .unwrap_or_else(|| panic!("{} is not in dcgm-exporter's list", f.name));
        assert_eq!((f.kind, f.help), (kind.as_str(), help.as_str()), "{}", f.name);
    }
    for (m, d) in dcgm::table_series() {
        let (_, kind, help, _) = published
            .iter()
            .filter(|p| p.0 == d.name)
            .max_by_key(|p| p.3)
            .unwrap_or_else(|| panic!("{} ({}) is not in dcgm-exporter's list", d.name, m.key));
        assert_eq!((d.kind.as_str(), d.help), (kind.as_str(), help.as_str()), "{}", d.name);
    }
    for (f, d) in dcgm::gpm_series() {
        let (_, kind, help, enabled) = published
            .iter()
            .filter(|p| p.0 == d.name)
            .max_by_key(|p| p.3)
            .unwrap_or_else(|| panic!("{} ({}) is not in dcgm-exporter's list", d.name, f.smi));
        assert_eq!(("gauge", d.help, d.default), (kind.as_str(), help.as_str(), *enabled), "{}", d.name);
    }
    // What dcgm-exporter enables and gpulse does not serve yet; a new field shrinks this list.
    let mut served: Vec<&str> = dcgm::fields().map(|f| f.name).collect();
    served.extend(dcgm::gpm_series().map(|(_, d)| d.name));
    let table: Vec<&str> = dcgm::table_series().map(|(_, d)| d.name).collect();
    assert!(table.iter().all(|n| !served.contains(n)), "a series is written once: {table:?}");
    served.extend(table);
    // Every row of the model's metric tables that names a series is served, once.
    for m in gpulse_model::metrics() {
        if let Some(d) = m.dcgm {
            assert_eq!(served.iter().filter(|n| **n == d.name).count(), 1, "{} ({})", d.name, m.key);
        }
    }
    let missing: Vec<&str> =
        published.iter().filter(|p| p.3 && !served.contains(&p.0.as_str())).map(|p| p.0.as_str()).collect();
    assert_eq!(
        missing,
        [
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
            // A label, not a series: every series carries it.
            "DCGM_FI_DRIVER_VERSION",
        ]
    );
}

#[test]
fn values_in_dcgm_units_with_its_labels_in_its_order() {
    let text = expose(vec![full_gpu(0)]);
    let labels = r#"{gpu="0",UUID="GPU-0",pci_bus_id="00000000:19:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="node-a",DCGM_FI_DRIVER_VERSION="580.159.04"}"#;
    assert!(text.contains(&format!("DCGM_FI_DEV_SM_CLOCK{labels} 1980\n")), "{text}");
    let v = |name| value(&text, name, "gpu=\"0\"").unwrap_or_else(|| panic!("{name} missing"));
    assert_eq!(v("DCGM_FI_DEV_POWER_USAGE"), "512.340000");
    assert_eq!(v("DCGM_FI_DEV_FB_USED"), "41088");
    assert_eq!(v("DCGM_FI_DEV_FB_RESERVED"), "512");
    assert_eq!(v("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), "123456789");
    assert_eq!(v("DCGM_FI_PROF_SM_ACTIVE"), "0.625000");
    assert_eq!(v("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), "0.300000");
    assert_eq!(v("DCGM_FI_PROF_PCIE_RX_BYTES"), "2500000000.000000");
    assert_eq!((v("DCGM_FI_DEV_ENC_UTIL"), v("DCGM_FI_DEV_ROW_REMAP_FAILURE")), ("3".into(), "0".into()));
    assert_eq!(value(&text, "DCGM_FI_DEV_DEC_UTIL", ""), None, "not supported: left out");
    assert_eq!(value(&text, "gpulse_gpu_clocks_event_active", "sw_power_cap").as_deref(), Some("1"));
    assert_eq!(value(&text, "gpulse_gpu_clocks_event_active", "hw_slowdown").as_deref(), Some("0"));
    assert_eq!(value(&text, "gpulse_host_cpu_busy_ratio", "").as_deref(), Some("0.250000"));
    assert_eq!(value(&text, "gpulse_host_swap_used_bytes", "").as_deref(), Some("1048576"));
    assert_eq!(value(&text, "gpulse_host_swap_total_bytes", "").as_deref(), Some("4194304"));
    assert_eq!(value(&text, "gpulse_host_memory_used_bytes", ""), None, "not read: left out");
    // HELP and TYPE once per family, before its samples.
    assert_eq!(text.matches("# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n").count(), 1);
    assert!(text.find("# HELP DCGM_FI_DEV_SM_CLOCK").unwrap() < text.find("DCGM_FI_DEV_SM_CLOCK{").unwrap());
}

#[test]
fn what_nvml_did_not_give_is_left_out_not_zero() {
    let bare = GpuSample { gpu_index: 1, util_gpu_pct: Some(0), ..Default::default() };
    let text = expose(vec![full_gpu(0), bare]);
    assert_eq!(value(&text, "DCGM_FI_DEV_GPU_UTIL", "gpu=\"1\"").as_deref(), Some("0"), "a real 0 is kept");
    for name in ["DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED"] {
        assert_eq!(value(&text, name, "gpu=\"1\""), None, "{name} invented for GPU 1");
        assert!(value(&text, name, "gpu=\"0\"").is_some(), "{name} lost for GPU 0");
    }
    // A family with no sample at all has no HELP either.
    let text = expose(vec![GpuSample { gpu_index: 0, ..Default::default() }]);
    assert!(!text.contains("DCGM_FI_DEV_SM_CLOCK"), "{text}");
}

#[test]
fn every_table_metric_is_its_dcgm_series_and_an_absence_is_none() {
    let mut g = full_gpu(0);
    let mut bare = GpuSample { gpu_index: 1, ..Default::default() };
    for (i, (m, _)) in dcgm::table_series().enumerate() {
        g.table.set(m.key, Ok(1000 + i as i64));
        bare.table.set(m.key, Err(gpulse_model::Absence::NotSupported));
    }
    let text = expose(vec![g, bare]);
    for (i, (_, d)) in dcgm::table_series().enumerate() {
        assert_eq!(value(&text, d.name, "gpu=\"0\""), Some((1000 + i).to_string()), "{}", d.name);
        assert_eq!(value(&text, d.name, "gpu=\"1\""), None, "{} invented", d.name);
        assert_eq!(text.matches(&format!("# TYPE {} {}\n", d.name, d.kind.as_str())).count(), 1);
    }
}

#[test]
fn processes_are_bounded_with_the_rest_summed() {
    let mut g = full_gpu(0);
    g.processes = (0..11u32)
        .map(|i| ProcessSample {
            pid: 100 + i,
            used_memory_bytes: Some(u64::from(i + 1) * MIB),
            name: Some("/usr/bin/python3".into()),
            ..Default::default()
        })
        .collect();
    let text = expose(vec![g]);
    let held: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("gpulse_process_gpu_memory_bytes{") && !l.contains(r#"pid="other""#))
        .collect();
    assert_eq!(held.len(), PROCESSES_PER_GPU);
    assert!(held.iter().all(|l| l.contains(r#"command="python3""#)), "{held:?}");
    assert!(held[0].contains(r#"pid="110""#), "the largest first: {}", held[0]);
    // The three smallest: 1 + 2 + 3 MiB.
    assert_eq!(value(&text, "gpulse_process_gpu_memory_other_bytes", "gpu=\"0\"").unwrap(), (6 * MIB).to_string());
    // The same rest in the per-process family, so that sums over it count every process.
    assert_eq!(value(&text, "gpulse_process_gpu_memory_bytes", r#"pid="other""#).unwrap(), (6 * MIB).to_string());
}

fn pod(ns: &str, name: &str, uid: &str) -> gpulse_model::Workload {
    gpulse_model::Workload::Pod(gpulse_model::Pod {
        uid: Some(uid.into()),
        namespace: Some(ns.into()),
        name: Some(name.into()),
        container: Some("main".into()),
        container_id: None,
    })
}

/// Two pods time-slice GPU 0 with twelve processes between them: every process counts, the
/// eight largest on their own and the rest summed by pod, so each pod's share is whole.
#[test]
fn a_shared_gpus_shares_add_up_by_pod() {
    let mut g = full_gpu(0);
    g.processes = (0..12u32)
        .map(|i| ProcessSample {
            pid: 100 + i,
            used_memory_bytes: Some(u64::from(i + 1) * MIB),
            sm_util_pct: Some(i + 1),
            workload: Some(if i % 2 == 0 { pod("a", "p-a", "u-a") } else { pod("b", "p-b", "u-b") }),
            ..Default::default()
        })
        .collect();
    let text = expose(vec![g]);
    let sum = |family: &str, pod: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(&format!("pod=\"{pod}\"")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    // Pod a holds the even i: 1+3+5+7+9+11 = 36; pod b the odd: 2+4+...+12 = 42.
    assert!((sum("gpulse_process_sm_ratio", "p-a") - 0.36).abs() < 1e-9, "{text}");
    assert!((sum("gpulse_process_sm_ratio", "p-b") - 0.42).abs() < 1e-9, "{text}");
    assert_eq!(sum("gpulse_process_gpu_memory_bytes", "p-a"), (36 * MIB) as f64);
    assert_eq!(sum("gpulse_process_gpu_memory_bytes", "p-b"), (42 * MIB) as f64);
    assert!(text.contains(r#"pid="other",pod="p-a",namespace="a",uid="u-a""#), "grouped by pod, not container: {text}");
}

/// A GPU the kubelet assigned to one container carries dcgm-exporter's pod labels on its DCGM
/// series; a Slurm job's, `hpc_job`; values from processes and files are escaped.
#[test]
fn an_assigned_gpu_carries_its_pod_or_job_and_values_are_escaped() {
    let mut a = full_gpu(0);
    a.assigned = Some(pod("ns\"x", "train\n0", "u"));
    let mut b = full_gpu(1);
    b.assigned = Some(gpulse_model::Workload::Slurm(gpulse_model::SlurmJob { job_id: 4711, ..Default::default() }));
    let text = expose(vec![a, b]);
    let temp: Vec<&str> = text.lines().filter(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{")).collect();
    assert!(temp[0].ends_with(r#",pod="train\n0",namespace="ns\"x",container="main"} 61"#), "{}", temp[0]);
    assert!(!temp[0].contains("uid="), "dcgm-exporter's labels only: {}", temp[0]);
    assert!(temp[1].ends_with(r#",hpc_job="4711"} 61"#), "{}", temp[1]);
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(label("modelName", "a\"b\\c\nd"), r#"modelName="a\"b\\c\nd""#);
}

/// The live window's ledger in `/metrics`: 40 s of a loop that waits 60 ms of each 100 ms step
/// for its batch, read back as the seconds the marks hold.
#[test]
fn the_live_ledger_is_exported_by_account() {
    use gpulse_model::{Marker, MarkerKind};
    let mut live = RollingDiagnosis::new(&[device(0)], true);
    let t0 = 1_000_000_000i64;
    let mut last = Poll::default();
    for s in 0..=40 {
        let t = t0 + s * 1_000_000;
        let mut marks = Vec::new();
        for k in 0..10 {
            let begin = t - 1_000_000 + k * 100_000;
            marks.push(Marker::one(begin, 7, MarkerKind::DataWait, None, Some(60_000)));
            marks.push(Marker::one(begin + 100_000, 7, MarkerKind::Step, None, None));
        }
        if s > 0 {
            live.push_markers(&marks);
        }
        let gpus = vec![GpuSample { gpu_index: 0, util_gpu_pct: Some(40), ..full_gpu(0) }];
        last = Poll {
            snapshot: Some(Snapshot { timestamp_us: t, gpus }),
            host: HostSample { timestamp_us: t, ..Default::default() },
            ..Default::default()
        };
        live.push_poll(last.clone());
        live.update();
    }
    let ledger = live.ledger().expect("a diagnosis ran").clone();
    let text = render(&Exposition {
        devices: &[device(0)],
        poll: &last,
        hostname: "n",
        host_label: "Hostname",
        rolling: Some(&live),
    });
    let waited: f64 = value(&text, "gpulse_job_time_seconds", "account=\"data_wait\"").unwrap().parse().unwrap();
    // The marks inside the window: 0.06 s of each 0.1 s step from the first sample on.
    assert!((waited - ledger.seconds(gpulse_diagnose::AccountKind::DataWait)).abs() < 1e-9, "{text}");
    assert!((waited / ledger.wall_s - 0.6).abs() < 0.03, "{waited} s of {} s", ledger.wall_s);
    let total: f64 = text
        .lines()
        .filter(|l| l.starts_with("gpulse_job_time_seconds{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!((total - ledger.wall_s).abs() < 0.01, "the accounts sum to the window: {total} of {}", ledger.wall_s);
}

/// The main thread's seconds per state since the start, a counter per job and state: 3 s of
/// samples every 10 ms, the first 2 s asleep, the last 1 s in Python. The process is rank 3 of a
/// distributed job: its series say so beside its PID.
#[test]
fn the_main_threads_states_are_counters() {
    use gpulse_model::{Gil, KernelState, ProcessRole, PyFrame, Rank, SampledProcess, StackBatch, ThreadSample};
    let mut live = RollingDiagnosis::new(&[device(0)], false);
    let frame = PyFrame { file: "/w/train.py".into(), line: 9, function: "main".into(), code: Some("f()".into()) };
    let sample = |i: i64| {
        let asleep = i < 200;
        ThreadSample {
            clock: None,
            t_us: 1_000_000_000 + i * 10_000,
            pid: 7,
            stack: 0,
            kernel: KernelState {
                state: if asleep { 'S' } else { 'R' },
                syscall: asleep.then_some(230),
                wchan: asleep.then(|| "hrtimer_nanosleep".into()),
                across: false,
            },
            gil: if asleep { Gil::Free } else { Gil::Held },
        }
    };
    live.push_stacks(StackBatch {
        frames: vec![(0, frame)],
        stacks: vec![(0, vec![0])],
        samples: (0..=300).map(sample).collect(),
        processes: vec![SampledProcess {
            gil_read: None,
            pid: 7,
            role: ProcessRole::Main,
            python: "3.12".into(),
            command: "python train.py".into(),
            rank: Some(Rank { rank: 3, world_size: 4, local_rank: Some(3), device: Some(3) }),
        }],
        ..StackBatch::default()
    });
    let text = render(&Exposition {
        devices: &[device(0)],
        poll: &Poll::default(),
        hostname: "n",
        host_label: "Hostname",
        rolling: Some(&live),
    });
    assert!(text.contains("# TYPE gpulse_job_main_thread_seconds_total counter"), "{text}");
    let secs = |state: &str| -> f64 {
        value(&text, "gpulse_job_main_thread_seconds_total", &format!("state=\"{state}\"")).unwrap().parse().unwrap()
    };
    assert!((secs("sleep") - 2.0).abs() < 1e-6, "{text}");
    assert!((secs("python") - 1.0).abs() < 1e-6, "{text}");
    assert!(text.contains("gpulse_job_main_thread_seconds_total{pid=\"7\",rank=\"3\",state=\"sleep\"}"), "{text}");
}
