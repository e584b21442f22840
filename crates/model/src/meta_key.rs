//! The keys of a recording's `meta` table. A recording may hold keys this build does not know
//! (a newer one's); they are kept as read, so `RunData::meta` stays a map of strings.

gpulse_base::words! {
    /// One key of a recording's `meta` table, written as its snake_case name.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MetaKey {
        SchemaVersion => "schema_version",
        GpulseVersion => "gpulse_version",
        /// When the recording began, µs since the Unix epoch.
        StartedAtUs => "started_at_us",
        /// Where the samples came from (`nvml`, `nvidia-smi csv: FILE`).
        Source => "source",
        Host => "host",
        /// The job's command line.
        Command => "command",
        IntervalMs => "interval_ms",
        CudaVersion => "cuda_version",
        DriverVersion => "driver_version",
        /// The job's root process, when the recording watched one.
        RootPid => "root_pid",
        /// `true` where the loop ran under `--instrument`.
        Instrumented => "instrumented",
        /// The verb that recorded it: `gpulse run`, `gpulse attach`.
        Runner => "runner",
        /// An imported nvidia-smi log's fields, format and header rows, written back by `export`.
        NvidiaSmiFields => "nvidia_smi_fields",
        NvidiaSmiFormat => "nvidia_smi_format",
        NvidiaSmiHeaderRows => "nvidia_smi_header_rows",
        /// The same for an imported `--query-compute-apps` log.
        NvidiaSmiAppFields => "nvidia_smi_app_fields",
        NvidiaSmiAppFormat => "nvidia_smi_app_format",
        NvidiaSmiAppHeaderRows => "nvidia_smi_app_header_rows",
    }
    impl Display;
}

impl crate::RunData {
    /// The value stored under `key`.
    pub fn meta_value(&self, key: MetaKey) -> Option<&str> {
        self.meta.get(key.as_str()).map(String::as_str)
    }

    /// Whether the loop ran under `--instrument`.
    pub fn instrumented(&self) -> bool {
        self.meta_value(MetaKey::Instrumented) == Some("true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_back_as_itself() {
        assert_eq!(MetaKey::ALL.len(), 18);
        for k in MetaKey::ALL {
            assert_eq!(MetaKey::parse(k.as_str()), Some(k));
        }
        assert_eq!(MetaKey::parse("a_newer_key"), None);
    }
}
