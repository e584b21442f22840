//! gpulse's own series, named by Prometheus's conventions: a `gpulse_` prefix, base units,
//! ratios as 0–1. What dcgm-exporter cannot know: why clocks are held, who holds each GPU, the
//! host and the watched tree, the loop's pace and the findings.

use gpulse_model::{GpuSample, ProcessSample, clocks::REASONS};

use std::collections::BTreeMap;

use gpulse_model::Workload;

use super::{Exposition, Family, PROCESSES_PER_GPU, Value, label, workload_labels};

pub(super) fn render(e: &Exposition, out: &mut String) {
    Family::new(out, "gpulse_build_info", "gauge", "The gpulse version serving these metrics.")
        .sample(&label("version", env!("CARGO_PKG_VERSION")), Value::Int(1));
    if let Some(snap) = &e.poll.snapshot {
        gpus(&snap.gpus, out);
        processes(&snap.gpus, out);
    }
    host(e, out);
    job(e, out);
}

fn gpu_label(g: &GpuSample) -> String {
    label("gpu", &g.gpu_index.to_string())
}

fn gpus(gpus: &[GpuSample], out: &mut String) {
    let mut up = Family::new(
        out,
        "gpulse_gpu_up",
        "gauge",
        "Whether the GPU answers the driver: 0 once it has fallen off the bus.",
    );
    for g in gpus {
        up.sample(&gpu_label(g), Value::Int(u64::from(g.status != gpulse_model::DeviceStatus::Lost)));
    }
    let mut total = Family::new(out, "gpulse_gpu_memory_total_bytes", "gauge", "Framebuffer memory of the GPU.");
    for g in gpus {
        if let Some(t) = g.memory_total_bytes {
            total.sample(&gpu_label(g), Value::Int(t));
        }
    }
    let mut limit = Family::new(out, "gpulse_gpu_power_limit_watts", "gauge", "The power limit the driver enforces.");
    for g in gpus {
        if let Some(w) = g.power_cap_w() {
            limit.sample(&gpu_label(g), Value::Float(w));
        }
    }
    let mut reasons = Family::new(
        out,
        "gpulse_gpu_clocks_event_active",
        "gauge",
        "Whether a clocks-event reason (nvidia-smi's clocks_event_reasons) holds the clocks now: 1 or 0.",
    );
    for g in gpus {
        let Some(bits) = g.clocks_event_reasons else { continue };
        for (bit, name, _) in REASONS {
            let labels = format!("{},{}", gpu_label(g), label("reason", name));
            reasons.sample(&labels, Value::Int(u64::from(bits & bit != 0)));
        }
    }
}

fn process_labels(g: &GpuSample, p: &ProcessSample) -> String {
    let mut l = vec![gpu_label(g), label("pid", &p.pid.to_string())];
    if let Some(n) = &p.name {
        let command = n.rsplit('/').next().unwrap_or(n);
        l.push(label("command", command));
    }
    if let Some(c) = p.class {
        l.push(label("class", &format!("{c:?}").to_lowercase()));
    }
    if let Some(w) = &p.workload {
        l.extend(workload_labels(w, true));
    }
    l.join(",")
}

/// The processes past the largest holders of a GPU, summed by pod (or job): `pid="other"`
/// series in the same families, so that a `sum by (namespace, pod)` counts every process.
/// Each value is `(memory bytes, SM share in percent)`, `None` when no process of the group
/// gave it.
fn remainder(g: &GpuSample) -> BTreeMap<String, (Option<u64>, Option<u32>)> {
    let mut groups: BTreeMap<String, (Option<u64>, Option<u32>)> = BTreeMap::new();
    for p in ranked(g).into_iter().skip(PROCESSES_PER_GPU) {
        let mut l = vec![gpu_label(g), label("pid", "other")];
        if let Some(w) = p.workload.as_ref().map(Workload::group) {
            l.extend(workload_labels(&w, true));
        }
        let sum = groups.entry(l.join(",")).or_default();
        if let Some(b) = p.used_memory_bytes {
            sum.0 = Some(sum.0.unwrap_or(0) + b);
        }
        if let Some(s) = p.sm_util_pct {
            sum.1 = Some(sum.1.unwrap_or(0) + s);
        }
    }
    groups
}

fn ranked(g: &GpuSample) -> Vec<&ProcessSample> {
    let mut p: Vec<&ProcessSample> = g.processes.iter().collect();
    p.sort_by_key(|p| (std::cmp::Reverse(p.used_memory_bytes.unwrap_or(0)), p.pid));
    p
}

