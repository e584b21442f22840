//! A recording as the CSV nvidia-smi would have written: `gpulse export`. An imported log comes
//! back byte for byte: its fields, its format, and its headers where it had them.

use gpulse_model::{MetaKey, ProcessRow, RunData};
use gpulse_smi::{AppField, CsvFormat, GpuField, GpuRow, QueryError};

/// Fields written when neither the user nor an imported log says which.
const DEFAULT_FIELDS: &str = "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed";
/// Compute-app fields written when neither the user nor an imported log says which: all of them,
/// in the order nvidia-smi's help lists them.
const DEFAULT_APP_FIELDS: &str = "timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_gpu_memory";

/// One of nvidia-smi's CSV queries as an import keeps it: the meta keys its format, fields and
/// header rows are stored under, the fields written by default, and how its field names read.
struct Kept<F> {
    format: MetaKey,
    fields: MetaKey,
    header_rows: MetaKey,
    default: &'static str,
    parse: fn(&str) -> Result<Vec<F>, QueryError>,
    field: fn(&str) -> Option<F>,
}

const GPU: Kept<GpuField> = Kept {
    format: MetaKey::NvidiaSmiFormat,
    fields: MetaKey::NvidiaSmiFields,
    header_rows: MetaKey::NvidiaSmiHeaderRows,
    default: DEFAULT_FIELDS,
    parse: gpulse_smi::parse_gpu_fields,
    field: gpulse_smi::fields::gpu_field,
};

const APPS: Kept<AppField> = Kept {
    format: MetaKey::NvidiaSmiAppFormat,
    fields: MetaKey::NvidiaSmiAppFields,
    header_rows: MetaKey::NvidiaSmiAppHeaderRows,
    default: DEFAULT_APP_FIELDS,
    parse: gpulse_smi::parse_app_fields,
    field: gpulse_smi::fields::app_field,
};

/// What to write, chosen the same way for either query.
struct Chosen<F> {
    /// The one asked for, else the imported log's own, else plain csv.
    format: CsvFormat,
    /// Those asked for (each must be a field), else the imported log's own, else the default.
    /// An imported log may hold fields gpulse does not read; those cannot be written back, so
    /// they are left out rather than refused.
    fields: Vec<F>,
    /// Where headers go: where the imported log had them when its own fields are written, else
    /// on top.
    header_rows: Vec<usize>,
}

impl<F> Kept<F> {
    /// What to write of `rec`, given what was asked.
    fn choose(
        &self,
        rec: &RunData,
        format_asked: Option<&str>,
        fields_asked: Option<&str>,
    ) -> Result<Chosen<F>, QueryError> {
        let format = CsvFormat::parse(format_asked.or(rec.meta_value(self.format)).unwrap_or("csv"))?;
        let fields = match fields_asked {
            Some(list) => (self.parse)(list)?,
            None => rec.meta_value(self.fields).unwrap_or(self.default).split(',').filter_map(self.field).collect(),
        };
        let stored: Option<Vec<usize>> =
            rec.meta_value(self.header_rows).map(|v| v.split(',').filter_map(|r| r.parse().ok()).collect());
        let header_rows = match stored {
            Some(rows) if fields_asked.is_none() && !rows.is_empty() => rows,
            _ => vec![0],
        };
        Ok(Chosen { format, fields, header_rows })
    }
}

/// `rows` as lines, with `header` before the rows it stood before (and once on top of none).
fn csv(header: &str, at: &[usize], format: CsvFormat, rows: impl Iterator<Item = String>) -> String {
    let mut text = String::new();
    let mut at = at.iter().peekable();
    let mut put_headers = |text: &mut String, before: Option<usize>| {
        while format.header && at.next_if(|&&r| before.is_none_or(|n| r <= n)).is_some() {
            *text += header;
            text.push('\n');
        }
    };
    for (n, row) in rows.enumerate() {
        put_headers(&mut text, Some(n));
        text += &row;
        text.push('\n');
    }
    put_headers(&mut text, None);
    text
}

/// A recording's GPU samples as nvidia-smi's `--query-gpu` CSV: the `format` and `fields` asked
/// for, else an imported log's own (with its headers where it had them), else a rich set.
pub fn gpu_csv(rec: &RunData, format_asked: Option<&str>, fields_asked: Option<&str>) -> Result<String, QueryError> {
    let Chosen { format, fields, header_rows: at } = GPU.choose(rec, format_asked, fields_asked)?;
    let count = rec.devices.len();
    let fields = &fields;
    let rows = rec.snapshots.iter().flat_map(|snap| {
        snap.gpus.iter().filter_map(move |g| {
            let info = rec.devices.iter().find(|d| d.index == g.gpu_index)?;
            let row = GpuRow { info, sample: g, timestamp_us: snap.timestamp_us, device_count: count };
            Some(gpulse_smi::gpu_row(fields, &row, format))
        })
    });
    Ok(csv(&gpulse_smi::gpu_header(fields), &at, format, rows))
}

/// Process rows as nvidia-smi's `--query-compute-apps` CSV, chosen as [`gpu_csv`] chooses.
pub fn apps_csv(
    rec: &RunData,
    rows: &[ProcessRow],
    format_asked: Option<&str>,
    asked: Option<&str>,
) -> Result<String, QueryError> {
    let Chosen { format, fields, header_rows: at } = APPS.choose(rec, format_asked, asked)?;
    let unknown = gpulse_model::DeviceInfo::default();
    let lines = rows.iter().map(|r| {
        let info = rec.devices.iter().find(|d| d.index == r.gpu).unwrap_or(&unknown);
        gpulse_smi::app_row(&fields, info, &[], &r.process, r.timestamp_us, format)
    });
    Ok(csv(&gpulse_smi::app_header(&fields), &at, format, lines))
}
