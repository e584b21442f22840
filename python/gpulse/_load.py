"""Reading a recording into pandas."""

import sqlite3

# Tables with a millisecond (or microsecond) time column to turn into timestamps.
_TIME_COLUMNS = {"t_ms": "ms", "t_us": "us", "first_ms": "ms"}


def load(path):
    """Every table of the recording at ``path`` as a DataFrame, keyed by table name.

    Opens the file read-only, so it works while ``gpulse`` is still writing it. Time columns
    get a ``time`` column beside them (UTC timestamps).
    """
    import pandas as pd

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if "meta" not in tables:
            raise ValueError(f"{path} is not a gpulse recording")
        out = {}
        for t in tables:
            cols = [r[1] for r in con.execute(f'PRAGMA table_xinfo("{t}")')]
            df = pd.read_sql_query(f'SELECT {", ".join(cols)} FROM "{t}"', con)
            for col, unit in _TIME_COLUMNS.items():
                if col in df.columns and "time" not in df.columns:
                    df.insert(0, "time", pd.to_datetime(df[col], unit=unit, utc=True))
            out[t] = df
        return out
    finally:
        con.close()
