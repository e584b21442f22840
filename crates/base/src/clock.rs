//! The clock, and a timestamp written as nvidia-smi writes `timestamp`: local time as
//! `YYYY/MM/DD HH:MM:SS.mmm`.

/// Microseconds since the Unix epoch, now.
pub fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Formats microseconds since the Unix epoch the way nvidia-smi prints `timestamp`.
pub fn format_local(timestamp_us: i64) -> String {
    let secs = timestamp_us.div_euclid(1_000_000);
    let ms = timestamp_us.rem_euclid(1_000_000) / 1000;
    let t = secs as libc::time_t;
    // SAFETY: tm is plain data; all zeroes is a valid value that localtime_r overwrites.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers refer to live locals; localtime_r is thread-safe.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if !ok {
        return format_utc(timestamp_us);
    }
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}.{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        ms
    )
}

/// The same format in UTC, independent of the machine's time zone.
pub fn format_utc(timestamp_us: i64) -> String {
    let secs = timestamp_us.div_euclid(1_000_000);
    let ms = timestamp_us.rem_euclid(1_000_000) / 1000;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}.{ms:03}", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_nvidia_smi() {
        // 2026/11/29 14:43:16.706 UTC, the first row of the reference rich_dl_bound.csv.
        assert_eq!(format_utc(1_795_963_396_706_000), "2026/11/29 14:43:16.706");
        assert_eq!(format_utc(0), "1970/01/01 00:00:00.000");
        assert_eq!(format_utc(951_782_400_000_999), "2000/02/29 00:00:00.000");
    }
}
