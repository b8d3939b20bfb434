"""The results database: an embedded DuckDB file (default ``<results-dir>/history.duckdb``)
with one row per attempt, one per campaign and one per conformance cell and flow of the
campaigns that ran flow sets (docs/history.md, "The database").

Its ``schema_version`` (in ``meta``) is :data:`DB_SCHEMA_VERSION`; an older database is
brought up to it by the writer's upgrade steps (``upgrades[n]`` turns version ``n`` into
``n + 1``, as :mod:`interop_runner.storage.schema` does for documents: the steps are
:data:`~.ingest.UPGRADES`), a newer one is refused.

The results directories stay the source of truth: every row comes from a campaign directory
(:mod:`.ingest`) and the file can be deleted and rebuilt from them at any time.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pandas as pd

from interop_runner.errors import UserError

if TYPE_CHECKING:
    import duckdb

DB_NAME = "history.duckdb"
DB_SCHEMA_VERSION = 3  # 2: the conformance table; 3: its reference and same-run figures
CPU_COST_COLUMNS = ("server_cpu_s_per_gib", "client_cpu_s_per_gib", "server_cycles_per_byte",
                    "client_cycles_per_byte")

# column -> DuckDB type; the stable columns of load_results, the CPU cost columns (NULL when
# the frame lacks them), the series signature computed at ingest and the campaign's host knobs
ATTEMPT_COLUMNS: dict[str, str] = {
    "campaign": "VARCHAR", "testbed": "VARCHAR", "server": "VARCHAR", "client": "VARCHAR",
    "testcase": "VARCHAR", "repetition": "BIGINT", "attempt": "BIGINT", "status": "VARCHAR",
    "reason": "VARCHAR", "alpn": "VARCHAR", "goodput_mbps": "DOUBLE", "duration_s": "DOUBLE",
    "file_size": "BIGINT", "bytes_received": "BIGINT", "started_at": "TIMESTAMPTZ",
    "finished_at": "TIMESTAMPTZ", "variant": "VARCHAR", "axes": "VARCHAR",
    "server_params": "VARCHAR", "client_params": "VARCHAR", "congestion_control": "VARCHAR",
    "cipher": "VARCHAR", "socket_rcvbuf": "BIGINT", "socket_sndbuf": "BIGINT",
    "gso": "BOOLEAN", "gro": "BOOLEAN", "server_version": "VARCHAR",
    "client_version": "VARCHAR", "cell_server": "VARCHAR", "cell_client": "VARCHAR",
    "bottleneck": "VARCHAR", **{c: "DOUBLE" for c in CPU_COST_COLUMNS},
    "signature": "VARCHAR", "knobs": "VARCHAR", "path": "VARCHAR",
}
CAMPAIGN_COLUMNS: dict[str, str] = {
    "campaign": "VARCHAR PRIMARY KEY", "directory": "VARCHAR", "name": "VARCHAR",
    "testbed": "VARCHAR", "started_at": "TIMESTAMPTZ", "finished_at": "TIMESTAMPTZ",
    "status": "VARCHAR", "planned_runs": "BIGINT", "runs": "BIGINT", "attempts": "BIGINT",
    "ok_attempts": "BIGINT", "synthetic": "BOOLEAN", "variants": "VARCHAR",
    "versions": "VARCHAR", "implementations": "VARCHAR", "source_commits": "VARCHAR",
    "runner_commit": "VARCHAR", "hosts_digest": "VARCHAR", "content_digest": "VARCHAR",
    "campaign_schema_version": "BIGINT", "ingested_at": "TIMESTAMPTZ",
}
IMPLEMENTATION_COLUMNS: dict[str, str] = {
    "campaign": "VARCHAR", "role": "VARCHAR", "name": "VARCHAR", "version": "VARCHAR",
    "declared_version": "VARCHAR", "source_hash": "VARCHAR", "variant": "VARCHAR",
    "commit": "VARCHAR", "dirty": "BOOLEAN",
}
# one row per conformance cell and flow label (flow_conformance), figures NULL with the reason:
# against the kernel-vs-kernel runs, then (version 3, appended: an upgrade adds them last)
# against the kernel flow of the same attempts, the kernel and whether the reference's
# runs were of another one
CONFORMANCE_COLUMNS: dict[str, str] = {
    "campaign": "VARCHAR", "testbed": "VARCHAR", "flow_set": "VARCHAR", "variant": "VARCHAR",
    "axes": "VARCHAR", "label": "VARCHAR", "stack": "VARCHAR",
    "congestion_control": "VARCHAR", "reference_label": "VARCHAR", "signature": "VARCHAR",
    "conformance": "DOUBLE", "conformance_t": "DOUBLE", "delta_throughput": "DOUBLE",
    "delta_delay": "DOUBLE", "trials_test": "BIGINT", "trials_reference": "BIGINT",
    "conformance_missing": "VARCHAR", "server_version": "VARCHAR",
    "conformance_same_run": "DOUBLE", "conformance_t_same_run": "DOUBLE",
    "delta_throughput_same_run": "DOUBLE", "delta_delay_same_run": "DOUBLE",
    "conformance_same_run_missing": "VARCHAR", "kernel": "VARCHAR",
    "reference_kernel_mismatch": "BOOLEAN",
}
#: The conformance columns version 3 added (:func:`~.ingest.upgrade_2_to_3`).
CONFORMANCE_COLUMNS_3 = ("conformance_same_run", "conformance_t_same_run",
                         "delta_throughput_same_run", "delta_delay_same_run",
                         "conformance_same_run_missing", "kernel", "reference_kernel_mismatch")
TABLES = {"campaigns": CAMPAIGN_COLUMNS, "attempts": ATTEMPT_COLUMNS,
          "implementations": IMPLEMENTATION_COLUMNS, "conformance": CONFORMANCE_COLUMNS}
Upgrade = Callable[["duckdb.DuckDBPyConnection"], None]
"""One upgrade step: turns the database of one version into the next (tables exist)."""


def default_db(results_dir: Path | str) -> Path:
    """``<results_dir>/history.duckdb``."""
    return Path(results_dir) / DB_NAME


def connect(path: Path | str, *, read_only: bool = False, rebuild: bool = False,
            upgrades: Mapping[int, Upgrade] | None = None) -> "duckdb.DuckDBPyConnection":
    """Open (and for writing create) the database; a read-only open of a missing file, or a
    file that is not such a database, is a one-line :class:`UserError`. ``rebuild`` skips the
    schema version check: the caller drops every table (:func:`drop_tables`), so a database
    of another version can be rebuilt. ``upgrades`` (a writer's): the steps that bring an
    older database up to this version (:func:`upgrade`); without them an older one is
    refused with a hint."""
    import duckdb

    path = Path(path)
    if read_only and not path.is_file():
        raise UserError(f"{path}: no history database (run `history ingest` first)")
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        raise UserError(f"{path}: cannot open the history database: "
                        f"{str(exc).splitlines()[0]}") from None
    try:
        if not read_only and not rebuild:
            create_tables(con)
        if not rebuild:
            _check_version(con, path, None if read_only else upgrades)
    except BaseException:
        con.close()
        raise
    return con


def create_tables(con: "duckdb.DuckDBPyConnection") -> None:
    """The tables (and the schema version) where they do not exist yet."""
    con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                [str(DB_SCHEMA_VERSION)])
    for table, columns in TABLES.items():
        body = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")


def _check_version(con: "duckdb.DuckDBPyConnection", path: Path,
                   upgrades: Mapping[int, Upgrade] | None) -> None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except Exception:  # noqa: BLE001 - duckdb.CatalogException: not our database
        raise UserError(f"{path}: not a history database (no meta table)") from None
    version = int(row[0]) if row is not None else None
    if version is not None and 1 <= version < DB_SCHEMA_VERSION:
        if upgrades is None:
            raise UserError(f"{path}: history database version {version}, this runner reads "
                            f"{DB_SCHEMA_VERSION}; `history ingest` into it upgrades it")
        upgrade(con, version, upgrades)
    elif version != DB_SCHEMA_VERSION:
        stored = "?" if version is None else version
        raise UserError(f"{path}: history database version {stored}, this "
                        f"runner writes {DB_SCHEMA_VERSION}; rebuild it with "
                        f"`history ingest --rebuild`")


def upgrade(con: "duckdb.DuckDBPyConnection", version: int,
            upgrades: Mapping[int, Upgrade]) -> None:
    """Run the steps from ``version`` up to :data:`DB_SCHEMA_VERSION` in one transaction and
    record the new version (the tables of this version exist already: :func:`create_tables`
    ran); a failed step leaves the database as it was."""
    missing = [n for n in range(version, DB_SCHEMA_VERSION) if n not in upgrades]
    if missing:
        raise AssertionError(f"history database: no upgrade step from version {missing[0]}")
    con.execute("BEGIN TRANSACTION")
    try:
        for step in range(version, DB_SCHEMA_VERSION):
            upgrades[step](con)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                    [str(DB_SCHEMA_VERSION)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def drop_tables(con: "duckdb.DuckDBPyConnection") -> None:
    """Remove every row (``--rebuild``): every table, ``meta`` included, is created again,
    empty, with this runner's schema version."""
    for table in (*TABLES, "meta"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    create_tables(con)


def typed_frame(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """``frame`` with exactly ``columns`` in order: a missing one is all NULL (a CPU cost the
    loader does not provide stays NULL, never 0), categories become strings."""
    data: dict[str, Any] = {}
    for name, kind in columns.items():
        if name not in frame.columns:
            data[name] = pd.Series(pd.NA, index=frame.index, dtype=_pandas_type(kind))
        elif isinstance(frame[name].dtype, pd.CategoricalDtype):
            data[name] = frame[name].astype("string")
        else:
            data[name] = frame[name]
    return pd.DataFrame(data, index=frame.index)


def _pandas_type(kind: str) -> str:
    base = kind.split()[0]
    return {"DOUBLE": "Float64", "BIGINT": "Int64", "BOOLEAN": "boolean",
            "TIMESTAMPTZ": "datetime64[ns, UTC]"}.get(base, "string")


def insert(con: "duckdb.DuckDBPyConnection", table: str, frame: pd.DataFrame) -> None:
    """Append the rows of ``frame`` (typed by :func:`typed_frame`) to ``table``."""
    import duckdb

    rows = typed_frame(frame, TABLES[table])
    con.register("_rows", rows)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM _rows")
    except BaseException:
        # inside a failed transaction unregistering fails too: keep the first error
        with contextlib.suppress(duckdb.Error):
            con.unregister("_rows")
        raise
    con.unregister("_rows")


def delete_campaign(con: "duckdb.DuckDBPyConnection", campaign: str) -> None:
    """Remove a campaign's rows from every table."""
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE campaign = ?", [campaign])


def stored_digest(con: "duckdb.DuckDBPyConnection", campaign: str) -> str | None:
    """The content digest the database holds for ``campaign`` (None: not there)."""
    row = con.execute("SELECT content_digest FROM campaigns WHERE campaign = ?",
                      [campaign]).fetchone()
    return None if row is None else str(row[0])


def query(db: Path | str, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
    """Run SQL (read only) on the database and return the result as a DataFrame, e.g.
    ``query(db, "SELECT server, median(goodput_mbps) FROM attempts GROUP BY server")``."""
    con = connect(db, read_only=True)
    try:
        with warnings.catch_warnings():
            # DuckDB's conversion calls DataFrame.drop(inplace=True), which pandas 3.1
            # deprecates: the warning is about DuckDB's code, not this query
            warnings.filterwarnings("ignore", message="The inplace keyword")
            result: pd.DataFrame = con.execute(sql, params or []).df()
    finally:
        con.close()
    return result


def load_history(db: Path | str, *, include_synthetic: bool = True) -> pd.DataFrame:
    """Every stored attempt, one row each, with its campaign's start time
    (``campaign_started_at``), ``synthetic`` flag and host-facts digest, oldest campaign
    first. ``include_synthetic=False`` leaves out generated campaigns (bench/history_scale.py)."""
    where = "" if include_synthetic else "WHERE NOT coalesce(c.synthetic, false)"
    return query(db, f"""
        SELECT a.*, c.started_at AS campaign_started_at, c.synthetic, c.hosts_digest
        FROM attempts a JOIN campaigns c USING (campaign) {where}
        ORDER BY c.started_at, a.campaign, a.server, a.client, a.repetition, a.attempt""")


def load_conformance(db: Path | str, *, include_synthetic: bool = True) -> pd.DataFrame:
    """Every stored conformance row (one per campaign, cell and flow label) with its
    campaign's start time (``campaign_started_at``) and ``synthetic`` flag, oldest first."""
    where = "" if include_synthetic else "WHERE NOT coalesce(c.synthetic, false)"
    return query(db, f"""
        SELECT f.*, c.started_at AS campaign_started_at, c.synthetic
        FROM conformance f JOIN campaigns c USING (campaign) {where}
        ORDER BY c.started_at, f.campaign, f.label, f.signature""")


def load_campaigns(db: Path | str) -> pd.DataFrame:
    """The campaigns table, oldest first."""
    return query(db, "SELECT * FROM campaigns ORDER BY started_at, campaign")
