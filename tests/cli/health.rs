//! GPU health through the stand-in: an Xid raised at a scenario time and delivered through
//! NVML's event API, NVLink links and their errors, a row remap waiting for a reset. Served
//! (dcgm-exporter's series, a real Prometheus alerting on the Xid), shown by `status`, recorded
//! and diagnosed.

use std::time::{Duration, Instant};

use super::serve::{
    free_port, get, have_prometheus, prometheus, prometheus_query, promtool_dcgm_naming_only, scrape_config,
    serve_scenario,
};
use super::support::{fixture, fresh_dir, gpulse, run};

const SCENARIO: &str = "scenarios/health_xid_nvlink.json";

/// The value of the series `name` on GPU `gpu`, if written.
fn value(text: &str, name: &str, gpu: u32) -> Option<String> {
    let has = format!("gpu=\"{gpu}\"");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split(['{', ' ']).next() == Some(name) && l.contains(&has))
        .map(|l| l.rsplit(' ').next().unwrap().to_owned())
}

#[test]
fn serve_exports_the_xid_nvlink_and_what_nvml_cannot_give_not_at_all() {
    let s = serve_scenario(SCENARIO, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let metrics = loop {
        let (_, _, m) = get(&s.addr, "/metrics", &[]);
        if value(&m, "DCGM_FI_DEV_XID_ERRORS", 0).as_deref() == Some("79") {
            break m;
        }
        assert!(Instant::now() < deadline, "the Xid never reached /metrics: {m}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(metrics.contains("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"), "{metrics}");
    assert!(metrics.contains("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"));
    assert_eq!(value(&metrics, "DCGM_FI_DEV_XID_ERRORS", 1).as_deref(), Some("0"), "watched, none raised");
    // The stand-in's data counters grow by 1,000,000 + 1,048,000 KiB a second: DCGM's rate is
    // their sum over 1,000 (its "MB/s"), 2048, not the counters themselves.
    let nvlink: f64 = value(&metrics, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 0).unwrap().parse().unwrap();
    assert!((nvlink / 2048.0 - 1.0).abs() < 0.1, "{nvlink}");
    assert_eq!(value(&metrics, "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 0).as_deref(), Some("1"));
    assert_eq!(value(&metrics, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 0).as_deref(), Some("7"));
    // The scenario names no retired pages (an H200 remaps rows instead): no series, never 0.
    assert!(!metrics.contains("DCGM_FI_DEV_RETIRED_SBE"), "{metrics}");
    assert_eq!(value(&metrics, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 1), None, "GPU 1 names no counter");
    promtool_dcgm_naming_only(&metrics, "promtool check metrics on the Xid and NVLink series");
}

/// A real Prometheus evaluates `DCGM_FI_DEV_XID_ERRORS > 0` (docs/cluster/alerts.yml's
/// `GpuXidError`) on gpulse serving the stand-in that raises Xid 79 on GPU 0.
#[test]
fn prometheus_alerts_on_the_xid_the_stand_in_raised() {
    if !have_prometheus("Prometheus alerting on an Xid") {
        return;
    }
    let s = serve_scenario(SCENARIO, &[]);
    let dir = fresh_dir("health", "prometheus");
    let port = free_port();
    scrape_config(&dir, &s.addr, true);
    let _prom = prometheus(&dir, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let firing = loop {
        let alerts = std::panic::catch_unwind(|| {
            prometheus_query(port, "ALERTS{alertname=\"GpuXidError\",alertstate=\"firing\"}")
        })
        .unwrap_or_default();
        if !alerts.is_empty() {
            break alerts;
        }
        assert!(Instant::now() < deadline, "GpuXidError never fired");
        std::thread::sleep(Duration::from_millis(300));
    };
    let gpus: Vec<&str> = firing.iter().map(|a| a.0["gpu"].as_str()).collect();
    assert_eq!(gpus, ["0"], "the GPU that raised it, and only it");
    let value = prometheus_query(port, "DCGM_FI_DEV_XID_ERRORS > 0");
    assert_eq!(value.iter().map(|v| v.1).collect::<Vec<_>>(), [79.0]);
}

#[test]
fn status_shows_the_links_and_the_pending_remap() {
    let (code, out, err) = run(gpulse(Some(SCENARIO)).arg("status"));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  NVLink   2 of 3 links up v4 26.6 GB/s each"), "{out}");
    assert!(out.contains("errors crc 4 replay 7 recovery 0"), "{out}");
    assert!(out.contains("  Health   row remap pending: reset the GPU"), "{out}");
}

/// Recorded and diagnosed: the Xid leads, with whose fault it is; the remap asks for a reset; the
/// two GPUs' PCIe traffic beside idle NVLinks is NCCL off its links.
#[test]
fn a_recording_names_the_xid_first_the_reset_and_the_unused_links() {
    let dir = fresh_dir("health", "record");
    let db = dir.join("health.db");
    let (code, _, err) =
        run(gpulse(Some(SCENARIO)).args(["record", "--interval", "500ms", "--duration", "12s", "-o"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let ids: Vec<&str> = findings.iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(ids[0], "xid", "{ids:?}");
    let xid = &findings[0];
    assert_eq!(
        (&xid["evidence"]["xid"], &xid["evidence"]["gpu"]),
        (&serde_json::json!(79), &serde_json::json!(0)),
        "{xid}"
    );
    assert_eq!(xid["evidence"]["fault"], "hardware");
    assert!(xid["title"].as_str().unwrap().contains("fallen off the bus"), "{xid}");
    assert!(ids.contains(&"gpu_reset_pending") && ids.contains(&"nvlink_unused"), "{ids:?}");
    let html = dir.join("health.html");
    let (code, _, err) = run(gpulse(None).arg("report").arg(&db).arg("-o").arg(&html));
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("NVLink and PCIe traffic, GiB/s (2 NVLink links up)"), "the report draws NVLink");
    assert!(page.contains("Xid 79 on GPU 0"), "the Xid's event and finding");
}

/// A real Xid from the H200: a kernel that wrote through a null pointer under `gpulse run`. The
/// driver's `dmesg` said `NVRM: Xid (PCI:0000:00:06): 31, pid=537, name=fault, … MMU Fault`; the
/// recording leads with it, as the job's fault, with the PID the kernel named.
#[test]
fn a_real_xid_31_leads_as_the_jobs_own_fault() {
    let db = fixture("h200-health/xid31_run.db");
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let first = &doc["findings"][0];
    assert_eq!(first["id"], "xid", "{doc}");
    assert_eq!(
        (&first["evidence"]["xid"], &first["evidence"]["fault"]),
        (&serde_json::json!(31), &serde_json::json!("job"))
    );
    assert_eq!(first["evidence"]["pids"], serde_json::json!([537]), "the PID of the kernel's line");
    assert!(first["evidence"]["text"].as_str().unwrap().contains("MMU Fault"), "{first}");
}

/// A real job in a cgroup shaped as kubelet's systemd driver makes it, recorded on the H200: the
/// recording gives its GPU process the pod's UID and the container's id from the path.
#[test]
fn a_real_recording_names_the_pod_of_its_gpu_process() {
    let rec = gpulse_record::read(&fixture("h200-health/kubepods_record.db")).unwrap();
    let procs: Vec<_> = rec.snapshots.iter().flat_map(|s| &s.gpus).flat_map(|g| &g.processes).collect();
    assert!(!procs.is_empty(), "the job held the GPU");
    for p in procs.iter().filter(|p| p.pid == 492) {
        match &p.workload {
            Some(gpulse_model::Workload::Pod(pod)) => {
                assert_eq!(pod.uid.as_deref(), Some("6b8f1c2e-4a3d-4e5f-9a0b-1c2d3e4f5a6b"));
                assert_eq!(pod.container_id.as_deref().map(str::len), Some(64));
            }
            other => panic!("PID 492's workload: {other:?}"),
        }
    }
    assert!(procs.iter().any(|p| p.pid == 492));
}
