//! `watch`'s lines: one per GPU per sample.

use gpulse_model::{DeviceStatus, GpuSample};

/// Column titles.
pub fn header() -> String {
    format!("{:<12} {:>3} {:>5} {:>6} {:>17} {:>5} {:>6}\n", "time", "gpu", "util", "sm", "memory MiB", "temp", "power")
}

/// One GPU's line.
pub fn line(timestamp_us: i64, g: &GpuSample) -> String {
    let time = gpulse_base::clock::format_local(timestamp_us);
    let time = time.split(' ').nth(1).unwrap_or(&time).to_owned();
    if g.status == DeviceStatus::Lost {
        return format!("{time:<12} {:>3} GPU lost\n", g.gpu_index);
    }
    let dash = || "—".to_owned();
    let util = g.util_gpu_pct.map_or_else(dash, |u| format!("{u}%"));
    let sm = g.sm_active_pct().map_or_else(dash, |v| format!("{v:.1}%"));
    let mem = match (g.memory_used_bytes, g.memory_total_bytes) {
        (Some(u), Some(t)) => format!("{}/{}", gpulse_smi::render_mib(u), gpulse_smi::render_mib(t)),
        (Some(u), None) => gpulse_smi::render_mib(u).to_string(),
        _ => dash(),
    };
    let temp = g.temperature_gpu_c.map_or_else(dash, |c| format!("{c}C"));
    // Whole watts, cut (not rounded) as `watch` always has.
    let power = g.power_draw_w().map_or_else(dash, |w| format!("{}W", w.trunc()));
    format!("{time:<12} {:>3} {util:>5} {sm:>6} {mem:>17} {temp:>5} {power:>6}\n", g.gpu_index)
}
