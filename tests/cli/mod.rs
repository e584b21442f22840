mod diagnose;
mod fake_nvml;
mod hardware;
mod python_clients;
mod query;
mod record;
mod status;
mod support;
