//! One poll as JSON, for the live API and the dashboard: each GPU's readings, its processes (with
//! what each main thread does, where it is sampled), the host, the watched tree, the loop's pace and the findings that hold now. Absent values are
//! `null`, never 0.

use gpulse_diagnose::RollingDiagnosis;
use gpulse_model::{DeviceInfo, Poll};
use serde_json::{Value, json};

pub fn render(devices: &[DeviceInfo], poll: &Poll, live: Option<&RollingDiagnosis>) -> Value {
    let gpus: Vec<Value> = poll
        .snapshot
        .iter()
        .flat_map(|s| &s.gpus)
        .map(|g| {
            let d = devices.iter().find(|d| d.index == g.gpu_index);
            let gpm = g.gpm.as_deref();
            json!({
                "index": g.gpu_index,
                "name": d.map(|d| d.name.as_str()),
                "uuid": d.map(|d| d.uuid.as_str()),
                "cuda_index": d.and_then(|d| d.cuda_index),
                "status": format!("{:?}", g.status).to_lowercase(),
                "util_gpu_pct": g.util_gpu_pct,
                "sm_active_pct": g.sm_active_pct(),
                "tensor_active_pct": gpm.and_then(|m| m.any_tensor_util_pct),
                "dram_active_pct": gpm.and_then(|m| m.dram_bw_util_pct),
                "memory_used_bytes": g.memory_used_bytes,
                "memory_total_bytes": g.memory_total_bytes,
                "power_w": g.power_draw_w(),
                "power_limit_w": g.power_cap_w(),
                "temperature_c": g.temperature_gpu_c,
                "clock_sm_mhz": g.clock_sm_mhz,
                "clocks_event_reasons": g.clocks_event_reasons.map(|b| gpulse_model::clocks::ClocksEventReasons(b).names()),
                "memory_trend_gib_per_min": live.and_then(|l| l.memory_trend_gib_per_min(g.gpu_index)),
                "processes": g.processes.iter().map(|p| json!({
                    "pid": p.pid,
                    "name": p.name,
                    "user": p.user,
                    "used_memory_bytes": p.used_memory_bytes,
                    "sm_util_pct": p.sm_util_pct,
                    "class": p.class,
                    "main_thread": live.and_then(|l| main_thread(l, p.pid)),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let h = &poll.host;
    let steps = live
        .and_then(RollingDiagnosis::recent_steps)
        .map(|s| json!({ "pid": s.pid, "steps_per_s": s.per_s(), "data_wait_share": s.data_wait_share() }));
    json!({
        "timestamp_us": h.timestamp_us,
        "gpus": gpus,
        "host": {
            "cpu_busy_pct": h.cpu_busy_pct,
            "cpu_iowait_pct": h.cpu_iowait_pct,
            "memory_used_bytes": h.memory_used_bytes,
            "memory_total_bytes": h.memory_total_bytes,
            "swap_used_bytes": h.swap_used_bytes,
            "swap_total_bytes": h.swap_total_bytes,
        },
        "tree": poll.tree.as_ref().map(|t| json!({
            "root_pid": t.root_pid,
            "processes": t.processes.len(),
            "cpu_pct": t.cpu_pct,
            "rss_bytes": t.rss_bytes,
        })),
        "steps": steps,
        "findings": live.map(|l| l.current().to_vec()).unwrap_or_default(),
    })
}

/// A process's main thread as last sampled: its state, its site and when.
fn main_thread(live: &RollingDiagnosis, pid: u32) -> Option<Value> {
    let (t_us, state, site) = live.main_thread().now.get(&pid)?;
    Some(json!({ "state": state.as_str(), "site": site, "at_us": t_us }))
}
