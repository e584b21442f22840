mod fake_nvml;
mod query;
mod status;
mod support;
mod python_clients;
