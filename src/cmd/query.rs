//! `gpulse query`: nvidia-smi's `--query-gpu` / `--query-compute-apps` mode.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpulse_model::Probe;
use gpulse_model::{DeviceInfo, Metric, Snapshot};
use gpulse_sample::{NvmlOptions, Source};
use gpulse_smi::fields::{AppKey, GpuKey};
use gpulse_smi::{AppField, CsvFormat, GpuField, GpuRow, QueryError};

use crate::cli::{GlobalArgs, QueryArgs};
use crate::cmd::{Exit, open_nvml};
use crate::output::Output;

/// What the query prints.
enum Fields {
    Gpu(Vec<GpuField>),
    Apps(Vec<AppField>),
}

fn smi_error(e: QueryError) -> anyhow::Error {
    Exit { code: e.exit_code() as u8, message: e.to_string(), to_stdout: true }.into()
}

/// What nvidia-smi 580 prints (on stdout, exit 2) for `-l 0` or `-lms 0`, rather than looping
/// as fast as it can.
const ZERO_LOOP: &str = "Provided [-l(ms) | --loop(-ms)=] value is incorrect. Loop frequency must be greater than 0.\n";

pub fn run(global: &GlobalArgs, args: &QueryArgs) -> anyhow::Result<ExitCode> {
    if args.loop_s == Some(0) || args.loop_ms == Some(0) {
        return Err(Exit { code: 2, message: ZERO_LOOP.to_owned(), to_stdout: true }.into());
    }
    let fields = match (&args.query_gpu, &args.query_apps) {
        (Some(q), _) => Fields::Gpu(gpulse_smi::parse_gpu_fields(q).map_err(smi_error)?),
        (None, Some(q)) => Fields::Apps(gpulse_smi::parse_app_fields(q).map_err(smi_error)?),
        (None, None) => anyhow::bail!("nothing to query: give --query-gpu=FIELDS or --query-compute-apps=FIELDS"),
    };
    let format = CsvFormat::parse(&args.format).map_err(smi_error)?;
    let needs_gpm = matches!(&fields, Fields::Gpu(f) if f.iter().any(|f| matches!(f.key, GpuKey::Gpm(_))));
    // Read only what the fields show: a one-shot query then costs little more than NVML's start.
    let metrics = match &fields {
        Fields::Gpu(f) => f.iter().filter_map(|f| f.key.metric()).collect(),
        Fields::Apps(_) => vec![Metric::Processes],
    };
    let device_facts = matches!(&fields, Fields::Gpu(f) if f.iter().any(|f| f.key.is_device_fact()));
    let mut probes: Vec<Probe> = match &fields {
        Fields::Gpu(f) => f.iter().filter_map(|f| f.key.probe()).collect(),
        Fields::Apps(f) => f.iter().any(|f| f.key == AppKey::GpuSerial).then_some(Probe::Serial).into_iter().collect(),
    };
    // A field named twice is read once.
    let mut seen = Vec::with_capacity(probes.len());
    probes.retain(|p| {
        !seen.contains(p) && {
            seen.push(*p);
            true
        }
    });
    let options = NvmlOptions {
        gpm: needs_gpm,
        processes: true,
        metrics: Some(metrics),
        device_facts,
        probes,
        ..NvmlOptions::default()
    };
    let one_shot = args.loop_ms.is_none() && args.loop_s.is_none();
    let mut source = open_nvml(global, options, one_shot)?;
    let chosen = gpulse_smi::select::select(source.devices(), args.id.as_deref()).map_err(smi_error)?;
    if needs_gpm {
        // GPM metrics need two samples at least 100 ms apart.
        source.sample()?;
        std::thread::sleep(Duration::from_millis(110));
    }
    let interval = args.loop_ms.map(Duration::from_millis).or(args.loop_s.map(Duration::from_secs));
    let mut out = Output::open(args.file.as_deref())?;
    let header = match &fields {
        Fields::Gpu(f) => gpulse_smi::gpu_header(f),
        Fields::Apps(f) => gpulse_smi::app_header(f),
    };
    if format.header {
        out.emit(&format!("{header}\n"))?;
    }
    let start = Instant::now();
    for k in 1u32.. {
        let snapshot = source.sample()?;
        out.emit(&render(&fields, source.devices(), &chosen, &snapshot, format))?;
        let Some(every) = interval else {
            // A one-shot query exits now: skipping nvmlShutdown saves ~3 ms, and the driver
            // releases everything when the process ends.
            std::mem::forget(source);
            break;
        };
        // Keep a fixed cadence, as nvidia-smi does, rather than drifting by the poll time.
        let next = every.saturating_mul(k);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every row of one poll, each ending in a newline.
fn render(fields: &Fields, devices: &[DeviceInfo], chosen: &[usize], snap: &Snapshot, format: CsvFormat) -> String {
    let mut text = String::new();
    for &i in chosen {
        let (info, sample) = (&devices[i], &snap.gpus[i]);
        match fields {
            Fields::Gpu(f) => {
                let row = GpuRow { info, sample, timestamp_us: snap.timestamp_us, device_count: devices.len() };
                text += &gpulse_smi::gpu_row(f, &row, format);
                text.push('\n');
            }
            Fields::Apps(f) => {
                for p in &sample.processes {
                    text += &gpulse_smi::app_row(f, info, &sample.probes, p, snap.timestamp_us, format);
                    text.push('\n');
                }
            }
        }
    }
    text
}
