"""Reading a recording into pandas."""

import os
import sqlite3
import urllib.parse

# The newest recording schema this package reads: the one the gpulse beside it writes
# (`gpulse_record::schema::SCHEMA_VERSION`; tests/cli/python_package.rs keeps the two equal).
# Schemas 1 up to this one are read; a newer one is refused, as the gpulse command refuses it.
SCHEMA_VERSION = 3

# Tables with a millisecond (or microsecond) time column to turn into timestamps.
_TIME_COLUMNS = {"t_ms": "ms", "t_us": "us", "first_ms": "ms"}

# The `time` columns' dtype, whichever pandas reads the file: pandas 2 makes nanoseconds of
# `to_datetime(unit=...)`, pandas 3 microseconds.
TIME_DTYPE = "datetime64[ns, UTC]"


class NewerSchemaError(ValueError):
    """The recording was written by a newer gpulse than this package reads."""


def _connect(path):
    """A read-only connection to the recording at ``path``, and its schema version."""
    uri = "file:" + urllib.parse.quote(os.fspath(path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise ValueError(f"{path}: {e}") from None
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        found = int(row[0])
    except (sqlite3.Error, TypeError, ValueError):
        con.close()
        raise ValueError(f"{path} is not a gpulse recording") from None
    if found > SCHEMA_VERSION:
        con.close()
        raise NewerSchemaError(
            f"{path} was written by a newer gpulse (schema {found}, this one reads {SCHEMA_VERSION})"
        )
    return con, found


def schema_version(path):
    """The schema version of the recording at ``path``; raises as :func:`load` does for a file
    that is not a recording or is newer than this package reads. Needs no pandas."""
    con, found = _connect(path)
    con.close()
    return found


def load(path):
    """Every table of the recording at ``path`` as a DataFrame, keyed by table name.

    Opens the file read-only, so it works while ``gpulse`` is still writing it. Time columns
    get a ``time`` column beside them (UTC timestamps, ``datetime64[ns, UTC]`` with pandas 2
    and 3 alike). Raises :class:`NewerSchemaError` for a recording written by a newer gpulse,
    and ``ValueError`` for a file that is not a recording.
    """
    con, _ = _connect(path)
    try:
        import pandas as pd

        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = {}
        for t in tables:
            cols = [r[1] for r in con.execute(f'PRAGMA table_xinfo("{t}")')]
            df = pd.read_sql_query(f'SELECT {", ".join(cols)} FROM "{t}"', con)
            for col, unit in _TIME_COLUMNS.items():
                if col in df.columns and "time" not in df.columns:
                    time = pd.to_datetime(df[col], unit=unit, utc=True).astype(TIME_DTYPE)
                    df.insert(0, "time", time)
            out[t] = df
        return out
    finally:
        con.close()
