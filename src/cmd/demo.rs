//! `gpulse demo`: replays a bundled real H200 recording through the same pipeline as live data.
//!
//! The recording is a ResNet-50 run starved by its DataLoader (`num_workers=0`), captured on an
//! H200 every 200 ms; a forgotten process holds 20 GiB the whole time.

use std::process::ExitCode;
use std::time::Duration;

use gpulse_model::{DeviceInfo, MIB, ProcessSample};
use gpulse_sample::Source;
use gpulse_sample::replay::{ReplayProcess, TraceReplay};

use crate::cli::DemoArgs;
use crate::output::Output;

/// The bundled trace (the trace format of `gpulse_model::trace`).
const TRACE: &str = include_str!("../../demo/h200-dl_bound.csv");

/// The device the trace was captured on.
fn device() -> DeviceInfo {
    DeviceInfo {
        index: 0,
        uuid: "GPU-dc089148-adda-1e6a-8c18-d58d61d51415".into(),
        name: "NVIDIA H200".into(),
        pci_bus_id: Some("00000000:00:06.0".into()),
        cuda_index: Some(0),
        memory_total_bytes: Some(143_771 * MIB),
        power_limit_mw: Some(700_000),
        clock_max_sm_mhz: Some(1980),
        clock_max_mem_mhz: Some(3201),
        gpm_supported: Some(true),
        driver_version: Some("580.159.04".into()),
        cuda_version: Some("13.0".into()),
        ..DeviceInfo::default()
    }
}

/// The processes nvidia-smi listed during the capture.
fn processes() -> Vec<ReplayProcess> {
    let proc = |pid, mib, from_s, until_s| ReplayProcess {
        gpu_index: 0,
        from_s,
        until_s,
        process: ProcessSample {
            pid,
            used_memory_bytes: Some(mib * MIB),
            name: Some("python3".into()),
            user: Some("root".into()),
            ..ProcessSample::default()
        },
    };
    vec![
        // A forgotten process that allocated 20 GiB and slept.
        proc(1250, 21_090, 0.0, f64::MAX),
        // The training process as nvidia-smi listed it every 2 s: its start from 14:43:24 UTC,
        // then its steady size to 14:44:08.
        proc(1280, 1_104, 1_795_963_404.7, 1_795_963_406.7),
        proc(1280, 6_496, 1_795_963_406.7, 1_795_963_408.7),
        proc(1280, 3_816, 1_795_963_408.7, 1_795_963_410.7),
        proc(1280, 7_418, 1_795_963_410.7, 1_795_963_448.8),
    ]
}

pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let mut out = Output::open(None)?;
    out.emit(
        "Replaying a real H200 recording: ResNet-50 training whose DataLoader runs with num_workers=0.\n\
         Watch GPU-Util and SM activity stay low while the CPU prepares each batch.\n\n",
    )?;
    let step_s = 1.0;
    let replay = TraceReplay::new(TRACE, vec![device()], processes(), step_s)?;
    let pace = Duration::from_secs_f64(step_s / args.speed);
    let mut out = crate::ops::lines::gpu_lines(replay, pace, None, out)?;
    // A status view of a moment in the middle of training.
    let mut replay = TraceReplay::new(TRACE, vec![device()], processes(), 30.0)?;
    replay.sample()?;
    let snap = replay.sample()?;
    out.emit("\nStatus 30 s into the run:\n")?;
    out.emit(&gpulse_report::status::render(replay.devices(), &[0], &snap, false))?;
    // The diagnosis of the whole recording, every 200 ms sample of it.
    let mut replay = TraceReplay::new(TRACE, vec![device()], processes(), 0.2)?;
    let mut recording = gpulse_record::Recording { devices: replay.devices().to_vec(), ..Default::default() };
    while let Some(s) = gpulse_sample::until_ended(replay.sample())? {
        recording.snapshots.push(s);
    }
    out.emit("\nDiagnosis (`gpulse diagnose`):\n")?;
    let (_, diagnosis) = crate::ops::analyze::diagnose_recording(&recording);
    let findings = gpulse_report::text::render_text(&diagnosis);
    out.emit(&gpulse_report::text::wrap(&findings, crate::output::text_width(libc::STDOUT_FILENO)))?;
    Ok(ExitCode::SUCCESS)
}
