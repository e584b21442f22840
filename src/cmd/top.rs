//! `gpulse top`: the live terminal view. The view is `gpulse_top`; this opens its feed (NVML
//! through a collector, or a recording played back) and says why it cannot start, in one line.

use std::process::ExitCode;

use gpulse_live::Collector;
use gpulse_sample::{NvmlOptions, SampleError};
use gpulse_top::{Options, Origin, Replay};

use crate::cli::TopArgs;
use crate::cmd::{EXIT_NO_DRIVER, Exit, open_nvml};
use crate::ops::{NvmlAccess, recorder};

pub fn run(nvml_access: &NvmlAccess, args: &TopArgs) -> anyhow::Result<ExitCode> {
    let (feed, options) = match &args.replay {
        Some(path) => {
            let run = gpulse_input::load(path)?;
            anyhow::ensure!(!run.snapshots.is_empty(), "{} holds no GPU samples to replay", path.display());
            let options = Options {
                devices: run.devices.clone(),
                instrumented: run.instrumented(),
                no_signals: Some("the processes of a recording are not this machine's"),
                jobs_dirs: Vec::new(),
                // A job's recording watched one tree; a machine's may hold many jobs.
                follow_workloads: run.meta_value(gpulse_model::MetaKey::RootPid).is_none(),
            };
            let (whole, diagnosis) = crate::ops::analyze::diagnose_recording(&run);
            (Origin::Replay(Replay::new(&run, args.speed, &diagnosis, whole.steps.as_ref())), options)
        }
        None => {
            // The recorder's cadence: a view reads slow fields as rarely as a recording does.
            let nvml = NvmlOptions {
                process_util: true,
                cadence: gpulse_sample::Cadence::RECORDER,
                gpm_metrics: Some(gpulse_model::GPM_RECORDED.to_vec()),
                xid_events: true,
                ..NvmlOptions::default()
            };
            let source = match open_nvml(nvml_access, nvml, false) {
                Ok(s) => s,
                Err(e) if matches!(e.downcast_ref::<SampleError>(), Some(SampleError::NoDriver { .. })) => {
                    return Err(Exit {
                        code: EXIT_NO_DRIVER,
                        message: format!(
                            "{}; `gpulse top --replay FILE` plays a recording, `gpulse demo` a real H200 run",
                            crate::cmd::describe(&e)
                        ),
                        to_stdout: false,
                    }
                    .into());
                }
                Err(e) => return Err(e),
            };
            let poller = recorder::poller(Some(source), None);
            let options = Options {
                devices: poller.devices().to_vec(),
                instrumented: false,
                no_signals: args.readonly.then_some("--readonly"),
                jobs_dirs: gpulse_live::jobs::dirs(),
                follow_workloads: true,
            };
            (Origin::Live(Collector::spawn(poller, args.interval)), options)
        }
    };
    gpulse_top::check_terminal().map_err(|m| Exit { code: 1, message: m, to_stdout: false })?;
    gpulse_base::signal::catch_stop_signals();
    let stop = recorder::stop_on_signal;
    gpulse_top::run(feed, options, stop)?;
    Ok(ExitCode::SUCCESS)
}
