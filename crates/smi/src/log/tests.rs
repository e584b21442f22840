//! The log parser against hand-made logs, and properties on any input.

use gpulse_model::{Absence, MIB, Metric};

use super::cells::parse_header;
use super::*;

/// Runs `body` in a copy of the test binary started with `TZ=UTC` (see [`crate::zoned`]).
fn utc(test: &str, body: impl FnOnce()) {
    crate::zoned::in_zone("UTC", &format!("log::tests::{test}"), body);
}

#[test]
fn reads_units_absences_and_repeated_headers() {
    utc("reads_units_absences_and_repeated_headers", reads_units_absences_and_repeated_headers_in_utc);
}

fn reads_units_absences_and_repeated_headers_in_utc() {
    let log = "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], fan.speed [%], pstate, clocks_event_reasons.active\r\n\
        2026/11/29 14:43:16.706, 0, 9 %, 21099 MiB, 98.44 W, [N/A], P0, 0x0000000000000004\r\n\
        timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], fan.speed [%], pstate, clocks_event_reasons.active\r\n\
        2026/11/29 14:43:17.706, 0, [Not Supported], 21100 MiB, 99.00 W, 30 %, P2, 0x0000000000000000\r\n\
        2026/11/29 14:43:18.7";
    let r = parse(log, None).unwrap();
    assert_eq!(r.rows, 2);
    assert_eq!(r.malformed, [Malformed { line: 5, why: "1 cells where the header has 8".into() }]);
    let (t, s) = &r.samples[0];
    assert_eq!(*t, 1_795_963_396_706_000);
    assert_eq!((s.util_gpu_pct, s.memory_used_bytes, s.power_draw_mw), (Some(9), Some(21099 * MIB), Some(98_440)));
    assert_eq!(s.absence(Metric::FanSpeed), Some(Absence::NotAvailable));
    assert_eq!(s.clocks_event_reasons, Some(4));
    let s2 = &r.samples[1].1;
    assert_eq!(s2.absence(Metric::Utilization), Some(Absence::NotSupported));
    assert_eq!((s2.fan_speed_pct, s2.pstate), (Some(30), Some(2)));
    assert_eq!(r.devices.len(), 1);
    // Where the headers stood and how values were written, for an export that gives them back.
    assert_eq!(r.gpu.header_rows, [0, 1]);
    assert_eq!((r.gpu.units, r.gpu.rows, r.gpu.fields.len()), (Some(true), 2, 8));
    assert_eq!(r.apps, LogLayout::default());
}

#[test]
fn interleaved_gpus_without_ids_and_without_units() {
    let log = "timestamp, utilization.gpu [%], memory.used [MiB]\n\
        2026/11/29 00:00:00.000, 10, 100\n2026/11/29 00:00:00.004, 20, 200\n\
        2026/11/29 00:00:01.000, 11, 101\n2026/11/29 00:00:01.003, 21, 201\n";
    let r = parse(log, None).unwrap();
    let gpus: Vec<u32> = r.samples.iter().map(|s| s.1.gpu_index).collect();
    assert_eq!(gpus, [0, 1, 0, 1]);
    assert_eq!(r.devices.len(), 2);
    assert_eq!(r.samples[3].1.util_gpu_pct, Some(21));
}

#[test]
fn headerless_logs_need_their_field_list() {
    let log = "2026/11/29 00:00:00.000, 5 %, 1 MiB\n";
    assert!(matches!(parse(log, None), Err(LogError::NotALog(_))));
    let r = parse(log, Some("timestamp,utilization.gpu,memory.used")).unwrap();
    assert_eq!(r.samples[0].1.util_gpu_pct, Some(5));
    // The given list is the log's own: no header lines, values with units.
    assert_eq!(r.gpu.fields, ["timestamp", "utilization.gpu", "memory.used"]);
    assert_eq!((r.gpu.header_rows.len(), r.gpu.units), (0, Some(true)));
    // Aliases come back as nvidia-smi's canonical names; bare values mean `nounits`.
    let r = parse("2026/11/29 00:00:00.000, [N/A], 1980\n", Some("timestamp,fan.speed,clocks.sm")).unwrap();
    assert_eq!(r.gpu.fields, ["timestamp", "fan.speed", "clocks.current.sm"]);
    assert_eq!(r.gpu.format(), crate::CsvFormat { header: false, units: false });
}

