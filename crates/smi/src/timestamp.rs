//! nvidia-smi's timestamp: local time as `YYYY/MM/DD HH:MM:SS.mmm`.

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

/// Parses nvidia-smi's `YYYY/MM/DD HH:MM:SS.mmm` (local time) into microseconds since the Unix
/// epoch. `cache` keeps the last hour's UTC offset, so a long log costs one `mktime` an hour.
pub fn parse_local(s: &str, cache: &mut Option<(i64, i64)>) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'/' || b[7] != b'/' || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Some(v)
    };
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let frac_us = match b.len() {
        19 => 0,
        n if b[19] == b'.' && n > 20 && n <= 26 => {
            let digits = num(20..n)?;
            digits * 10i64.pow(26 - n as u32)
        }
        _ => return None,
    };
    let hour_utc = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600;
    let offset = match cache {
        Some((hour, off)) if *hour == hour_utc => *off,
        _ => {
            let off = local_offset_s(y, mo, d, h)?;
            *cache = Some((hour_utc, off));
            off
        }
    };
    Some((hour_utc + mi * 60 + sec - offset) * 1_000_000 + frac_us)
}

/// Seconds the local zone is ahead of UTC at that local hour (`mktime`).
fn local_offset_s(y: i64, mo: i64, d: i64, h: i64) -> Option<i64> {
    // SAFETY: tm is plain data; all zeroes is a valid value, its fields set below.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = (y - 1900) as i32;
    tm.tm_mon = (mo - 1) as i32;
    tm.tm_mday = d as i32;
    tm.tm_hour = h as i32;
    tm.tm_isdst = -1;
    // SAFETY: `tm` is a valid, initialized struct owned by this frame.
    let t = unsafe { libc::mktime(&mut tm) };
    if t == -1 {
        return None;
    }
    Some(days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 - t as i64)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod parse_tests {
    use super::*;
    use crate::zoned::in_zone;

    #[test]
    fn parses_what_it_formats() {
        in_zone("UTC", "timestamp::parse_tests::parses_what_it_formats", parses_what_it_formats_in_utc);
    }

    /// A zone without tz data (POSIX `JST-9`, nine hours ahead of UTC): local time is read and
    /// written in that zone, not in UTC.
    #[test]
    fn reads_and_writes_the_local_zone() {
        in_zone("JST-9", "timestamp::parse_tests::reads_and_writes_the_local_zone", || {
            let mut cache = None;
            assert_eq!(parse_local("2026/11/29 23:43:16.706", &mut cache), Some(1_795_963_396_706_000));
            assert_eq!(format_local(1_795_963_396_706_000), "2026/11/29 23:43:16.706");
        });
    }

    fn parses_what_it_formats_in_utc() {
        let mut cache = None;
        assert_eq!(format_local(1_795_963_396_706_000), "2026/11/29 14:43:16.706");
        assert_eq!(parse_local("2026/11/29 14:43:16.706", &mut cache), Some(1_795_963_396_706_000));
        assert_eq!(parse_local("2000/02/29 00:00:00", &mut cache), Some(951_782_400_000_000));
        for t in [0i64, 951_782_400_123_000, 1_795_963_396_706_000] {
            assert_eq!(parse_local(&format_utc(t), &mut cache), Some(t));
        }
        for bad in [
            "",
            "2026/11/29",
            "2026-11-29 14:43:16.706",
            "2026/13/29 14:43:16.706",
            "2026/11/29 14:43:16.7x6",
            "2026/11/29 14:43:16.",
        ] {
            assert_eq!(parse_local(bad, &mut cache), None, "{bad}");
        }
    }
}