/// The largest holders of each GPU by memory, and the rest as one `other` series.
fn processes(gpus: &[GpuSample], out: &mut String) {
    let mut mem = Family::new(
        out,
        "gpulse_process_gpu_memory_bytes",
        "gauge",
        "GPU memory a process holds (the largest holders).",
    );
    for g in gpus {
        for p in ranked(g).into_iter().take(PROCESSES_PER_GPU) {
            if let Some(b) = p.used_memory_bytes {
                mem.sample(&process_labels(g, p), Value::Int(b));
            }
        }
        for (l, (b, _)) in remainder(g) {
            if let Some(b) = b {
                mem.sample(&l, Value::Int(b));
            }
        }
    }
    let mut other = Family::new(
        out,
        "gpulse_process_gpu_memory_other_bytes",
        "gauge",
        "GPU memory held by the processes past the largest holders.",
    );
    for g in gpus {
        let rest = ranked(g).into_iter().skip(PROCESSES_PER_GPU).filter_map(|p| p.used_memory_bytes).sum::<u64>();
        if g.processes.len() > PROCESSES_PER_GPU {
            other.sample(&gpu_label(g), Value::Int(rest));
        }
    }
    let mut sm =
        Family::new(out, "gpulse_process_sm_ratio", "gauge", "Share of SM time a process used over the last interval.");
    for g in gpus {
        for p in ranked(g).into_iter().take(PROCESSES_PER_GPU) {
            if let Some(s) = p.sm_util_pct {
                sm.sample(&process_labels(g, p), Value::Float(f64::from(s) / 100.0));
            }
        }
        for (l, (_, s)) in remainder(g) {
            if let Some(s) = s {
                sm.sample(&l, Value::Float(f64::from(s) / 100.0));
            }
        }
    }
}

fn host(e: &Exposition, out: &mut String) {
    let h = &e.poll.host;
    let pct = |v: Option<f32>| v.map(|v| Value::Float(f64::from(v) / 100.0));
    for (name, help, v) in [
        ("gpulse_host_cpu_busy_ratio", "Busy share of all the host's CPUs.", pct(h.cpu_busy_pct)),
        ("gpulse_host_cpu_iowait_ratio", "Share of the host's CPU time spent waiting for I/O.", pct(h.cpu_iowait_pct)),
        (
            "gpulse_host_memory_used_bytes",
            "Host memory in use (total less available).",
            h.memory_used_bytes.map(Value::Int),
        ),
        ("gpulse_host_memory_total_bytes", "Host memory.", h.memory_total_bytes.map(Value::Int)),
        ("gpulse_host_swap_used_bytes", "Host swap in use.", h.swap_used_bytes.map(Value::Int)),
        ("gpulse_host_swap_total_bytes", "Host swap.", h.swap_total_bytes.map(Value::Int)),
    ] {
        if let Some(v) = v {
            Family::new(out, name, "gauge", help).sample("", v);
        }
    }
    let Some(t) = &e.poll.tree else { return };
    let root = label("root_pid", &t.root_pid.to_string());
    Family::new(out, "gpulse_tree_processes", "gauge", "Processes in the watched tree.")
        .sample(&root, Value::Int(t.processes.len() as u64));
    if let Some(c) = t.cpu_pct {
        Family::new(out, "gpulse_tree_cpu_cores", "gauge", "CPU the watched tree uses, in cores.")
            .sample(&root, Value::Float(f64::from(c) / 100.0));
    }
    if let Some(r) = t.rss_bytes {
        Family::new(out, "gpulse_tree_resident_memory_bytes", "gauge", "Resident memory of the watched tree.")
            .sample(&root, Value::Int(r));
    }
}

/// The loop's pace and the findings of the rolling diagnosis.
/// Seconds each main thread spent in each state: the job's (with each rank beside its PID), or
/// of a whole machine, each GPU process's with its pod or job. No sites in labels: the series
/// are processes × states.
fn main_threads(live: &gpulse_diagnose::RollingDiagnosis, gpus: &[gpulse_model::GpuSample], out: &mut String) {
    let totals = live.main_thread();
    if totals.seconds.is_empty() {
        return;
    }
    let mut main = if live.is_whole_machine() {
        Family::new(
            out,
            "gpulse_process_main_thread_seconds_total",
            "counter",
            "Seconds each GPU process's main thread spent in each state, sampled from outside.",
        )
    } else {
        Family::new(
            out,
            "gpulse_job_main_thread_seconds_total",
            "counter",
            "Seconds the job's main thread spent in each state since the run began, sampled from outside.",
        )
    };
    for ((pid, state), secs) in &totals.seconds {
        let mut l = vec![label("pid", &pid.to_string())];
        // A distributed job's rank beside its PID: as many series as the world has ranks.
        if let Some(r) = totals.ranks.get(pid) {
            l.push(label("rank", &r.to_string()));
        }
        l.push(label("state", state.as_str()));
        if live.is_whole_machine() {
            let w = gpus.iter().flat_map(|g| &g.processes).find(|p| p.pid == *pid).and_then(|p| p.workload.as_ref());
            l.extend(w.map(|w| workload_labels(w, true)).unwrap_or_default());
        }
        main.sample(&l.join(","), Value::Float(*secs));
    }
}

