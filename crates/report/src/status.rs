//! The status block: one paragraph per GPU, in nvidia-smi's spirit, with what GPU-Util hides.

use std::fmt::Write as _;

use gpulse_model::{ClocksEventReasons, DeviceInfo, DeviceStatus, GpuSample, Snapshot};

fn opt<T: std::fmt::Display>(v: Option<T>, unit: &str) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{v}{unit}"))
}

fn pct1(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{v:.1}%"))
}

/// The whole status text for the devices at positions `chosen`; `gpm_off` when the user turned
/// GPM off (`--no-gpm`), so that its absence is not blamed on the GPU.
pub fn render(devices: &[DeviceInfo], chosen: &[usize], snap: &Snapshot, gpm_off: bool) -> String {
    let mut s = String::new();
    let first = devices.first();
    let n = devices.len();
    let _ = writeln!(
        s,
        "{} GPU{} · driver {} · CUDA {} · {}",
        n,
        if n == 1 { "" } else { "s" },
        opt(first.and_then(|d| d.driver_version.as_deref()), ""),
        opt(first.and_then(|d| d.cuda_version.as_deref()), ""),
        gpulse_base::clock::format_local(snap.timestamp_us)
    );
    for &i in chosen {
        gpu_block(&mut s, &devices[i], &snap.gpus[i], gpm_off);
    }
    s
}

fn gpu_block(s: &mut String, d: &DeviceInfo, g: &GpuSample, gpm_off: bool) {
    let cuda = d.cuda_index.map(|c| format!(" (cuda:{c})")).unwrap_or_default();
    let _ = writeln!(s, "\nGPU {}{}  {}  {}  {}", d.index, cuda, d.name, d.uuid, d.pci_bus_id.as_deref().unwrap_or(""));
    if g.status == DeviceStatus::Lost {
        let _ = writeln!(s, "  LOST: the GPU fell off the bus; NVML cannot read it until it is reset");
        return;
    }
    let gpm = g.gpm.as_ref();
    let gpm_line = match gpm {
        Some(m) => format!(
            "SM active {}  occupancy {}  tensor {}  DRAM {}",
            pct1(m.sm_util_pct),
            pct1(m.sm_occupancy_pct),
            pct1(m.any_tensor_util_pct),
            pct1(m.dram_bw_util_pct)
        ),
        None if gpm_off => "SM active — (GPM off: --no-gpm)".to_owned(),
        None if d.gpm_supported == Some(true) => "SM active — (GPM off)".to_owned(),
        None => "SM active — (no GPM on this GPU)".to_owned(),
    };
    let _ = writeln!(s, "  GPU-Util {:>4}   {}", opt(g.util_gpu_pct, "%"), gpm_line);
    let total = g.memory_total_bytes.or(d.memory_total_bytes);
    let used_pct = g
        .memory_used_bytes
        .zip(total)
        .filter(|(_, t)| *t > 0)
        .map(|(u, t)| format!(" ({:.0}%)", u as f64 * 100.0 / t as f64));
    let _ = writeln!(
        s,
        "  Memory   {} / {}{}   reserved {}",
        opt(g.memory_used_bytes.map(gpulse_smi::render_mib), ""),
        opt(total.map(gpulse_smi::render_mib), " MiB"),
        used_pct.unwrap_or_default(),
        opt(g.memory_reserved_bytes.map(gpulse_smi::render_mib), " MiB")
    );
    let reasons = g.clocks_event_reasons.map(ClocksEventReasons);
    let reason_text = match reasons {
        Some(r) if r.0 == 0 => "none".to_owned(),
        Some(r) => r.names().join(","),
        None => "—".to_owned(),
    };
    let throttled = if reasons.is_some_and(ClocksEventReasons::is_throttling) { "  THROTTLED" } else { "" };
    // Whole watts, cut (not rounded) as `status` always has.
    let watts = |w: Option<f64>, unit| opt(w.map(f64::trunc), unit);
    let hbm = g.temperature_memory_c.map(|c| format!(" (HBM {c}°C)")).unwrap_or_default();
    let _ = writeln!(
        s,
        "  Power    {} / {}   Temp {}{}   SM {} / {} MHz   {}   clocks events: {}{}",
        watts(g.power_draw_w(), ""),
        watts(g.power_limit_w().or(d.power_limit_w()), " W"),
        opt(g.temperature_gpu_c, "°C"),
        hbm,
        opt(g.clock_sm_mhz, ""),
        opt(d.clock_max_sm_mhz, ""),
        opt(g.pstate.map(|p| format!("P{p}")), ""),
        reason_text,
        throttled
    );
    let rate = |b: Option<f64>| b.map_or_else(|| "—".to_owned(), gpulse_model::rate_text);
    // The link as one word where it was read; a dash alone where it was not.
    let link = match (g.pcie_link_gen, g.pcie_link_width) {
        (None, None) => "link —".to_owned(),
        (generation, width) => format!("gen {} x{}", opt(generation, ""), opt(width, "")),
    };
    let _ = writeln!(
        s,
        "  PCIe     {link}   tx {}  rx {}   ECC uncorrected {}",
        rate(g.pcie_tx_bytes_per_s.map(|v| v as f64)),
        rate(g.pcie_rx_bytes_per_s.map(|v| v as f64)),
        opt(g.ecc_uncorrected_volatile, "")
    );
    nvlink_line(s, g);
    health_line(s, g);
    if g.processes.is_empty() {
        let _ = writeln!(s, "  No compute processes");
        return;
    }
    let _ = writeln!(s, "  {:>8}  {:<10} {:>10}  {:>4}  COMMAND", "PID", "USER", "GPU MEM", "SM%");
    for p in &g.processes {
        let cmd = one_line(p.cmdline.as_deref().or(p.name.as_deref()).unwrap_or("—"), 80);
        let _ = writeln!(
            s,
            "  {:>8}  {:<10} {:>10}  {:>4}  {}",
            p.pid,
            p.user.as_deref().unwrap_or("—"),
            opt(p.used_memory_bytes.map(gpulse_smi::render_mib), " MiB"),
            opt(p.sm_util_pct, ""),
            cmd
        );
    }
}

