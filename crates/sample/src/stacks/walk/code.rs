//! What the walker keeps of a code object, read once: its file, its name as py-spy gives it
//! (`co_qualname`, else `co_name`), its first line and its line table; and the line of an
//! instruction in it, computed from that table as py-spy does.

use std::io;

use super::layout::{self, Layout};
use super::mem::{self, i32_at, u32_at, u64_at, usize_at};

/// A string longer than this is not read (py-spy's limit).
const MAX_STR: usize = 4096;
/// A line table larger than this is not read (py-spy's limit).
const MAX_TABLE: usize = 65536;

/// The fields of a code object's header that name it: read with each sample (one read for all
/// the code objects of a stack) and compared with the cached ones, so that a code object freed
/// and another allocated at its address is not taken for it. Pointers alone do not tell: a
/// function compiled again lands where its predecessor's code, name and table were freed, so the
/// strings' and table's bytes are compared too (`Code::raw`). 3.12+ adds `co_version`, a number
/// no two code objects of an interpreter share (its counter, given to each code object as it is
/// made, until it wraps to 0): where it is set, the header alone tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    ob_type: usize,
    filename: usize,
    name: usize,
    qualname: usize,
    linetable: usize,
    firstlineno: i32,
    version: u32,
}

impl Identity {
    pub(super) fn of(header: &[u8], l: &Layout) -> Identity {
        Identity {
            ob_type: usize_at(header, layout::OB_TYPE),
            filename: usize_at(header, l.co_filename),
            name: usize_at(header, l.co_name),
            qualname: usize_at(header, l.co_qualname),
            linetable: usize_at(header, l.co_linetable),
            firstlineno: i32_at(header, l.co_firstlineno),
            version: l.co_version.map_or(0, |o| u32_at(header, o)),
        }
    }
}

/// A code object, as cached.
#[derive(Debug)]
pub(super) struct Code {
    pub identity: Identity,
    pub filename: String,
    pub name: String,
    /// A shim (3.12+: no file, or `<shim>`): its frames are skipped, as py-spy does.
    pub shim: bool,
    table: Vec<u8>,
    /// The file's, the name's and the line table's objects as read (address, bytes): what
    /// makes the frames, compared at each sample.
    pub raw: Vec<(usize, Vec<u8>)>,
    /// Lines already interned: (line, the interner's frame id).
    pub frame_ids: Vec<(i32, u32)>,
}

impl Code {
    /// Reads the code object whose header is `header`: its strings and line table.
    pub(super) fn load(pid: u32, l: &Layout, header: &[u8]) -> io::Result<Code> {
        let identity = Identity::of(header, l);
        let mut raw = Vec::with_capacity(3);
        let filename = string(pid, l, identity.filename, &mut raw)?;
        let name = string(pid, l, identity.qualname, &mut raw).or_else(|_| string(pid, l, identity.name, &mut raw))?;
        let shim = filename.is_empty() || filename == "<shim>";
        let table = if shim { Vec::new() } else { bytes(pid, identity.linetable, &mut raw)? };
        Ok(Code { identity, filename, name, shim, table, raw, frame_ids: Vec::new() })
    }

    /// The cached objects each sample reads again to tell this code object from one made at its
    /// address since: none where it has a version (3.12+), which no later code object shares.
    pub(super) fn checked_raw(&self) -> impl Iterator<Item = &(usize, Vec<u8>)> {
        let versioned = self.identity.version != 0;
        self.raw.iter().filter(move |_| !versioned)
    }

    /// The line of the instruction at byte `lasti` from the code object's start (py-spy's
    /// `lasti`: the frame's instruction pointer less the code object's address).
    pub(super) fn line(&self, l: &Layout, lasti: i32) -> i32 {
        line_number(&self.table, self.identity.firstlineno, lasti.wrapping_sub(l.co_code_adaptive as i32))
    }
}

/// Whether `fresh`, read now where `cached` was read, holds the same object: the same bytes but
/// for the reference count (`ob_refcnt`, the first 8) and the hash (8 at 24, computed late).
pub(super) fn same(cached: &[u8], fresh: &[u8]) -> bool {
    cached.len() == fresh.len() && cached.len() >= 32 && cached[8..24] == fresh[8..24] && cached[32..] == fresh[32..]
}

