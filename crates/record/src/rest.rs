//! Everything of a GPU sample but its base row, each written only when it changed: the slow
//! fields (`gpu_state`), the utilization buffer, GPM and the metric table.

use std::collections::HashMap;

use gpulse_model::{GPM_FIELDS, GpmMetrics, GpmUnit, GpuSample};
use rusqlite::{Connection, params};

use crate::RecordError;
use crate::units::{kib, ms, pm};

/// The slow-changing fields of one GPU, as last written.
#[derive(Debug, Clone, PartialEq)]
struct State {
    values: [Option<i64>; 12],
    absent: gpulse_model::Absences,
}

/// `INSERT OR REPLACE INTO gpm_samples (t_ms, gpu, interval_ms, …) VALUES (?1, …)`, one column
/// per row of the model's GPM table.
fn insert_gpm() -> String {
    let columns: Vec<&str> = GPM_FIELDS.iter().map(|f| f.column).collect();
    let slots: Vec<String> = (1..=columns.len() + 3).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT OR REPLACE INTO gpm_samples (t_ms, gpu, interval_ms, {}) VALUES ({})",
        columns.join(", "),
        slots.join(",")
    )
}

/// What a recording last holds of each GPU, beyond its base rows.
pub(crate) struct Rest {
    /// By GPU index: looked up for every sample, so a vector rather than a hash map.
    state: Vec<Option<State>>,
    gpm: HashMap<u32, GpmMetrics>,
    /// The `gpm_samples` insert, its columns named from the model's table.
    insert_gpm: String,
    /// By GPU index: the metric table's readings as last written.
    table: Vec<gpulse_model::TableReadings>,
    hires_ms: HashMap<u32, i64>,
}

impl Default for Rest {
    fn default() -> Self {
        Self {
            state: Vec::new(),
            gpm: HashMap::new(),
            insert_gpm: insert_gpm(),
            table: Vec::new(),
            hires_ms: HashMap::new(),
        }
    }
}

impl Rest {
    /// Writes what of `g` at `t` (ms) changed since it was last written.
    pub(crate) fn write(&mut self, conn: &Connection, t: i64, g: &GpuSample) -> Result<(), RecordError> {
        let values = [
            g.memory_total_bytes.map(kib),
            g.memory_reserved_bytes.map(kib),
            g.power_limit_mw.map(i64::from),
            g.enforced_power_limit_mw.map(i64::from),
            g.clock_graphics_mhz.map(i64::from),
            g.pcie_link_gen.map(i64::from),
            g.pcie_link_width.map(i64::from),
            g.pcie_tx_bytes_per_s.map(kib),
            g.pcie_rx_bytes_per_s.map(kib),
            g.ecc_uncorrected_volatile.map(|v| v as i64),
            g.ecc_corrected_volatile.map(|v| v as i64),
            g.energy_mj.map(|v| v as i64),
        ];
        let slot = g.gpu_index as usize;
        let unchanged = self
            .state
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|st| st.values == values && st.absent == g.absent);
        if !unchanged {
            let state = State { values, absent: g.absent.clone() };
            let v = &state.values;
            conn.prepare_cached(
                "INSERT OR REPLACE INTO gpu_state VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)",
            )?
            .execute(params![
                t,
                g.gpu_index,
                v[0],
                v[1],
                v[2],
                v[3],
                v[4],
                v[5],
                v[6],
                v[7],
                v[8],
                v[9],
                v[10],
                v[11],
                (!state.absent.is_empty()).then(|| serde_json::to_string(&state.absent)).transpose()?
            ])?;
            if self.state.len() <= slot {
                self.state.resize(slot + 1, None);
            }
            self.state[slot] = Some(state);
        }
        let last_hires = match g.util_gpu_samples.is_empty() {
            true => i64::MAX,
            false => self.hires_ms.get(&g.gpu_index).copied().unwrap_or(i64::MIN),
        };
        for u in &g.util_gpu_samples {
            let ut = ms(u.timestamp_us);
            if ut > last_hires {
                conn.prepare_cached("INSERT OR REPLACE INTO gpu_util_hires VALUES (?1, ?2, ?3)")?.execute(params![
                    ut,
                    g.gpu_index,
                    u.util_pct
                ])?;
                self.hires_ms.insert(g.gpu_index, ut);
            }
        }
        if let Some(m) = &g.gpm
            && self.gpm.get(&g.gpu_index) != Some(&**m)
        {
            // Percentages in per-mille, rates in KiB/s: the columns follow the model's table.
            let values = GPM_FIELDS.iter().map(|f| {
                (f.get)(m).map(|v| match f.unit {
                    GpmUnit::Pct => pm(v),
                    GpmUnit::MibPerS => (v / 1024.0).round() as i64,
                })
            });
            let key = [Some(t), Some(i64::from(g.gpu_index)), Some(m.interval_ms.round() as i64)];
            conn.prepare_cached(&self.insert_gpm)?
                .execute(rusqlite::params_from_iter(key.into_iter().chain(values)))?;
            self.gpm.insert(g.gpu_index, (**m).clone());
        }
        if self.table.len() <= slot {
            self.table.resize_with(slot + 1, Default::default);
        }
        crate::table::write(conn, &mut self.table[slot], t, g)
    }
}
