//! nvidia-smi's timestamp read back: local time as `YYYY/MM/DD HH:MM:SS.mmm` (written by
//! `gpulse_base::clock`).

/// [`parse_local`] along a log: the hour's UTC offset and the last stamp read are kept, since
/// the rows of one poll (one per GPU) share a stamp.
#[derive(Debug, Default)]
pub struct LocalStamps {
    offset: Option<(i64, i64)>,
    last: String,
    last_us: i64,
}

impl LocalStamps {
    /// Microseconds since the Unix epoch of `s`, as [`parse_local`] reads it.
    pub fn parse(&mut self, s: &str) -> Option<i64> {
        if !self.last.is_empty() && self.last == s {
            return Some(self.last_us);
        }
        let us = parse_local(s, &mut self.offset)?;
        self.last.clear();
        self.last.push_str(s);
        self.last_us = us;
        Some(us)
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
    use gpulse_base::clock::{format_local, format_utc};

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
