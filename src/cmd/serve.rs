//! `gpulse serve`: samples every GPU and the host, diagnoses as it goes, and serves it all.

use std::process::ExitCode;

use crate::cli::ServeArgs;
use crate::ops::NvmlAccess;
use crate::ops::serve::{ServeOptions, serve};
use crate::ops::serving::TokenFrom;

pub fn run(nvml: &NvmlAccess, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let token = match (&args.token_file, args.no_auth) {
        (_, true) => TokenFrom::Nothing,
        (Some(path), false) => TokenFrom::File(path.clone()),
        (None, false) => TokenFrom::EnvOrNew,
    };
    let options = ServeOptions {
        listen: args.listen,
        interval: args.interval,
        duration: args.duration,
        token,
        metrics_auth: args.metrics_auth,
        record: args.record.clone(),
        web_config: args.web_config.clone(),
        host_label: if args.lowercase_hostname { "hostname" } else { "Hostname" },
        allow_hosts: args.allow_host.clone(),
        stacks_hz: (!args.no_stacks).then_some(args.stacks_hz),
    };
    serve(nvml, &options)
}
