mod fake_nvml;
mod python_clients;
mod query;
mod status;
mod support;