#[test]
fn compute_app_logs_become_process_polls() {
    let log = "timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
        2026/11/29 14:43:16.706, GPU-a, 1250, python3, 21090 MiB\n\
        2026/11/29 14:43:16.706, GPU-a, 1280, python3, [N/A]\n\
        2026/11/29 14:43:18.706, GPU-a, 1250, python3, 21090 MiB\n";
    let r = parse(log, None).unwrap();
    assert_eq!(r.process_polls.len(), 2);
    assert_eq!(r.process_polls[0].processes.len(), 2);
    assert_eq!(r.process_polls[0].processes[1].used_memory_bytes, None);
    assert_eq!(r.devices[0].uuid, "GPU-a");
    assert_eq!(r.apps.fields, ["timestamp", "gpu_uuid", "pid", "process_name", "used_gpu_memory"]);
    assert_eq!((r.apps.header_rows.as_slice(), r.apps.rows, r.apps.units), (&[0][..], 3, Some(true)));
    assert_eq!(r.gpu, LogLayout::default());
}

#[test]
fn readings_out_of_range_are_unreadable_not_clamped() {
    let gpu = "timestamp, memory.used [MiB], power.draw [W]\n2026/11/29 00:00:00.000, 1 MiB, 1.5 W\n";
    for bad in
        ["-5 MiB, 98.44 W", "18446744073709551616000 MiB, 98.44 W", "1 MiB, -1.5 W", "1 MiB, 1e12 W", "1 MiB, -0.5 W"]
    {
        let r = parse(&format!("{gpu}2026/11/29 00:00:01.000, {bad}\n"), None).unwrap();
        assert_eq!((r.rows, r.malformed.len()), (1, 1), "{bad}");
        assert_eq!(r.samples[0].1.power_draw_mw, Some(1500));
    }
    let apps = "timestamp, gpu_uuid, pid, used_gpu_memory [MiB]\n2026/11/29 00:00:00.000, GPU-a, 1, 5 MiB\n";
    for bad in ["-5 MiB", "1e300 MiB"] {
        let r = parse(&format!("{apps}2026/11/29 00:00:01.000, GPU-a, 2, {bad}\n"), None).unwrap();
        assert_eq!((r.rows, r.malformed.len()), (1, 1), "{bad}");
    }
}

