//! A query's rows, read the same way by every part of the recording's reader.

use rusqlite::{Connection, Row};

use crate::RecordError;

/// Every row `sql` returns, each turned into a `T` by `f`.
pub(crate) fn rows<T>(
    conn: &Connection,
    sql: &str,
    f: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, RecordError> {
    let mut stmt = conn.prepare(sql)?;
    let out = stmt.query_map([], f)?.collect::<Result<Vec<T>, _>>()?;
    Ok(out)
}
