//! The per-poll NVML trace format of the reference H200 captures (`gpm_<scenario>.csv`).
//!
//! Each row is one poll of one GPU: `t_s,gpu,util_gpu,util_mem,mem_used_mib,temp_c,power_w,
//! sm_clock_mhz,throttle,nprocs,poll_us,` then GPM metrics by their NVML names. Columns are found by
//! name, so their order does not matter. Both the demo replay and the stand-in NVML library read it.

use crate::GpmMetrics;

/// One poll of one GPU from a trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceRow {
    /// Unix time of the poll, seconds.
    pub t_s: f64,
    /// NVML index.
    pub gpu: u32,
    pub util_gpu_pct: Option<u32>,
    pub util_mem_pct: Option<u32>,
    pub memory_used_mib: Option<u64>,
    pub temperature_gpu_c: Option<u32>,
    pub power_draw_w: Option<f64>,
    pub clock_sm_mhz: Option<u32>,
    pub clocks_event_reasons: Option<u64>,
    pub process_count: Option<u32>,
    /// GPM metrics over the interval ending at this poll, when the trace has them.
    pub gpm: Option<GpmMetrics>,
}

/// A malformed trace: which line and why.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TraceError {
    #[error("trace is empty")]
    Empty,
    #[error("trace header lacks the column {0:?}")]
    MissingColumn(&'static str),
    #[error("line {line}: {why}")]
    BadLine { line: usize, why: String },
}

/// The largest `t_s` accepted: about the year 5000, far inside an `i64` of microseconds.
const MAX_T_S: f64 = 1e11;
/// The highest GPU index accepted, as a recording keeps it (8 bits).
const MAX_GPU: u32 = 255;