fn job(e: &Exposition, out: &mut String) {
    let Some(live) = e.rolling else { return };
    let gpus = e.poll.snapshot.as_ref().map(|s| s.gpus.as_slice()).unwrap_or_default();
    if let Some(s) = live.recent_steps() {
        let mut pid = label("pid", &s.pid.to_string());
        // The loop's process, as the GPUs list it: its pod or job.
        let w = gpus.iter().flat_map(|g| &g.processes).find(|p| p.pid == s.pid).and_then(|p| p.workload.as_ref());
        for l in w.map(|w| workload_labels(w, true)).unwrap_or_default() {
            pid = format!("{pid},{l}");
        }
        Family::new(out, "gpulse_job_steps_per_second", "gauge", "Training steps per second over the last 30 s.")
            .sample(&pid, Value::Float(s.per_s()));
        if let Some(w) = s.data_wait_share() {
            Family::new(out, "gpulse_job_data_wait_ratio", "gauge", "Share of the loop's time spent waiting for data.")
                .sample(&pid, Value::Float(w));
        }
    }
    if let Some(ledger) = live.ledger().filter(|l| !l.accounts.is_empty()) {
        let mut time = Family::new(
            out,
            "gpulse_job_time_seconds",
            "gauge",
            "Where the live diagnosis' window of wall time went: seconds in each account of its ledger.",
        );
        for a in &ledger.accounts {
            time.sample(
                &format!("{},{}", label("account", a.account.as_str()), label("name", &a.label)),
                Value::Float(a.seconds),
            );
        }
    }
    main_threads(live, gpus, out);
    efficiency(live.efficiency(), out);
    let mut findings =
        Family::new(out, "gpulse_finding", "gauge", "A finding of the live diagnosis that holds now (always 1).");
    for f in live.current() {
        let mut l = vec![label("id", f.id.as_str())];
        if let Some(g) = f.gpu {
            l.push(label("gpu", &g.to_string()));
        }
        l.push(label("severity", &format!("{:?}", f.severity).to_lowercase()));
        // The finding's GPU's container or job, where it has one.
        let assigned = f.gpu.and_then(|i| gpus.iter().find(|g| g.gpu_index == i)?.assigned.as_ref());
        if let Some(w) = assigned {
            l.extend(workload_labels(w, true));
        }
        findings.sample(&l.join(","), Value::Int(1));
    }
    let mut oom = Family::new(
        out,
        "gpulse_gpu_time_to_oom_seconds",
        "gauge",
        "Seconds until the GPU's memory runs out at its present growth.",
    );
    for f in live.current() {
        if let (Some(g), Some(s)) = (f.gpu, f.time_to_oom_s) {
            oom.sample(&label("gpu", &g.to_string()), Value::Float(s));
        }
    }
}

/// Each GPU's distance from its roof over the live window: a share of the datasheet peak (the
/// lower end where the precision is unknown), the DRAM bandwidth's share, the energy per step.
fn efficiency(all: &[gpulse_diagnose::Efficiency], out: &mut String) {
    let mut math = Family::new(
        out,
        "gpulse_job_math_utilization_ratio",
        "gauge",
        "Achieved math rate over the datasheet peak of the busiest pipe's precision (the lower end where GPM cannot tell TF32 from BF16).",
    );
    for e in all {
        if let (Some(m), Some([lo, _])) = (&e.math, e.math.as_ref().and_then(|m| m.utilization_ratio())) {
            let l = format!("{},{}", label("gpu", &e.gpu.to_string()), label("pipe", pipe_name(m.pipe)));
            math.sample(&l, Value::Float(lo));
        }
    }
    let mut dram = Family::new(
        out,
        "gpulse_job_dram_bandwidth_ratio",
        "gauge",
        "Achieved DRAM bandwidth over the device's peak bandwidth.",
    );
    for e in all {
        if let Some(r) = e.dram_ratio() {
            dram.sample(&label("gpu", &e.gpu.to_string()), Value::Float(r));
        }
    }
    let mut joules = Family::new(
        out,
        "gpulse_job_joules_per_step",
        "gauge",
        "GPU energy per training step, from the energy counter over the loop's steps.",
    );
    for e in all {
        if let Some(en) = &e.energy {
            joules.sample(&label("gpu", &e.gpu.to_string()), Value::Float(en.joules_per_step));
        }
    }
}

fn pipe_name(p: gpulse_diagnose::roofline::Pipe) -> &'static str {
    use gpulse_diagnose::roofline::Pipe::*;
    match p {
        Hmma => "hmma",
        AnyTensor => "tensor",
        Imma => "imma",
        Dfma => "dfma",
        Fp64 => "fp64",
        Fp32 => "fp32",
        Fp16 => "fp16",
    }
}