/// A `str` of the target, as py-spy reads one; its object's bytes are added to `raw`.
fn string(pid: u32, l: &Layout, addr: usize, raw: &mut Vec<(usize, Vec<u8>)>) -> io::Result<String> {
    let mut head = [0u8; 80];
    let head = &mut head[..l.str_compact_size.max(l.str_data_any + 8)];
    mem::read(pid, addr, head)?;
    let size = u64_at(head, layout::STR_LENGTH) as usize;
    if size == 0 {
        raw.push((addr, head[..l.str_ascii_size].to_vec()));
        return Ok(String::new());
    }
    if size >= MAX_STR {
        return Err(invalid("a string too long"));
    }
    let state = u32_at(head, layout::STR_STATE);
    let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1 == 1, (state >> 6) & 1 == 1);
    let data = match (compact, ascii) {
        (false, _) => usize_at(head, l.str_data_any),
        (true, true) => addr + l.str_ascii_size,
        (true, false) => addr + l.str_compact_size,
    };
    let mut buf = vec![0u8; size * kind as usize];
    mem::read(pid, data, &mut buf)?;
    // A compact string's characters follow its header: both are compared; else the header.
    let mut bytes = head[..(if compact { data - addr } else { l.str_data_any + 8 })].to_vec();
    if compact {
        bytes.extend_from_slice(&buf);
    }
    raw.push((addr, bytes));
    match (kind, ascii) {
        (4, _) => buf
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).ok_or_else(|| invalid("UCS-4")))
            .collect(),
        (2, _) => {
            let units: Vec<u16> = buf.chunks_exact(2).map(|c| u16::from_ne_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).map_err(|_| invalid("UTF-16"))
        }
        (1, true) => String::from_utf8(buf).map_err(|_| invalid("ASCII")),
        (1, false) => Ok(buf.iter().map(|&b| b as char).collect()),
        _ => Err(invalid("a string of an unknown kind")),
    }
}

