//! The model's metric table end to end, through the stand-in library: every row is sampled,
//! recorded, printed by `query` and exported under its dcgm name with the value the stand-in
//! gave; a GPU whose driver lacks a field has it absent everywhere, never 0.

use std::process::Command;
use std::time::{Duration, Instant};

use gpulse_model::{Absence, TABLE};

use super::serve::{get, serve_scenario};
use super::support::KillOnDrop;
use super::support::{Temp, cells, fresh_dir, gpulse, run, scenario_file};

/// The value the stand-in gives row `i` on GPU 0.
fn known(i: usize) -> i64 {
    1000 + 7 * i as i64
}

/// Two GPUs: GPU 0 answers every table field (by key), GPU 1 none of them.
fn scenario() -> Temp {
    let fields: Vec<String> = TABLE.iter().enumerate().map(|(i, m)| format!("\"{}\": {}", m.key, known(i))).collect();
    let gpu = |n: u32, fields: &str| {
        format!(
            r#"{{"name": "NVIDIA H200", "uuid": "GPU-{n}", "pci_bus_id": "00000000:0{n}:00.0",
              "base": {{"util_gpu_pct": 10, "memory_total_bytes": 150754820096, "memory_used_bytes": 0,
                "temperature_gpu_c": 40, "fields": {{{fields}}}}}}}"#
        )
    };
    let json = format!(r#"{{"devices": [{}, {}]}}"#, gpu(0, &fields.join(", ")), gpu(1, ""));
    scenario_file("table", &json)
}

#[test]
fn every_table_metric_reaches_query_with_its_absence_spelled_as_absent() {
    let names: Vec<&str> = TABLE.iter().map(|m| m.smi[0]).collect();
    let (code, out, err) = run(gpulse(Some(scenario().to_str().unwrap()))
        .arg("query")
        .arg(format!("--query-gpu=index,{}", names.join(",")))
        .arg("--format=csv,noheader,nounits"));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let expected: Vec<String> = (0..TABLE.len()).map(|i| known(i).to_string()).collect();
    assert_eq!(cells(lines[0])[1..], expected, "{out}");
    assert!(cells(lines[1])[1..].iter().all(|c| *c == "[Not Supported]"), "{out}");
}

#[test]
fn every_table_metric_is_recorded_and_read_back() {
    let dir = fresh_dir("table", "record");
    let db = dir.join("run.db");
    // The job ends on its own; the recording stops with it.
    let mut job = KillOnDrop::spawn(Command::new("sleep").arg("1"));
    let (code, _, err) = run(gpulse(Some(scenario().to_str().unwrap()))
        .args(["record", "--interval", "100ms", "--pid"])
        .arg(job.id().to_string())
        .arg("-o")
        .arg(&db));
    job.wait().unwrap();
    assert_eq!(code, 0, "{err}");
    let rec = gpulse_record::read(&db).unwrap();
    assert!(rec.snapshots.len() > 2, "{} polls", rec.snapshots.len());
    for s in &rec.snapshots {
        for (i, m) in TABLE.iter().enumerate() {
            assert_eq!(s.gpus[0].table.get(m.key), Some(Ok(known(i))), "{}", m.key);
            assert_eq!(s.gpus[1].table.get(m.key), Some(Err(Absence::NotSupported)), "{}", m.key);
        }
    }
}

#[test]
fn every_table_metric_with_a_dcgm_name_is_exported() {
    let sc = scenario();
    let s = serve_scenario(sc.to_str().unwrap(), &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&s.addr, "/ready", &[]).0 != 200 {
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, _, body) = get(&s.addr, "/metrics", &[]);
    assert_eq!(status, 200);
    for (i, m) in TABLE.iter().enumerate() {
        let Some(d) = m.dcgm else { continue };
        let samples: Vec<&str> = body.lines().filter(|l| l.starts_with(&format!("{}{{", d.name))).collect();
        assert_eq!(samples.len(), 1, "GPU 0 only: {samples:?}");
        assert!(samples[0].contains("gpu=\"0\"") && samples[0].ends_with(&format!(" {}", known(i))), "{samples:?}");
        assert!(body.contains(&format!("# TYPE {} {}\n", d.name, d.kind.as_str())), "{body}");
    }
}
