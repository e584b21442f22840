//! The cells of a log line: header names, absences, numbers with or without units.

use gpulse_model::Absence;

use crate::fields::{AppKey, GpuKey, app_field, gpu_field};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Col {
    Gpu(GpuKey),
    App(AppKey),
    Ignored,
}

/// Splits a line the way nvidia-smi joins it (`", "`); a bare `,` also separates.
pub(super) fn split(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|c| c.strip_prefix(' ').unwrap_or(c))
}

/// The field name of a header cell, without ` [unit]`.
pub(super) fn header_name(cell: &str) -> &str {
    cell.split_once(" [").map_or(cell, |(n, _)| n).trim()
}

/// Whether a line is a header: every cell is a lowercase field name, and at least one is known.
pub(super) fn parse_header(line: &str) -> Option<Vec<(Col, String)>> {
    let mut cols = Vec::new();
    let mut known = 0;
    let apps =
        split(line).any(|c| matches!(header_name(c), "pid" | "used_gpu_memory" | "used_memory" | "process_name"));
    for cell in split(line) {
        let name = header_name(cell);
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_')
        {
            return None;
        }
        let col =
            if apps { app_field(name).map(|f| Col::App(f.key)) } else { gpu_field(name).map(|f| Col::Gpu(f.key)) };
        known += usize::from(col.is_some() && !name.bytes().all(|b| b.is_ascii_digit()));
        cols.push((col.unwrap_or(Col::Ignored), name.to_owned()));
    }
    (known > 0).then_some(cols)
}

/// A cell that holds no value, and why.
pub(super) fn absence(cell: &str) -> Option<Absence> {
    if !matches!(cell.as_bytes().first(), None | Some(b'[' | b'N')) {
        return None;
    }
    match cell {
        "[N/A]" | "N/A" | "" => Some(Absence::NotAvailable),
        "[Not Supported]" => Some(Absence::NotSupported),
        "[Insufficient Permissions]" => Some(Absence::NoPermission),
        "[GPU is lost]" => Some(Absence::GpuLost),
        "[Unknown Error]" | "[Unknown]" => Some(Absence::Unknown),
        _ => None,
    }
}

/// A cell without its unit: the text before the first space.
pub(super) fn strip_unit(cell: &str) -> &str {
    match cell.bytes().position(|b| b == b' ') {
        Some(i) => &cell[..i],
        None => cell,
    }
}

/// The number in a cell, with its unit (if any) removed.
pub(super) fn number(cell: &str) -> Option<f64> {
    strip_unit(cell).parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The number in a cell times `scale`, rounded, when it is within `0..=max`: a negative or
/// overflowing reading is unreadable, never clamped to 0 or to the largest value.
pub(super) fn scaled(cell: &str, scale: f64, max: f64) -> Option<f64> {
    number(cell).map(|v| (v * scale).round()).filter(|v| (0.0..=max).contains(v))
}

/// A whole number in a cell, with its unit (if any) removed.
pub(super) fn uint(cell: &str) -> Option<u32> {
    let digits = strip_unit(cell).as_bytes();
    if digits.is_empty() || digits.len() > 9 {
        return strip_unit(cell).parse().ok();
    }
    let mut v = 0u32;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    Some(v)
}

/// A decimal with at most three fraction digits, in thousandths (`98.44 W` → 98440), read without
/// going through floating point.
pub(super) fn milli(cell: &str) -> Option<u32> {
    let n = strip_unit(cell);
    let (whole, frac) = n.split_once('.').unwrap_or((n, ""));
    if frac.len() > 3 || whole.is_empty() || whole.len() > 6 {
        return None;
    }
    let mut v = uint(whole)?;
    for i in 0..3 {
        let d = frac.as_bytes().get(i).copied().unwrap_or(b'0');
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    Some(v)
}

/// Splits a data line into `cells` at commas, dropping the space nvidia-smi puts after each.
pub(super) fn split_into<'a>(line: &'a str, cells: &mut Vec<&'a str>) {
    let bytes = line.as_bytes();
    let mut start = 0;
    let mut cut = |i: usize| {
        cells.push(&line[start..i]);
        start = i + 1 + usize::from(bytes.get(i + 1) == Some(&b' '));
    };
    // Eight bytes at a time: a comma comes every dozen bytes, too often for a branch per byte
    // to be predicted, so each word's commas are found at once and visited by their bits.
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    for (w, word) in words.enumerate() {
        let mut commas = commas_in(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        while commas != 0 {
            cut(w * 8 + commas.trailing_zeros() as usize / 8);
            commas &= commas - 1;
        }
    }
    let tail_at = bytes.len() - tail.len();
    for (i, &b) in tail.iter().enumerate() {
        if b == b',' {
            cut(tail_at + i);
        }
    }
    cells.push(&line[start..]);
}

/// The top bit of each byte of `word` that is a comma, and no other bit: exact, with no carry
/// from one byte into the next.
fn commas_in(word: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let zeroed = word ^ 0x2c2c_2c2c_2c2c_2c2c;
    !(((zeroed & LOW7) + LOW7) | zeroed | LOW7)
}
