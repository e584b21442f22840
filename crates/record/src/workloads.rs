//! The pod or Slurm job each GPU process ran in (`gpulse_model::Workload`), kept in the
//! `workloads` table: one row per process and change, so a recording says whose GPU seconds they
//! were long after the pod is gone. Added within schema 3: new writers create the table, and a
//! recording without it reads as one whose processes have no workload.

use std::collections::HashMap;

use gpulse_model::{Pod, ProcessSample, SlurmJob, Workload};
use rusqlite::{Connection, params};

use crate::RecordError;

/// Each row holds from `first_ms` until the next row of the same `pid`. `kind` is `pod`,
/// `slurm`, or `none` (the process left its pod or job, or its PID now names another process).
pub const CREATE_WORKLOADS: &str = r#"
CREATE TABLE workloads (
    pid          INTEGER NOT NULL,
    first_ms     INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    uid          TEXT,
    container_id TEXT,
    namespace    TEXT,
    pod          TEXT,
    container    TEXT,
    job_id       INTEGER,
    step         TEXT,
    user         TEXT,
    job_name     TEXT,
    PRIMARY KEY (pid, first_ms)
) WITHOUT ROWID;
"#;

/// What the writer last wrote of each PID, so that a row is written only on a change.
#[derive(Default)]
pub(crate) struct Written {
    by_pid: HashMap<u32, Option<Workload>>,
}

impl Written {
    /// Writes the workload of each process that is new to the table or changed since; a process
    /// never seen in a pod or job writes nothing.
    pub(crate) fn note(&mut self, conn: &Connection, t: i64, processes: &[ProcessSample]) -> Result<(), RecordError> {
        for p in processes {
            let known = self.by_pid.get(&p.pid);
            if known == Some(&p.workload) || (known.is_none() && p.workload.is_none()) {
                continue;
            }
            let row = Row::of(p.workload.as_ref());
            conn.prepare_cached("INSERT OR REPLACE INTO workloads VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)")?
                .execute(params![
                    p.pid,
                    t,
                    row.kind,
                    row.uid,
                    row.container_id,
                    row.namespace,
                    row.pod,
                    row.container,
                    row.job_id,
                    row.step,
                    row.user,
                    row.job_name
                ])?;
            self.by_pid.insert(p.pid, p.workload.clone());
        }
        Ok(())
    }
}

/// One row's columns; the unused half of a pod's or a job's is NULL.
#[derive(Default)]
struct Row<'a> {
    kind: &'static str,
    uid: Option<&'a str>,
    container_id: Option<&'a str>,
    namespace: Option<&'a str>,
    pod: Option<&'a str>,
    container: Option<&'a str>,
    /// SQLite's integers are signed: a job id past `i64::MAX` (none is) would not fit.
    job_id: Option<i64>,
    step: Option<&'a str>,
    user: Option<&'a str>,
    job_name: Option<&'a str>,
}

impl<'a> Row<'a> {
    fn of(w: Option<&'a Workload>) -> Self {
        match w {
            None => Row { kind: "none", ..Row::default() },
            Some(Workload::Pod(p)) => Row {
                kind: "pod",
                uid: p.uid.as_deref(),
                container_id: p.container_id.as_deref(),
                namespace: p.namespace.as_deref(),
                pod: p.name.as_deref(),
                container: p.container.as_deref(),
                ..Row::default()
            },
            Some(Workload::Slurm(j)) => Row {
                kind: "slurm",
                job_id: i64::try_from(j.job_id).ok(),
                step: j.step.as_deref(),
                user: j.user.as_deref(),
                job_name: j.name.as_deref(),
                ..Row::default()
            },
        }
    }
}

/// Every PID's workloads by time, as the table holds them.
#[derive(Default)]
pub(crate) struct Timelines {
    by_pid: HashMap<u32, Vec<(i64, Option<Workload>)>>,
}

impl Timelines {
    /// The table's rows, or none when the recording predates it.
    pub(crate) fn read(conn: &Connection) -> Result<Self, RecordError> {
        let present: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'workloads'",
            [],
            |r| r.get(0),
        )?;
        let mut out = Self::default();
        if !present {
            return Ok(out);
        }
        let mut stmt = conn.prepare(
            "SELECT pid, first_ms, kind, uid, container_id, namespace, pod, container, job_id, step, user, job_name \
             FROM workloads ORDER BY pid, first_ms",
        )?;
        let rows = stmt.query_map([], |r| {
            let kind: String = r.get(2)?;
            let workload = match kind.as_str() {
                "pod" => Some(Workload::Pod(Pod {
                    uid: r.get(3)?,
                    container_id: r.get(4)?,
                    namespace: r.get(5)?,
                    name: r.get(6)?,
                    container: r.get(7)?,
                })),
                "slurm" => r
                    .get::<_, Option<i64>>(8)?
                    .and_then(|j| u64::try_from(j).ok())
                    .map(|job_id| {
                        Ok::<_, rusqlite::Error>(Workload::Slurm(SlurmJob {
                            job_id,
                            step: r.get(9)?,
                            user: r.get(10)?,
                            name: r.get(11)?,
                        }))
                    })
                    .transpose()?,
                // `none`, or a kind a later gpulse adds: no workload, never a misread one.
                _ => None,
            };
            Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)?, workload))
        })?;
        for row in rows {
            let (pid, t, w) = row?;
            out.by_pid.entry(pid).or_default().push((t, w));
        }
        Ok(out)
    }

    /// The workload `pid` ran in at `t_ms`: the latest row at or before it.
    pub(crate) fn at(&self, pid: u32, t_ms: i64) -> Option<Workload> {
        let line = self.by_pid.get(&pid)?;
        let after = line.partition_point(|(t, _)| *t <= t_ms);
        line.get(after.checked_sub(1)?)?.1.clone()
    }
}