/// A command line on one line of at most `max` characters: a `python3 -c '…'` script's newlines
/// and tabs become spaces, so a table row stays one row.
pub fn one_line(cmd: &str, max: usize) -> String {
    let flat: String = cmd.split(|c: char| c.is_control()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max { flat.chars().take(max - 1).chain(['…']).collect() } else { flat }
}

/// The GPU's NVLink links, when it has any: how many are up, their version and speed, their
/// error counters summed (`nvidia-smi nvlink -s` and `-e` per link).
fn nvlink_line(s: &mut String, g: &GpuSample) {
    if g.nvlinks.is_empty() {
        return;
    }
    let up: Vec<&gpulse_model::NvLink> = g.nvlinks.iter().filter(|l| l.active).collect();
    let sum = |f: fn(&gpulse_model::NvLink) -> Option<u64>| {
        up.iter().map(|l| f(l)).sum::<Option<u64>>().map_or_else(|| "—".to_owned(), |v| v.to_string())
    };
    let version = up.iter().find_map(|l| l.version).map_or_else(String::new, |v| format!(" v{v}"));
    let speed =
        g.table.value("nvlink_speed_mbps").map_or_else(String::new, |v| format!(" {:.1} GB/s each", v as f64 / 1000.0));
    let rate = |b: Option<f64>| b.map_or_else(|| "—".to_owned(), gpulse_model::rate_text);
    let gpm = g.gpm.as_deref();
    let _ = writeln!(
        s,
        "  NVLink   {} of {} links up{version}{speed}   tx {}  rx {}   errors crc {} replay {} recovery {}",
        up.len(),
        g.nvlinks.len(),
        rate(gpm.and_then(|m| m.nvlink_tx_bytes_per_s)),
        rate(gpm.and_then(|m| m.nvlink_rx_bytes_per_s)),
        sum(|l| Some(l.crc_flit_errors? + l.crc_data_errors?)),
        sum(|l| l.replay_errors),
        sum(|l| l.recovery_errors),
    );
}

/// What needs attention: the last Xid, a repair waiting for a reset, retired pages. Nothing
/// when all is well, so a healthy GPU's block stays as it was.
fn health_line(s: &mut String, g: &GpuSample) {
    let mut parts = Vec::new();
    if let Some(x) = g.xid_last.filter(|x| *x > 0) {
        parts.push(format!("last Xid {x}"));
    }
    if g.table.value("remapped_rows_pending").is_some_and(|v| v > 0) {
        parts.push("row remap pending: reset the GPU".to_owned());
    }
    if g.table.value("retired_pages_pending").is_some_and(|v| v > 0) {
        parts.push("page retirement pending: reset the GPU".to_owned());
    }
    let retired = ["retired_pages_sbe", "retired_pages_dbe"].iter().filter_map(|k| g.table.value(k)).sum::<i64>();
    if retired > 0 {
        parts.push(format!("{retired} pages retired"));
    }
    if !parts.is_empty() {
        let _ = writeln!(s, "  Health   {}", parts.join("   "));
    }
}