#[test]
fn refuses_what_is_not_a_log() {
    for text in ["", "\n\n", "hello, world\n1, 2\n", "{\"json\": true}"] {
        assert!(matches!(parse(text, None), Err(LogError::NotALog(_))), "{text:?}");
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    const HEADER: &str = "timestamp, index, name, uuid, utilization.gpu [%], memory.used [MiB], power.draw [W], pstate, clocks_event_reasons.active, fan.speed [%]";
    const APPS_HEADER: &str = "timestamp, gpu_name, gpu_bus_id, gpu_uuid, pid, process_name, used_gpu_memory [MiB]";
    /// Every field nvidia-smi printed on the H200 (tests/fixtures/h200-smi-reference).
    const REFERENCE_HEADER: &str = "timestamp, driver_version, count, name, index, uuid, pci.bus_id, persistence_mode, pstate, compute_mode, fan.speed [%], utilization.gpu [%], utilization.memory [%], memory.total [MiB], memory.used [MiB], memory.free [MiB], memory.reserved [MiB], temperature.gpu, temperature.memory, power.draw [W], power.limit [W], enforced.power.limit [W], clocks.current.sm [MHz], clocks.current.memory [MHz], clocks.max.sm [MHz], clocks.max.memory [MHz], clocks_event_reasons.active, clocks_event_reasons.supported, clocks_event_reasons.gpu_idle";
    const GPU_ROWS: [&str; 2] = [
        "2026/11/29 14:43:16.706, 0, NVIDIA H200, GPU-a, 9 %, 21099 MiB, 98.44 W, P0, 0x0000000000000004, [N/A]",
        "2026/11/29 14:43:16.906, 1, NVIDIA H200, GPU-b, 97 %, 1 MiB, 600.00 W, P0, 0x0, 30 %",
    ];
    const APPS_ROWS: [&str; 2] = [
        "2026/11/29 15:12:44.724, NVIDIA H200, 00000000:00:06.0, GPU-a, 467, python3, 3590 MiB",
        "2026/11/29 15:12:44.724, NVIDIA H200, 00000000:00:06.0, GPU-a, 468, python3, [N/A]",
    ];

    proptest! {
        /// A line splits into the cells between its commas, less the one space nvidia-smi puts
        /// after each, wherever the commas fall among the eight-byte words the splitter reads.
        #[test]
        fn cells_are_split_at_every_comma(line in "[, a\u{e9}0-9N/A]{0,70}") {
            let mut cells = Vec::new();
            super::cells::split_into(&line, &mut cells);
            let expected: Vec<&str> = line.split(',').enumerate()
                .map(|(i, c)| if i > 0 { c.strip_prefix(' ').unwrap_or(c) } else { c })
                .collect();
            prop_assert_eq!(cells, expected);
        }

        /// Any text is imported or refused; never a panic.
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text, None);
        }

        /// Lines that look nearly like a log (real cells shuffled, cut and mixed with junk) never
        /// panic, and every line is either a row, a header or reported as malformed.
        #[test]
        fn every_line_is_accounted_for(lines in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![
                Just("2026/11/29 14:43:16.706".to_owned()), Just("0".to_owned()), Just("NVIDIA H200".to_owned()),
                Just("GPU-dc089148".to_owned()), Just("9 %".to_owned()), Just("21099 MiB".to_owned()), Just("98.44 W".to_owned()),
                Just("P0".to_owned()), Just("0x0000000000000004".to_owned()), Just("[N/A]".to_owned()),
                Just("[Not Supported]".to_owned()), "[ -~]{0,12}",
            ], 0..12),
            0..30,
        )) {
            let body: Vec<String> = lines.iter().map(|l| l.join(", ")).collect();
            let text = format!("{HEADER}\n{}", body.join("\n"));
            if let Ok(r) = parse(&text, None) {
                let nonblank = body.iter().filter(|l| !l.trim().is_empty()).count();
                let headers = body.iter().filter(|l| parse_header(l).is_some()).count();
                prop_assert_eq!(r.rows + r.malformed.len() + headers, nonblank);
            }
        }

        /// Fed in pieces cut at any line breaks, a log reads exactly as it does whole: the same
        /// rows, the same malformed line numbers.
        #[test]
        fn pieces_read_as_the_whole(
            rows in proptest::collection::vec(prop_oneof![
                Just("2026/11/29 14:43:16.706, 0, NVIDIA H200, GPU-a, 9 %, 21099 MiB, 98.44 W, P0, 0x0000000000000004, [N/A]"),
                Just("2026/11/29 14:43:16.906, 1, NVIDIA H200, GPU-b, 97 %, 1 MiB, 600.00 W, P0, 0x0, 30 %"),
                Just("2026/11/29 14:43:17.106, 0, NVIDIA H200, GPU-a, 9 %, broken"),
                Just(""),
                Just(HEADER),
            ], 1..40),
            crlf in any::<bool>(),
            size in 1usize..300,
        ) {
            let eol = if crlf { "\r\n" } else { "\n" };
            let text = format!("{HEADER}{eol}{}", rows.join(eol));
            let mut whole_reg = Registry::default();
            let mut whole_rows = Vec::new();
            let whole = parse_each(&text, None, &mut whole_reg, &mut |r| whole_rows.push(r));
            let mut reg = Registry::default();
            let mut piece_rows = Vec::new();
            let mut parser = LogParser::new(None, &mut reg).unwrap();
            for piece in pieces(text.as_bytes(), size) {
                prop_assert!(piece.ends_with(b"\n") || text.as_bytes().ends_with(piece));
                parser.feed(std::str::from_utf8(piece).unwrap(), &mut |r| piece_rows.push(r));
            }
            prop_assert_eq!(parser.finish(), whole);
            prop_assert_eq!(piece_rows, whole_rows);
        }

        /// Any bytes (invalid UTF-8 read as the import reads it, NUL bytes, stray CRs) fed in any
        /// pieces: rows or an error, never a panic, and every line is a row, a header or counted
        /// as malformed with its own line number.
        #[test]
        fn any_bytes_are_rows_headers_or_malformed(
            head in prop_oneof![Just(HEADER), Just(APPS_HEADER), Just(REFERENCE_HEADER), Just("")],
            bytes in proptest::collection::vec(prop_oneof![
                any::<u8>(), Just(b'\n'), Just(b','), Just(b' '), Just(b'\0'), Just(b'\r'),
            ], 0..3000),
            size in 1usize..500,
        ) {
            let mut all = format!("{head}\n").into_bytes();
            all.extend_from_slice(&bytes);
            let mut reg = Registry::default();
            let mut parser = LogParser::new(None, &mut reg).unwrap();
            let mut rows = 0;
            for piece in pieces(&all, size) {
                parser.feed(&String::from_utf8_lossy(piece), &mut |_| rows += 1);
            }
            let text = String::from_utf8_lossy(&all);
            let lines = text.split('\n').count();
            let nonblank = text.split('\n').filter(|l| !l.trim().is_empty()).count();
            if let Ok(s) = parser.finish() {
                prop_assert_eq!(rows, s.rows);
                let headers = s.gpu.header_rows.len() + s.apps.header_rows.len();
                prop_assert_eq!(s.rows + s.malformed.len() + headers, nonblank);
                prop_assert!(s.malformed.iter().all(|m| (1..=lines).contains(&m.line)));
                prop_assert!(s.malformed.windows(2).all(|w| w[0].line < w[1].line));
            }
        }

        /// Lines a crash, a full disk or a hostile writer leaves: real rows cut anywhere, huge
        /// and odd numbers, unknown units, NUL bytes and very long cells. Never a panic, and
        /// every line is a row, the header or counted as malformed.
        #[test]
        fn hostile_rows_are_read_or_reported(
            apps in any::<bool>(),
            lines in proptest::collection::vec((0usize..GPU_ROWS.len(), 0usize..200, proptest::collection::vec(
                (0usize..12, prop_oneof![
                    Just("9".repeat(5000)), Just("18446744073709551616 MiB".to_owned()), Just("1e309 W".to_owned()),
                    Just("-1 %".to_owned()), Just("5 furlongs".to_owned()), Just("NaN W".to_owned()), Just("inf".to_owned()),
                    Just("0x".to_owned()), Just("0xFFFFFFFFFFFFFFFFFFFF".to_owned()), Just("P4294967296".to_owned()),
                    Just("\0".to_owned()), Just("\u{FFFD}\u{FFFD}".to_owned()), Just("9999/12/31 23:59:60.999".to_owned()),
                    Just("0000/01/01 00:00:00.000".to_owned()), Just("2026/02/31 24:00:00.0000000".to_owned()),
                    Just("4294967295".to_owned()), Just("99999.9999 W".to_owned()), Just(String::new()), Just(" ".to_owned()),
                    Just("[GPU is lost]".to_owned()), Just("[".to_owned()), Just("x".repeat(100_000)),
                ]),
                0..3,
            )), 0..20),
        ) {
            let (head, rows) = if apps { (APPS_HEADER, &APPS_ROWS[..]) } else { (HEADER, &GPU_ROWS[..]) };
            let mut text = format!("{head}\n");
            for (which, cut, swaps) in &lines {
                let mut cells: Vec<String> = rows[which % rows.len()].split(", ").map(str::to_owned).collect();
                for (at, junk) in swaps {
                    let n = cells.len();
                    cells[at % n].clone_from(junk);
                }
                let line = cells.join(", ");
                // Cut short at a character boundary, as a crash leaves the last line.
                let keep: String = if *cut < 100 { line.chars().take(line.chars().count() * cut / 100).collect() } else { line };
                text += &keep;
                text.push('\n');
            }
            if let Ok(r) = parse(&text, None) {
                let nonblank = text.lines().filter(|l| !l.trim().is_empty()).count();
                let headers = r.gpu.header_rows.len() + r.apps.header_rows.len();
                prop_assert_eq!(r.rows + r.malformed.len() + headers, nonblank);
                prop_assert_eq!(r.rows, r.samples.len() + r.process_polls.iter().map(|p| p.processes.len()).sum::<usize>());
            }
        }
    }
}