/// A `bytes` of the target; its object's bytes are added to `raw`.
fn bytes(pid: u32, addr: usize, raw: &mut Vec<(usize, Vec<u8>)>) -> io::Result<Vec<u8>> {
    let mut head = [0u8; layout::BYTES_DATA];
    mem::read(pid, addr, &mut head)?;
    let size = u64_at(&head, layout::BYTES_SIZE) as usize;
    if size >= MAX_TABLE {
        return Err(invalid("a line table too large"));
    }
    let mut buf = vec![0u8; size];
    if size > 0 {
        mem::read(pid, addr + layout::BYTES_DATA, &mut buf)?;
    }
    let mut bytes = head.to_vec();
    bytes.extend_from_slice(&buf);
    raw.push((addr, bytes));
    Ok(buf)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// The line at instruction byte `offset` (from `co_code_adaptive`) in a 3.11+ location table
/// (`Objects/locations.md`), exactly as py-spy 0.4.3 computes it: each entry covers
/// `(first byte & 7) + 1` code units, its code (`(first byte >> 3) & 15`) says how the line
/// moves; the line is the one of the first entry that ends past `offset`. A table read torn (a
/// code object freed under the read) is any bytes: its sums wrap, never panic, since a panic here
/// ends the sampling thread, and with it every process's samples.
pub(super) fn line_number(table: &[u8], first_line: i32, offset: i32) -> i32 {
    let mut line = first_line;
    let mut address: i32 = 0;
    let mut i = 0;
    while i < table.len() {
        let byte = table[i];
        i += 1;
        address = address.wrapping_add(((byte & 7) as i32 + 1) * 2);
        let delta = match (byte >> 3) & 15 {
            15 => 0,
            14 => {
                let d = signed_varint(&mut i, table).unwrap_or(0);
                varint(&mut i, table);
                varint(&mut i, table);
                varint(&mut i, table);
                d
            }
            13 => signed_varint(&mut i, table).unwrap_or(0),
            code @ 10..=12 => {
                i += 2;
                (code - 10) as isize
            }
            _ => {
                i += 1;
                0
            }
        };
        line = line.wrapping_add(delta as i32);
        if address > offset {
            break;
        }
    }
    line
}

fn varint(i: &mut usize, table: &[u8]) -> Option<usize> {
    let mut byte = *table.get(*i)?;
    *i += 1;
    let mut value = (byte & 63) as usize;
    let mut shift = 0u32;
    while byte & 64 != 0 {
        byte = *table.get(*i)?;
        *i += 1;
        shift += 6;
        // Past 64 bits the value is garbage anyway (a torn table): its bits fall off.
        value = value.wrapping_add(((byte & 63) as usize).checked_shl(shift).unwrap_or(0));
    }
    Some(value)
}

fn signed_varint(i: &mut usize, table: &[u8]) -> Option<isize> {
    let v = varint(i, table)?;
    Some(if v & 1 != 0 { -((v >> 1) as isize) } else { (v >> 1) as isize })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A code object made at a freed one's address, with its name and table where theirs were:
    /// on 3.12+ the version alone tells it, and the bytes are not read again; where the counter
    /// wrapped to 0 (and on 3.11, which has none) they are.
    #[test]
    fn a_version_tells_a_code_object_from_one_made_at_its_address() {
        let l = Layout::of(3, 12).expect("3.12");
        let at = l.co_version.expect("3.12 has co_version");
        let header = |version: u32| {
            let mut h = vec![0u8; l.co_len];
            h[at..at + 4].copy_from_slice(&version.to_ne_bytes());
            h
        };
        let (old, new) = (Identity::of(&header(7), &l), Identity::of(&header(8), &l));
        assert_ne!(old, new, "only the version differs");
        let code = |identity| Code {
            identity,
            filename: "train.py".into(),
            name: "step".into(),
            shim: false,
            table: Vec::new(),
            raw: vec![(0x1000, vec![1, 2, 3])],
            frame_ids: Vec::new(),
        };
        assert_eq!(code(old).checked_raw().count(), 0);
        assert_eq!(code(Identity::of(&header(0), &l)).checked_raw().count(), 1, "a wrapped counter");
        let l311 = Layout::of(3, 11).expect("3.11");
        assert_eq!(code(Identity::of(&vec![0u8; l311.co_len], &l311)).checked_raw().count(), 1, "3.11");
    }

    #[test]
    fn the_line_follows_the_location_table() {
        // Three entries of one code unit each: line +1 (code 11, two column bytes), no line
        // (15), then a long form (13) of line -1.
        let table = [0x80 | (11 << 3), 0, 0, 0x80 | (15 << 3), 0x80 | (13 << 3), 3];
        assert_eq!(line_number(&table, 10, 0), 11);
        assert_eq!(line_number(&table, 10, 2), 11, "no location: the line stays");
        assert_eq!(line_number(&table, 10, 4), 10, "-1 in the signed varint's form (3)");
        assert_eq!(line_number(&[], 7, 0), 7);
    }

    /// A torn read hands any bytes as a line table, and any instruction pointer: a line comes
    /// back, whatever it is, and nothing panics (a panic ended the sampling thread, and every
    /// process of the job went unsampled).
    #[test]
    fn a_torn_line_table_gives_a_line_and_never_panics() {
        // A long form (14) whose varints never end, then one of 13 that runs past 64 bits.
        let mut table = vec![14 << 3];
        table.extend([0x7f; 40]);
        table.push(13 << 3);
        table.extend([0x7f; 40]);
        table.push(0x3f);
        line_number(&table, i32::MAX, i32::MAX);
        line_number(&table, i32::MIN, i32::MIN);
        // Lines that sum past i32.
        let big: Vec<u8> = (0..64).flat_map(|_| [13 << 3, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x1f]).collect();
        line_number(&big, i32::MAX - 1, i32::MAX);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let table: Vec<u8> = (0..256)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            line_number(&table, seed as i32, (seed >> 32) as i32);
        }
    }
}
