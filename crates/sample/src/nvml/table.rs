//! The metric table's rows, read in one `nvmlDeviceGetFieldValues` call per device: each row's
//! value, or the absence NVML answered for that field alone.

use gpulse_model::{Absence, Every, TABLE, TableReadings};
use nvml_wrapper::Device;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::structs::device::FieldId;

use super::absence::absence_of;

/// Reads the rows read `every` poll (with the settings rows too when `settings` is due) into
/// `out`. A failed call leaves every row asked for absent with its reason; a field NVML answers
/// with an error is absent alone. Returns whether the GPU was lost.
pub(super) fn read(d: &Device<'static>, settings: bool, out: &mut TableReadings) -> bool {
    let rows: Vec<_> = TABLE.iter().filter(|m| m.every == Every::Poll || settings).collect();
    if rows.is_empty() {
        return false;
    }
    let ids: Vec<FieldId> = rows.iter().filter_map(|m| m.nvml_field().map(FieldId)).collect();
    match super::profile::timed("field_values_for", || d.field_values_for(&ids)) {
        Ok(values) => {
            for (m, v) in rows.iter().zip(values.into_iter().map(Some).chain(std::iter::repeat_with(|| None))) {
                let got = match v {
                    Some(v) => v.and_then(|v| v.value).map_err(|e| absence_of(&e)).and_then(integer),
                    None => Err(Absence::NotAvailable),
                };
                out.set(m.key, got);
            }
            false
        }
        Err(e) => {
            let why = absence_of(&e);
            for m in rows {
                out.set(m.key, Err(why));
            }
            why == Absence::GpuLost
        }
    }
}

/// A field's value as gpulse keeps it: an integer, as NVML gave it.
fn integer(v: SampleValue) -> Result<i64, Absence> {
    match v {
        SampleValue::U32(x) => Ok(i64::from(x)),
        SampleValue::U64(x) => i64::try_from(x).map_err(|_| Absence::NotAvailable),
        SampleValue::I64(x) => Ok(x),
        SampleValue::F64(x) if x.is_finite() => Ok(x.round() as i64),
        SampleValue::F64(_) => Err(Absence::NotAvailable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_integers_and_none_is_invented() {
        assert_eq!(integer(SampleValue::U32(7)), Ok(7));
        assert_eq!(integer(SampleValue::U64(u64::MAX)), Err(Absence::NotAvailable));
        assert_eq!(integer(SampleValue::F64(2.6)), Ok(3));
        assert_eq!(integer(SampleValue::F64(f64::NAN)), Err(Absence::NotAvailable));
    }
}
