//! `gpulse record`: every GPU, the host and a process tree, into a crash-safe recording.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use gpulse_model::{DeviceStatus, Snapshot};
use gpulse_record::{Event, RunMeta, Writer};
use gpulse_sample::host::{HostSampler, TreeSampler, classify};
use gpulse_sample::{NvmlOptions, SampleError, Source};

use crate::cli::{GlobalArgs, RecordArgs};
use crate::cmd::open_nvml;
use crate::signals;

/// How often the recorder reads NVML's costly calls (energy, the utilization buffer).
const COSTLY_EVERY: Duration = Duration::from_secs(5);

pub fn run(global: &GlobalArgs, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(!args.output.exists(), "{} already exists; record to a new file", args.output.display());
    anyhow::ensure!(args.interval >= Duration::from_millis(10), "--interval must be at least 10ms");
    let mut tree = match args.pid {
        Some(pid) => {
            let mut t = TreeSampler::new(pid);
            anyhow::ensure!(t.sample().is_some(), "no process {pid}");
            Some(t)
        }
        None => None,
    };
    let options = NvmlOptions { process_util: true, costly_every: Some(COSTLY_EVERY), ..NvmlOptions::default() };
    let mut source = match open_nvml(global, options, false) {
        Ok(s) => Some(s),
        Err(e) if matches!(e.downcast_ref::<SampleError>(), Some(SampleError::NoDriver { .. })) => {
            eprintln!("gpulse: {e}; recording the host only");
            None
        }
        Err(e) => return Err(e),
    };
    let devices = source.as_ref().map(|s| s.devices().to_vec()).unwrap_or_default();
    let meta = RunMeta {
        host: std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_owned()),
        gpulse_version: env!("CARGO_PKG_VERSION").to_owned(),
        command: args.pid.and_then(gpulse_sample::proc_info::cmdline),
        started_at_us: gpulse_sample::now_us(),
        source: if source.is_some() { "nvml".into() } else { "host only".into() },
        interval_ms: Some(args.interval.as_millis() as u64),
        extra: args.pid.map(|p| ("root_pid".to_owned(), p.to_string())).into_iter().collect(),
    };
    let mut writer = Writer::create(&args.output, &meta, &devices)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    signals::catch_stop_signals();
    let mut host = HostSampler::new();
    host.sample();
    let start = Instant::now();
    let mut polls: u64 = 0;
    let mut lost: HashSet<u32> = HashSet::new();
    let reason = loop {
        if let Some(sig) = signals::received() {
            break format!("signal {sig}");
        }
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break "duration reached".to_owned();
        }
        let tree_sample = match tree.as_mut() {
            Some(t) => match t.sample() {
                Some(s) => Some(s),
                None => break format!("process {} exited", t.root()),
            },
            None => None,
        };
        if let Some(src) = source.as_mut() {
            let mut snap = src.sample()?;
            if let Some(t) = &tree_sample {
                classify_processes(&mut snap, &t.processes.iter().map(|p| p.pid).collect());
            }
            for g in &snap.gpus {
                if g.status == DeviceStatus::Lost && lost.insert(g.gpu_index) {
                    writer.event(&Event {
                        t_ms: snap.timestamp_us / 1000,
                        kind: "gpu_lost".into(),
                        payload: serde_json::json!({ "gpu": g.gpu_index }),
                    })?;
                }
            }
            writer.snapshot(&snap)?;
        }
        writer.host(&host.sample())?;
        if let Some(t) = &tree_sample {
            writer.tree(t)?;
        }
        polls += 1;
        signals::sleep_until(start + args.interval.saturating_mul(polls as u32));
    };
    writer.event(&Event {
        t_ms: gpulse_sample::now_us() / 1000,
        kind: "stop".into(),
        payload: serde_json::json!({ "reason": reason }),
    })?;
    writer.finish()?;
    eprintln!(
        "recorded {polls} samples of {} GPU{} over {:.1} s to {} ({reason})",
        devices.len(),
        if devices.len() == 1 { "" } else { "s" },
        start.elapsed().as_secs_f64(),
        args.output.display()
    );
    drop(source);
    Ok(ExitCode::SUCCESS)
}

/// Marks each GPU process as part of the tree, foreign, or gone from `/proc`.
fn classify_processes(snap: &mut Snapshot, tree: &HashSet<u32>) {
    for g in &mut snap.gpus {
        for p in &mut g.processes {
            p.class = Some(classify(p.pid, tree));
        }
    }
}
