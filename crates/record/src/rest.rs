//! Everything of a GPU sample but its base row, each written only when it changed: the slow
//! fields (`gpu_state`), the utilization buffer, GPM and the metric table.

use std::collections::HashMap;

use gpulse_model::{GPM_FIELDS, GpmMetrics, GpmUnit, GpuSample, Place};
use rusqlite::{Connection, params};

use crate::RecordError;
use crate::units::{ms, pm};

/// The slow-changing fields of one GPU, as last written, in [`STATE_CALLS`]' order.
#[derive(Debug, Clone, PartialEq)]
struct State {
    values: [Option<i64>; STATE_CALLS.len()],
    absent: gpulse_model::Absences,
}

/// The metric table's `gpu_state` columns' calls.
const STATE_CALLS: [gpulse_model::Call; gpulse_model::count_in(Place::State)] = gpulse_model::calls_in(Place::State);

/// Twelve state columns: [`Rest::write`]'s `fill!` lists one index for each.
const _: () = assert!(STATE_CALLS.len() == 12, "list the new column's index in Rest::write's fill!");

/// `INSERT OR REPLACE INTO gpu_state (t_ms, gpu, …, absent_json) VALUES (?1, …)`, the columns
/// named from the metric table.
fn insert_state() -> String {
    let columns: Vec<&str> = STATE_CALLS.iter().filter_map(|c| c.column.map(|c| c.name)).collect();
    let slots: Vec<String> = (1..=columns.len() + 3).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT OR REPLACE INTO gpu_state (t_ms, gpu, {}, absent_json) VALUES ({})",
        columns.join(", "),
        slots.join(",")
    )
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
    /// The `gpu_state` insert, its columns named from the metric table.
    insert_state: String,
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
            insert_state: insert_state(),
            table: Vec::new(),
            hires_ms: HashMap::new(),
        }
    }
}

impl Rest {
    /// Writes what of `g` at `t` (ms) changed since it was last written.
    pub(crate) fn write(&mut self, conn: &Connection, t: i64, g: &GpuSample) -> Result<(), RecordError> {
        // One statement per column, as in `write::base_values`.
        let mut values = [None; STATE_CALLS.len()];
        macro_rules! fill {
            ($($i:literal)*) => { $( values[$i] = crate::units::stored(&STATE_CALLS[$i], g); )* };
        }
        fill!(0 1 2 3 4 5 6 7 8 9 10 11);
        let slot = g.gpu_index as usize;
        let unchanged = self
            .state
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|st| st.values == values && st.absent == g.absent);
        if !unchanged {
            let state = State { values, absent: g.absent.clone() };
            let key = [Some(t), Some(i64::from(g.gpu_index))].map(rusqlite::types::Value::from);
            let values = state.values.iter().map(|v| rusqlite::types::Value::from(*v));
            let absent = (!state.absent.is_empty()).then(|| serde_json::to_string(&state.absent)).transpose()?;
            conn.prepare_cached(&self.insert_state)?.execute(rusqlite::params_from_iter(
                key.into_iter().chain(values).chain([rusqlite::types::Value::from(absent)]),
            ))?;
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
