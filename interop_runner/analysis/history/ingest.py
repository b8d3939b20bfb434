"""Campaign directories into the history database: checks, metadata, rows.

A campaign is taken only when it is whole: ``campaign.json`` readable with status
``finished``, every ``run.json`` readable, at least as many runs stored as it planned.
Anything else is refused with one line naming the directory and the reason
(:class:`CampaignRefused`). The same contents twice (:func:`content_digest`) change nothing.
A campaign that ran flow sets also gets its conformance rows (:func:`conformance_rows`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import pandas as pd

from interop_runner.analysis.history import db as store
from interop_runner.config.workload import DEFAULT_WORKLOAD_LABEL
from interop_runner.errors import StoreError, UserError
from interop_runner.storage.campaign_record import hosts_of_campaign, read_campaign
from interop_runner.storage.layout import iter_run_files

if TYPE_CHECKING:
    import duckdb

SIGNATURE_PARAMS = ("congestion_control", "cipher", "socket_rcvbuf", "socket_sndbuf", "gso",
                    "gro")
BATCH = 50  # campaigns written per transaction (one insert per table each)


class CampaignRefused(UserError):
    """A campaign directory that is corrupt or partial: one line, directory and reason."""


@dataclass(frozen=True)
class Ingested:
    """What ingesting one campaign did: ``added``, ``replaced`` (its contents changed),
    ``unchanged``, or ``duplicate`` (the same campaign id as ``duplicate_of``, a directory
    named before in the same ingest: skipped)."""

    campaign: str
    directory: Path
    outcome: str
    attempts: int
    duplicate_of: Path | None = None


def is_database_file(path: Path) -> bool:
    """A DuckDB file (``results/history.duckdb``, which ``history ingest results/*`` names):
    skipped, not refused."""
    return path.suffix == ".duckdb" and path.is_file()


def campaign_id(meta: dict[str, Any], directory: Path) -> str:
    """The campaign's id: ``campaign.json``'s ``campaign``, else the directory's name."""
    return str(meta.get("campaign") or directory.name)


def campaign_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Campaign directories: each path itself when it holds ``campaign.json``, else its
    subdirectories that do (a results directory); a path with neither is refused."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "campaign.json").is_file():
            found.append(path)
            continue
        inner = sorted(d for d in path.iterdir() if (d / "campaign.json").is_file()) \
            if path.is_dir() else []
        if not inner:
            raise CampaignRefused(f"{path}: not a campaign or results directory (no "
                                  f"campaign.json in it or below it)")
        found += inner
    return found


def read_meta(directory: Path) -> dict[str, Any]:
    """The campaign's ``campaign.json`` (upgraded), refused unless it is finished."""
    try:
        meta = read_campaign(directory / "campaign.json")
    except (OSError, ValueError, StoreError) as exc:
        raise CampaignRefused(f"{directory}: corrupt: campaign.json unreadable "
                              f"({str(exc).splitlines()[0][:200]})") from None
    status = meta.get("status")
    if status != "finished":
        raise CampaignRefused(f"{directory}: partial: status {status!r}, not 'finished'")
    return meta


def content_digest(directory: Path) -> str:
    """SHA-256 over the campaign's documents (campaign.json, testbed-*.json, every run.json),
    their paths included: equal digests, equal campaign."""
    digest = hashlib.sha256()
    files = [directory / "campaign.json", *sorted(directory.glob("testbed-*.json")),
             *sorted(p for p in iter_run_files(directory)
                     if ".cache" not in p.relative_to(directory).parts)]
    for path in files:
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def hosts_digest(meta: dict[str, Any], directory: Path) -> str | None:
    """A short SHA-256 of the campaign's host facts (None when it recorded none): equal
    digests, the same hosts as far as the facts tell."""
    hosts = hosts_of_campaign(meta, directory)
    if not hosts:
        return None
    return hashlib.sha256(json.dumps(hosts, sort_keys=True).encode()).hexdigest()[:16]


def check_complete(directory: Path, meta: dict[str, Any], frame: pd.DataFrame) -> None:
    """Refuse unreadable records and fewer stored runs than planned."""
    from interop_runner.analysis.frames.results import damaged_files

    unreadable = len(damaged_files(frame))  # the loader's one mark of a damaged record
    if unreadable:
        raise CampaignRefused(f"{directory}: corrupt: {unreadable} unreadable run.json "
                              f"record(s)")
    planned = int(meta.get("planned_runs") or 0)
    runs = stored_runs(frame)
    if runs < planned:
        raise CampaignRefused(f"{directory}: partial: {runs} of {planned} planned run(s) "
                              f"stored")


def stored_runs(frame: pd.DataFrame) -> int:
    """Runs with a record: distinct repetition directories (attempts of one run share one)."""
    if frame.empty:
        return 0
    return int(frame["path"].astype("string").map(lambda p: str(Path(p).parent)).nunique())


def knobs_text(meta: dict[str, Any]) -> str | None:
    """The campaign's host knobs (``knobs`` / ``server_knobs`` / ``client_knobs`` as
    configured) as compact sorted JSON, None without any."""
    config = meta.get("config") or {}
    knobs = {k: {n: v for n, v in (config.get(k) or {}).items() if v is not None}
             for k in ("knobs", "server_knobs", "client_knobs")}
    knobs = {k: v for k, v in knobs.items() if v}
    return json.dumps(knobs, sort_keys=True, default=str, separators=(",", ":")) if knobs \
        else None


def signature(frame: pd.DataFrame) -> "pd.Series[str]":
    """Per attempt, what must be equal for two campaigns to be points of one series besides
    testbed, pair and testcase: the sweep variant, the implementation and standard
    parameters, the file size and the workload (compact sorted JSON). Host knobs are not
    part of it: like a version, a changed host setting is something the history is there to
    show. The default workload (one download) is left out, so the series of records from
    before workloads keep their ids."""
    columns = ["variant", "server_params", "client_params", "file_size", *SIGNATURE_PARAMS,
               "workload"]
    if "workload" in frame.columns:
        label = frame["workload"].astype("string")
        frame = frame.assign(workload=label.mask(label == DEFAULT_WORKLOAD_LABEL))
    present = [c for c in columns if c in frame.columns]
    keys = frame[present].astype("string").fillna("")
    unique = keys.drop_duplicates()
    records = frame.loc[unique.index, present].astype(object)
    texts = {tuple(k): json.dumps({c: v for c, v in row.items()
                                   if not pd.isna(v) and v not in ("", "{}")},
                                  sort_keys=True, default=str, separators=(",", ":"))
             for k, row in zip(unique.itertuples(index=False), records.to_dict("records"))}
    return pd.Series([texts[tuple(k)] for k in keys.itertuples(index=False)],
                     index=frame.index, dtype="string")


def implementation_rows(campaign: str, meta: dict[str, Any]) -> pd.DataFrame:
    """One row per implementation and role of ``campaign.json`` (several testbeds: those of
    the first testbed document that lists them)."""
    rows = []
    for key, entry in (meta.get("implementations") or {}).items():
        role, _, name = key.partition(":")
        source = entry.get("variant_source") or {}
        rows.append({"campaign": campaign, "role": role, "name": name,
                     "version": entry.get("version"),
                     "declared_version": entry.get("declared_version"),
                     "source_hash": entry.get("source_hash"),
                     "variant": json.dumps(entry["variant"], sort_keys=True)
                     if entry.get("variant") else None,
                     "commit": source.get("commit"), "dirty": source.get("dirty")})
    return pd.DataFrame(rows, columns=list(store.IMPLEMENTATION_COLUMNS))


def _testbed_meta(meta: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The document that holds implementations: campaign.json, or for several testbeds the
    first readable ``testbed-<name>.json``."""
    for file in (meta.get("testbed_files") or {}).values():
        try:
            return read_campaign(directory / file)
        except (OSError, ValueError, StoreError):
            continue
    return meta


def campaign_row(directory: Path, meta: dict[str, Any], frame: pd.DataFrame,
                 implementations: pd.DataFrame, digest: str) -> pd.DataFrame:
    """The campaigns-table row of a campaign."""
    testbed = (meta.get("testbed") or {}).get("name") or ",".join(sorted(meta.get("testbeds")
                                                                         or {}))
    entries = implementations.to_dict("records")
    versions = sorted({f"{e['name']} {e['version']}" for e in entries if e["version"]})
    commits = {str(e["name"]): e["commit"] for e in entries if e["commit"]}
    row = {
        "campaign": campaign_id(meta, directory), "directory": str(directory.resolve()),
        "name": (meta.get("config") or {}).get("name"), "testbed": testbed or None,
        "started_at": meta.get("started_at"), "finished_at": meta.get("finished_at"),
        "status": meta.get("status"), "planned_runs": meta.get("planned_runs"),
        "runs": stored_runs(frame), "attempts": len(frame),
        "ok_attempts": int((frame["status"].astype("string") == "ok").sum()),
        "synthetic": bool(meta.get("synthetic", False)),
        "variants": json.dumps((meta.get("plan") or {}).get("variants") or [""]),
        "versions": ", ".join(versions) or None,
        "implementations": implementations.drop(columns="campaign").to_json(orient="records"),
        "source_commits": json.dumps(commits, sort_keys=True) if commits else None,
        "runner_commit": (meta.get("runner") or {}).get("commit"),
        "hosts_digest": hosts_digest(meta, directory), "content_digest": digest,
        "campaign_schema_version": meta.get("schema_version"),
        "ingested_at": pd.Timestamp.now(tz="UTC"),
    }
    frame_row = pd.DataFrame([row])
    for column in ("started_at", "finished_at"):
        frame_row[column] = pd.to_datetime(frame_row[column], utc=True, format="ISO8601")
    return frame_row


@dataclass(frozen=True)
class Rows:
    """A campaign's rows for the four tables, checked and ready to write."""

    campaigns: pd.DataFrame
    implementations: pd.DataFrame
    attempts: pd.DataFrame
    conformance: pd.DataFrame


def campaign_rows(directory: Path, meta: dict[str, Any], digest: str) -> Rows:
    """Load a campaign (through its cache) and build its rows; CampaignRefused when a record
    is unreadable or runs are missing."""
    from interop_runner.analysis.frames.results import load_results

    frame = load_results(directory)
    check_complete(directory, meta, frame)
    campaign = campaign_id(meta, directory)
    conformance = conformance_rows(directory, campaign, frame)
    # only what is stored: new columns on the loader's wide frame would copy it piecemeal
    frame = frame[[c for c in store.ATTEMPT_COLUMNS if c in frame.columns]]
    frame = frame.assign(signature=signature(frame), knobs=knobs_text(meta), campaign=campaign)
    implementations = implementation_rows(campaign, _testbed_meta(meta, directory))
    return Rows(campaign_row(directory, meta, frame, implementations, digest),
                implementations, frame, conformance)


def conformance_rows(directory: Path, campaign: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The conformance table's rows of a campaign (``frame``: its results): one per cell and
    flow label of :func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance`, with
    the testbed, the sweep axes as JSON (``axes``), the series ``signature`` (flow set,
    label and axes) and the tested stack's version; none without flow sets."""
    from interop_runner.analysis.ab.conformance import has_flows
    from interop_runner.analysis.theories.flow_conformance import flow_conformance

    if not has_flows(frame):
        return pd.DataFrame(columns=list(store.CONFORMANCE_COLUMNS))
    table = flow_conformance(directory)
    table = table[table["label"].notna().to_numpy(dtype=bool)]
    axes = [c for c in table.columns if c.startswith("axis_")]
    axis_texts = [json.dumps({a[5:]: None if pd.isna(r[a]) else str(r[a]) for a in axes},
                             sort_keys=True) for _, r in table.iterrows()]
    signatures = [json.dumps({"flow_set": str(f), "label": str(lab), "axes": json.loads(t)},
                             sort_keys=True, separators=(",", ":"))
                  for f, lab, t in zip(table["flow_set"], table["label"], axis_texts)]
    named = table["label"].astype("string").str.split("/").str[0]
    return table.assign(
        campaign=campaign, testbed=_common_text(frame.get("testbed")), axes=axis_texts,
        signature=signatures, stack=table["server"].astype("string").fillna(named),
        server_version=_versions_by_cell(frame, table))


def _text(value: Any) -> str:
    """A cell key as text (missing: ``""``)."""
    return "" if pd.isna(value) else str(value)


def _common_text(values: "pd.Series[Any] | None") -> str | None:
    """The most common value as text (None without any)."""
    if values is None or values.dropna().empty:
        return None
    return str(values.dropna().astype(str).value_counts().index[0])


def _versions_by_cell(frame: pd.DataFrame, table: pd.DataFrame) -> "pd.Series[Any]":
    """Per conformance row: the most common server version of its cell's attempts (same
    variant and flow set, ``cell_client`` in the results)."""
    if not {"server_version", "cell_client", "variant"} <= set(frame.columns):
        return pd.Series(None, index=table.index, dtype="string")
    keys = pd.Series([f"{_text(v)}\0{_text(f)}" for v, f
                      in zip(frame["variant"], frame["cell_client"])], index=frame.index)
    by_cell = {str(key): _common_text(group) for key, group
               in frame["server_version"].groupby(keys, sort=False)}
    return pd.Series([by_cell.get(f"{_text(v)}\0{_text(f)}") for v, f
                      in zip(table["variant"], table["flow_set"])], index=table.index,
                     dtype="string")


def write_rows(con: "duckdb.DuckDBPyConnection", batch: list[Rows]) -> None:
    """Replace the campaigns of ``batch`` in one transaction; a database error rolls it back
    and is a one-line :class:`UserError` naming the campaign directories."""
    import duckdb

    if not batch:
        return
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            for rows in batch:
                store.delete_campaign(con, str(rows.campaigns["campaign"].iloc[0]))
            for table in ("campaigns", "implementations", "attempts", "conformance"):
                parts = [store.typed_frame(getattr(r, table), store.TABLES[table])
                         for r in batch]
                store.insert(con, table, pd.concat(parts, ignore_index=True))
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # keep the error that aborted it
                con.execute("ROLLBACK")
            raise
    except duckdb.Error as exc:
        dirs = [str(r.campaigns["directory"].iloc[0]) for r in batch]
        where = dirs[0] if len(dirs) == 1 else f"{dirs[0]} (and {len(dirs) - 1} more " \
            f"campaign(s) of its batch)"
        raise UserError(f"{where}: not written to the history database: "
                        f"{str(exc).splitlines()[0][:300]}") from None


def ingest_campaign(con: "duckdb.DuckDBPyConnection", directory: Path,
                    batch: list[Rows] | None = None,
                    seen: dict[str, Path] | None = None) -> Ingested:
    """Put one campaign into the database: ``unchanged`` when it holds the same contents
    already; CampaignRefused when the campaign is corrupt or partial. With ``batch`` the rows
    are appended to it (for :func:`write_rows`) instead of written at once. ``seen``: the
    campaign ids taken so far in this ingest and their directories; another directory of one
    of them (a copy) is a ``duplicate``, skipped."""
    meta = read_meta(directory)
    campaign = campaign_id(meta, directory)
    if seen is not None and campaign in seen:
        return Ingested(campaign, directory, "duplicate", 0, duplicate_of=seen[campaign])
    digest = content_digest(directory)
    stored = store.stored_digest(con, campaign)
    if stored == digest:
        if seen is not None:
            seen[campaign] = directory
        return Ingested(campaign, directory, "unchanged", 0)
    rows = campaign_rows(directory, meta, digest)
    if seen is not None:
        seen[campaign] = directory
    if batch is None:
        write_rows(con, [rows])
    else:
        batch.append(rows)
    return Ingested(campaign, directory, "added" if stored is None else "replaced",
                    len(rows.attempts))


def known_directories(con: "duckdb.DuckDBPyConnection") -> list[Path]:
    """The directories of every campaign the database holds (what ``--rebuild`` reads)."""
    return [Path(r[0]) for r in con.execute(
        "SELECT directory FROM campaigns ORDER BY started_at, campaign").fetchall()]


@dataclass(frozen=True)
class IngestReport:
    """Every campaign ingested (or found unchanged), one line per refused path and the paths
    skipped (DuckDB files among the paths, e.g. ``results/*``)."""

    done: list[Ingested]
    refused: list[str]
    skipped: list[Path] = field(default_factory=list)


def ingest(db: Path | str, paths: Iterable[Path | str], *, rebuild: bool = False
           ) -> IngestReport:
    """Ingest campaign directories (or results directories holding campaigns) into ``db``.
    ``rebuild``: empty the database first and read every campaign it held again, from its
    directory, together with ``paths``. A refused campaign does not stop the others."""
    con = store.connect(db, rebuild=rebuild, upgrades=UPGRADES)
    try:
        targets = [*map(Path, paths)]
        if rebuild:
            targets = [*_old_directories(con), *targets]
            store.drop_tables(con)
        return _ingest_paths(con, targets)
    finally:
        con.close()


def upgrade_1_to_2(con: "duckdb.DuckDBPyConnection") -> None:
    """Version 2 keeps conformance series: the (new, empty) conformance table is filled for
    the stored campaigns, measured ones whose directory is still there, from their
    directories (what a fresh ingest would write). A campaign whose directory is gone keeps
    no conformance rows until it is ingested again."""
    con.execute("DELETE FROM conformance")
    stored = con.execute("SELECT campaign, directory FROM campaigns "
                         "WHERE NOT coalesce(synthetic, false)").fetchall()
    for campaign, directory in stored:
        rows = _stored_conformance(str(campaign), Path(str(directory)))
        if len(rows):
            store.insert(con, "conformance", rows)


def _stored_conformance(campaign: str, directory: Path) -> pd.DataFrame:
    """The conformance rows of a campaign read again from its directory (none when it is
    gone or unreadable: the upgrade does not fail on one campaign)."""
    from interop_runner.analysis.frames.results import load_results

    if not (directory / "campaign.json").is_file():
        return pd.DataFrame()
    try:
        return conformance_rows(directory, campaign, load_results(directory))
    except (OSError, ValueError, StoreError):
        return pd.DataFrame()


def upgrade_2_to_3(con: "duckdb.DuckDBPyConnection") -> None:
    """Version 3: the conformance figures are against the kernel-vs-kernel runs (paper 000's
    reference; issue 35), the same-run ones (version 2's figures) have columns of their own
    and the kernel is kept. The new columns are added and the table refilled from the
    directories, as version 2 was (:func:`upgrade_1_to_2`)."""
    for column in store.CONFORMANCE_COLUMNS_3:
        kind = store.CONFORMANCE_COLUMNS[column]
        con.execute(f'ALTER TABLE conformance ADD COLUMN IF NOT EXISTS "{column}" {kind}')
    upgrade_1_to_2(con)


UPGRADES: dict[int, store.Upgrade] = {1: upgrade_1_to_2, 2: upgrade_2_to_3}
"""The upgrade steps of the database: ``UPGRADES[n]`` turns version ``n`` into ``n + 1``."""


def _old_directories(con: "duckdb.DuckDBPyConnection") -> list[Path]:
    """:func:`known_directories` of a database that may be of another schema version, or
    have no campaigns table (none then)."""
    import duckdb

    try:
        return known_directories(con)
    except duckdb.Error:
        return []


def _ingest_paths(con: "duckdb.DuckDBPyConnection", paths: list[Path]) -> IngestReport:
    done: list[Ingested] = []
    refused: list[str] = []
    skipped: list[Path] = []
    batch: list[Rows] = []
    seen: dict[str, Path] = {}
    for directory in _unique(paths, refused, skipped):
        try:
            done.append(ingest_campaign(con, directory, batch, seen))
        except CampaignRefused as exc:
            refused.append(str(exc))
        if len(batch) >= BATCH:
            write_rows(con, batch)
            batch.clear()
    write_rows(con, batch)
    return IngestReport(done, refused, skipped)


def _unique(paths: list[Path], refused: list[str], skipped: list[Path]) -> list[Path]:
    """The campaign directories of ``paths``, each once (a path that holds none: a line in
    ``refused``; a DuckDB file: in ``skipped``)."""
    seen: dict[Path, Path] = {}
    for path in paths:
        if is_database_file(path):
            skipped.append(path)
            continue
        try:
            for directory in campaign_dirs([path]):
                seen.setdefault(directory.resolve(), directory)
        except CampaignRefused as exc:
            refused.append(str(exc))
    return list(seen.values())