/// Parses a whole trace. Rows keep the file's order.
pub fn parse(text: &str) -> Result<Vec<TraceRow>, TraceError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or(TraceError::Empty)?;
    let cols: Vec<&str> = header.trim().split(',').collect();
    let find = |name: &'static str| cols.iter().position(|c| *c == name);
    let need = |name: &'static str| find(name).ok_or(TraceError::MissingColumn(name));
    let (t, gpu) = (need("t_s")?, need("gpu")?);
    let gpm_cols = crate::GPM_FIELDS.map(|f| find(f.trace_column));
    let has_gpm = gpm_cols.iter().any(Option::is_some);
    let mut rows = Vec::new();
    let mut prev_t: Option<f64> = None;
    for (i, line) in lines {
        let cells: Vec<&str> = line.trim().split(',').collect();
        let bad = |why: String| TraceError::BadLine { line: i + 1, why };
        if cells.len() != cols.len() {
            return Err(bad(format!("{} cells, header has {}", cells.len(), cols.len())));
        }
        let f = |c: Option<usize>| c.and_then(|c| cells[c].trim().parse::<f64>().ok());
        let u = |c: Option<usize>| f(c).filter(|v| *v >= 0.0).map(|v| v.round() as u32);
        let t_s = f(Some(t)).ok_or_else(|| bad(format!("bad t_s {:?}", cells[t])))?;
        // Finite, in order, and within what microseconds since the epoch can hold.
        if !t_s.is_finite() || t_s.abs() > MAX_T_S {
            return Err(bad(format!("t_s {t_s} is not a time")));
        }
        if prev_t.is_some_and(|p| t_s < p) {
            return Err(bad(format!("t_s {t_s} goes back in time")));
        }
        let gpm = has_gpm.then(|| {
            let mut m = GpmMetrics { interval_ms: prev_t.map_or(0.0, |p| (t_s - p) * 1000.0), ..Default::default() };
            for (field, col) in crate::GPM_FIELDS.iter().zip(gpm_cols) {
                (field.set)(&mut m, f(col).map(|v| field.unit.from_nvml(v)));
            }
            m
        });
        let throttle = find("throttle").and_then(|c| {
            let s = cells[c].trim();
            u64::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
        });
        rows.push(TraceRow {
            t_s,
            gpu: u(Some(gpu))
                .filter(|g| *g <= MAX_GPU)
                .ok_or_else(|| bad(format!("bad gpu {:?} (0 to {MAX_GPU})", cells[gpu])))?,
            util_gpu_pct: u(find("util_gpu")),
            util_mem_pct: u(find("util_mem")),
            memory_used_mib: u(find("mem_used_mib")).map(u64::from),
            temperature_gpu_c: u(find("temp_c")),
            power_draw_w: f(find("power_w")),
            clock_sm_mhz: u(find("sm_clock_mhz")),
            clocks_event_reasons: throttle,
            process_count: u(find("nprocs")),
            gpm,
        });
        prev_t = Some(t_s);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_that_are_not_times_and_impossible_gpus_are_refused() {
        for bad in ["NaN", "inf", "-inf", "1e308", "-1e308"] {
            let text = format!("t_s,gpu,util_gpu\n1,0,5\n{bad},0,5\n");
            assert!(parse(&text).is_err(), "t_s {bad}");
        }
        assert!(parse("t_s,gpu,util_gpu\n2,0,5\n1,0,5\n").is_err(), "back in time");
        assert!(parse("t_s,gpu,util_gpu\n1,4000000000,5\n").is_err(), "GPU 4e9");
        assert!(parse("t_s,gpu,util_gpu\n1,256,5\n").is_err(), "GPU 256");
        assert_eq!(parse("t_s,gpu,util_gpu\n1,255,5\n1,0,6\n").unwrap().len(), 2, "GPU 255, and two GPUs at one time");
    }

    const TRACE: &str = "t_s,gpu,util_gpu,util_mem,mem_used_mib,temp_c,power_w,sm_clock_mhz,throttle,nprocs,poll_us,SmUtil,PcieTxPerSec\n\
        10.0,0,99,50,41772,57,690.5,1980,0x4,2,2209,91.7,7.5\n\
        10.2,0,98,49,41772,57,691.0,1965,0x0,2,2100,90.0,1.0\n";

    #[test]
    fn parses_by_column_name() {
        let rows = parse(TRACE).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].util_gpu_pct, Some(99));
        assert_eq!(rows[0].clocks_event_reasons, Some(4));
        assert_eq!(rows[0].power_draw_w, Some(690.5));
        let g = rows[1].gpm.as_ref().unwrap();
        assert_eq!(g.sm_util_pct, Some(90.0));
        assert_eq!(g.pcie_tx_bytes_per_s, Some(1024.0 * 1024.0));
        assert!((g.interval_ms - 200.0).abs() < 1e-6);
        assert_eq!(g.sm_occupancy_pct, None);
    }

    #[test]
    fn reports_bad_lines_by_number() {
        let err = parse("t_s,gpu\n1,0\nx,0\n").unwrap_err();
        assert_eq!(err, TraceError::BadLine { line: 3, why: "bad t_s \"x\"".into() });
        assert_eq!(parse("gpu\n0\n").unwrap_err(), TraceError::MissingColumn("t_s"));
        assert_eq!(parse("").unwrap_err(), TraceError::Empty);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    const HEADER: &str =
        "t_s,gpu,util_gpu,util_mem,mem_used_mib,temp_c,power_w,sm_clock_mhz,throttle,nprocs,poll_us,SmUtil\n";

    proptest! {
        /// Any text is either parsed or refused with a line number; it never panics.
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        /// Rows that look almost right (numbers, junk, missing cells) never panic either, and every
        /// parsed row keeps the file's order.
        #[test]
        fn near_misses_never_panic(rows in proptest::collection::vec(
            proptest::collection::vec(prop_oneof!["-?[0-9]{1,6}(\\.[0-9]{1,3})?", "0x[0-9A-Fa-f]{0,17}", "[a-z]{0,3}", Just(String::new())], 0..14),
            0..20,
        )) {
            let text: String = HEADER.to_owned() + &rows.iter().map(|r| r.join(",")).collect::<Vec<_>>().join("\n");
            if let Ok(parsed) = parse(&text) {
                prop_assert_eq!(parsed.len(), rows.iter().filter(|r| !r.join(",").trim().is_empty()).count());
            }
        }
    }
}
