//! The keys of a recording's `meta` table. A recording may hold keys this build does not know
//! (a newer one's); they are kept as read, so `RunData::meta` stays a map of strings.

/// One key of a recording's `meta` table, written as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaKey {
    SchemaVersion,
    GpulseVersion,
    /// When the recording began, µs since the Unix epoch.
    StartedAtUs,
    /// Where the samples came from (`nvml`, `nvidia-smi csv: FILE`).
    Source,
    Host,
    /// The job's command line.
    Command,
    IntervalMs,
    CudaVersion,
    DriverVersion,
    /// The job's root process, when the recording watched one.
    RootPid,
    /// `true` where the loop ran under `--instrument`.
    Instrumented,
    /// The verb that recorded it: `gpulse run`, `gpulse attach`.
    Runner,
    /// An imported nvidia-smi log's fields, format and header rows, written back by `export`.
    NvidiaSmiFields,
    NvidiaSmiFormat,
    NvidiaSmiHeaderRows,
    /// The same for an imported `--query-compute-apps` log.
    NvidiaSmiAppFields,
    NvidiaSmiAppFormat,
    NvidiaSmiAppHeaderRows,
}

impl MetaKey {
    /// Every key, in declaration order.
    pub const ALL: [MetaKey; 18] = [
        Self::SchemaVersion,
        Self::GpulseVersion,
        Self::StartedAtUs,
        Self::Source,
        Self::Host,
        Self::Command,
        Self::IntervalMs,
        Self::CudaVersion,
        Self::DriverVersion,
        Self::RootPid,
        Self::Instrumented,
        Self::Runner,
        Self::NvidiaSmiFields,
        Self::NvidiaSmiFormat,
        Self::NvidiaSmiHeaderRows,
        Self::NvidiaSmiAppFields,
        Self::NvidiaSmiAppFormat,
        Self::NvidiaSmiAppHeaderRows,
    ];

    /// Its name in the `meta` table.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SchemaVersion => "schema_version",
            Self::GpulseVersion => "gpulse_version",
            Self::StartedAtUs => "started_at_us",
            Self::Source => "source",
            Self::Host => "host",
            Self::Command => "command",
            Self::IntervalMs => "interval_ms",
            Self::CudaVersion => "cuda_version",
            Self::DriverVersion => "driver_version",
            Self::RootPid => "root_pid",
            Self::Instrumented => "instrumented",
            Self::Runner => "runner",
            Self::NvidiaSmiFields => "nvidia_smi_fields",
            Self::NvidiaSmiFormat => "nvidia_smi_format",
            Self::NvidiaSmiHeaderRows => "nvidia_smi_header_rows",
            Self::NvidiaSmiAppFields => "nvidia_smi_app_fields",
            Self::NvidiaSmiAppFormat => "nvidia_smi_app_format",
            Self::NvidiaSmiAppHeaderRows => "nvidia_smi_app_header_rows",
        }
    }

    /// The key a name stands for; `None` for one this build does not know.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for MetaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
        for k in MetaKey::ALL {
            assert_eq!(MetaKey::parse(k.as_str()), Some(k));
        }
        assert_eq!(MetaKey::parse("a_newer_key"), None);
    }
}
