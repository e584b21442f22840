"""Reading a recording into pandas."""

import os
import sqlite3
import urllib.parse

# The newest recording schema this package reads: the one the gpulse beside it writes
# (`gpulse_record::schema::SCHEMA_VERSION`; tests/cli/python_package.rs keeps the two equal).
# Schemas 1 up to this one are read; a newer one is refused, as the gpulse command refuses it.
SCHEMA_VERSION = 5

# Tables with a millisecond (or microsecond) time column to turn into timestamps.
_TIME_COLUMNS = {"t_ms": "ms", "t_us": "us", "first_ms": "ms"}

# The `time` columns' dtype, whichever pandas reads the file: pandas 2 makes nanoseconds of
# `to_datetime(unit=...)`, pandas 3 microseconds.
TIME_DTYPE = "datetime64[ns, UTC]"


_SQLITE_MAGIC = b"SQLite format 3\x00"


class NewerSchemaError(ValueError):
    """The recording was written by a newer gpulse than this package reads."""


def _inspect(path):
    """The header checks of ``gpulse_record::check::inspect``, with its words: a damaged or
    incomplete copy is named as such, not as "not a recording". Returns whether the file is in
    WAL mode with no ``-wal`` beside it."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(100)
        size = os.stat(path).st_size
    except OSError as e:
        raise ValueError(f"cannot read {name}: {e.strerror}") from None
    if not head.startswith(_SQLITE_MAGIC):
        raise ValueError(f"{name} is not a gpulse recording")
    if len(head) < 100:
        raise ValueError(f"{name} is damaged: it ends inside its header")
    page_bytes = int.from_bytes(head[16:18], "big")
    page_bytes = 65536 if page_bytes == 1 else page_bytes
    pages = int.from_bytes(head[28:32], "big")
    # The page count is trusted only when its "valid for" counter matches (SQLite's rule).
    if head[24:28] == head[92:96] and pages > 0 and pages * page_bytes > size:
        raise ValueError(
            f"{name} is damaged: it was cut short: {size} of its {pages * page_bytes} bytes are there"
        )
    return head[18] == 2 and not os.path.lexists(name + "-wal")


def _connect(path):
    """A read-only connection to the recording at ``path``, and its schema version."""
    wal_missing = _inspect(path)
    uri = "file:" + urllib.parse.quote(os.fspath(path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise ValueError(f"{path}: {e}") from None
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        found = int(row[0])
    except sqlite3.DatabaseError as e:
        con.close()
        if wal_missing:
            why = f"its -wal file is missing ({path}-wal holds what was recorded)"
        elif "malformed" in str(e) or "not a database" in str(e):
            why = "its pages are corrupt"
        else:
            raise ValueError(f"{path} is not a gpulse recording") from None
        raise ValueError(f"{path} is damaged: {why}") from None
    except (TypeError, ValueError):
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
    except ImportError:
        con.close()
        raise ImportError("gpulse.load() needs pandas, which is not installed: pip install pandas") from None
    # pandas wraps SQLite's errors in its own DatabaseError (pandas.io.sql's before pandas 2).
    db_errors = (sqlite3.DatabaseError, getattr(pd.errors, "DatabaseError", sqlite3.DatabaseError))
    try:
        # From schema 4, `gpu_samples` is a view over `gpu_sample_rows` that adds `t_ms` and `gpu`:
        # the view is the table readers get, under the name it has always had.
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'gpu_sample_rows' "
                "OR type = 'view' AND name = 'gpu_samples'"
            )
        ]
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
    except db_errors as e:
        if "malformed" in str(e) or "not a database" in str(e):
            raise ValueError(f"{os.fspath(path)} is damaged: its pages are corrupt") from None
        raise
    finally:
        con.close()
