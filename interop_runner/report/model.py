"""The report's inputs and data model: which campaign directories to read, how to load them
(our campaigns and predecessor QIR 10G experiment trees), and the dataclasses the rest of the
report fills in and renders (:class:`ReportCampaign`, :class:`RenderedFigure`, :class:`Report`).

Nothing here draws or writes HTML; :mod:`interop_runner.report.build` is the entry point.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from interop_runner.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

# Names of TLS key log files: the orchestrator sets SSLKEYLOGFILE=<logs>/keys.log for each side
# (only with campaign keylog: true); anything else with "keylog" or
# "sslkey" in its name is reported too.
KEYLOG_NAME = re.compile(r"^keys\.log$|keylog|sslkey", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class View:
    """One analysis view: a function of :mod:`interop_runner.analysis.views` and its prose."""

    name: str  # figure file stem and HTML anchor
    title: str
    function: str
    takes: str  # "frame" or "paths" (the campaign directory)
    about: str  # what to look for (paper section 4)
    needs_testbeds: int = 1  # fewer testbeds in the campaign: nothing to compare, skipped
    needs_pairs: int = 1  # likewise for server/client pairs
    module: str = "interop_runner.analysis.views"  # where ``function`` lives
    # (frame column, why skipped): without any value in that column the view is skipped
    needs_column: tuple[str, str] | None = None
    # (function in ``module``, title): a table of the same input shown with the figure
    table: tuple[str, str] | None = None


@dataclasses.dataclass
class RenderedFigure:
    """A rendered view: its figure as SVG text, the data it plots, and the files written."""

    view: View
    svg: str
    data: "pd.DataFrame"
    files: list[Path]
    stem: str  # <campaign slug>__<view name>: file name stem and HTML id
    table: "pd.DataFrame | None" = None  # the view's own table (View.table), shown with it


@dataclasses.dataclass
class Skipped:
    """A view that was not drawn, and why (no data, or the view failed)."""

    view: View
    reason: str
    error: bool = False
    # too few testbeds or pairs to compare (View.needs_*): its data was not looked at
    too_few: bool = False


@dataclasses.dataclass
class ReportCampaign:
    """What the report needs of one campaign directory."""

    directory: Path
    meta: dict[str, Any]
    frame: "pd.DataFrame"
    figures: list[RenderedFigure] = dataclasses.field(default_factory=list)
    skipped: list[Skipped] = dataclasses.field(default_factory=list)

    slug: str = ""  # unique among the report's campaigns: HTML id and figure file prefix

    @property
    def name(self) -> str:
        """The campaign id (directory name)."""
        return str(self.meta.get("campaign") or self.directory.name)

    @property
    def anchor(self) -> str:
        """An HTML id for the campaign's section."""
        return "c-" + self.slug


@dataclasses.dataclass
class Report:
    """The result of :func:`build_report`."""

    html_file: Path
    figure_files: list[Path]
    campaigns: list[ReportCampaign]
    keylogs: list[Path]

    @property
    def view_errors(self) -> list[str]:
        """Views that raised an exception (as one line each)."""
        return [f"{c.name}: {s.view.name}: {s.reason}" for c in self.campaigns
                for s in c.skipped if s.error]


# ----------------------------------------------------------------------------- inputs

def find_campaigns(paths: Sequence[Path | str]) -> list[Path]:
    """Campaign directories named by ``paths``: a campaign directory (with campaign.json) or a
    results directory holding campaigns. Raises :class:`ReportError` for anything else."""
    if not paths:
        raise ReportError("no results directory given")
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ReportError(f"{path}: no such directory")
        if not path.is_dir():
            raise ReportError(f"{path}: not a directory")
        try:
            found += _campaigns_in(path)
        except OSError as exc:  # e.g. no permission to list it
            raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    unique: dict[Path, None] = dict.fromkeys(p.resolve() for p in found)
    return list(unique)


def _campaigns_in(path: Path) -> list[Path]:
    """The campaign directories of one directory given: itself, those in it, or a
    predecessor tree's experiment directories. Raises :class:`ReportError` for none."""
    if (path / "campaign.json").is_file():
        return [path]
    inner = sorted(d for d in path.iterdir() if (d / "campaign.json").is_file())
    if not inner:  # a predecessor (QIR 10G) tree: one section per experiment directory
        from interop_runner.analysis.importers.qir10g import find_qir10g_experiments

        inner = find_qir10g_experiments(path)
    if not inner:
        raise ReportError(f"{path}: not a results directory (no campaign.json in it or "
                          f"in its subdirectories, and no predecessor result.json)")
    return inner


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file; ReportError if it is missing or not JSON."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ReportError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a JSON object")
    return data


def read_campaign_json(path: Path) -> dict[str, Any]:
    """campaign.json (or testbed-<name>.json) upgraded to the current schema version;
    ReportError if it is missing, not a JSON object, or of a version this runner cannot read."""
    from interop_runner.errors import StoreError
    from interop_runner.storage.campaign_record import read_campaign

    try:
        return read_campaign(path)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    except (ValueError, StoreError) as exc:  # damaged (empty, cut short, not an object...)
        # or SchemaError: one line naming the file and what is wrong with it
        raise ReportError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None


def find_keylogs(directories: Iterable[Path]) -> list[Path]:
    """TLS key log files stored below the campaign directories (``keys.log`` per side)."""
    hits: list[Path] = []
    for directory in directories:
        for parent, dirs, files in os.walk(directory):
            dirs[:] = [d for d in dirs if d != ".cache"]  # load_results' Parquet cache
            hits += [Path(parent) / f for f in files if KEYLOG_NAME.search(f)]
    return sorted(hits)


def testbed_documents(campaign: ReportCampaign) -> dict[str, dict[str, Any]]:
    """Per testbed, the document holding its ``hosts`` and ``implementations``: campaign.json
    itself, or ``testbed-<name>.json`` for campaigns over several testbeds."""
    files = campaign.meta.get("testbed_files")
    if not files:
        name = str((campaign.meta.get("testbed") or {}).get("name") or "testbed")
        return {name: campaign.meta}
    docs: dict[str, dict[str, Any]] = {}
    for name, file in sorted(files.items()):
        try:
            docs[str(name)] = read_campaign_json(campaign.directory / str(file))
        except ReportError as exc:
            docs[str(name)] = {"error": str(exc)}
    return docs


def slugify(text: str) -> str:
    """``text`` reduced to an HTML id / file name part (letters, digits, ``_.-``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


# ----------------------------------------------------------------------------- loading

def load_campaign(directory: Path) -> ReportCampaign:
    """Read one campaign directory (its campaign.json and all its attempts)."""
    from interop_runner.analysis import load_results

    if not (directory / "campaign.json").is_file():
        return _load_qir10g_experiment(directory)
    meta = read_campaign_json(directory / "campaign.json")
    return ReportCampaign(directory, meta, load_results(directory), slug=slugify(directory.name))


def _load_qir10g_experiment(directory: Path) -> ReportCampaign:
    """A predecessor experiment directory (result.json + repetition trees) as a section; its
    bookkeeping is what ``load_results`` read from it (:func:`_predecessor_meta`)."""
    from interop_runner.analysis import load_results

    read_json(directory / "result.json")  # unreadable or not JSON: one ReportError line
    frame = load_results(directory)
    name = "/".join(directory.parts[-3:])
    return ReportCampaign(directory, _predecessor_meta(name, frame), frame, slug=slugify(name))


def _predecessor_meta(name: str, frame: "pd.DataFrame") -> dict[str, Any]:
    """campaign.json's fields for a predecessor experiment, from its frame: the testbed
    (``testbed``), the predecessor runner's commit (``qir_commit``), the implementations per
    role with their node and version, the file size, testcase, repetitions, the runner's
    arguments (``qir_args``) and its start and end."""
    first: Any = frame.iloc[0] if len(frame) else {}

    def value(column: str) -> Any:  # the experiment's value (one per result.json)
        return _plain(first.get(column))

    args, start, end = value("qir_args"), value("qir_start_unix"), value("qir_end_unix")
    return {
        "campaign": name, "status": "predecessor (QIR 10G) result tree",
        "testbed": {"name": value("testbed")},
        "runner": {"package": "QIR 10G fork", "commit": value("qir_commit")},
        "started_at": _utc(start), "finished_at": _utc(end),
        "wall_s": end - start if start is not None and end is not None else None,
        "config": {"testcase": value("testcase"), "file_size": value("file_size"),
                   "repetitions": value("qir_repetitions"),
                   "servers": sorted({str(s) for s in frame.get("server", [])}),
                   "clients": sorted({str(c) for c in frame.get("client", [])}),
                   "args": json.loads(args) if isinstance(args, str) else None},
        "hosts": {}, "implementations": _predecessor_implementations(frame),
    }


def _predecessor_implementations(frame: "pd.DataFrame") -> dict[str, Any]:
    """campaign.json's ``implementations`` (``role:name`` -> node, version) from the frame's
    ``<role>``, ``<role>_node`` and ``<role>_version`` columns."""
    out: dict[str, Any] = {}
    for role in ("server", "client"):
        columns = [c for c in (role, f"{role}_node", f"{role}_version") if c in frame.columns]
        if role not in columns:
            continue
        for row in frame[columns].drop_duplicates().to_dict("records"):
            out[f"{role}:{row[role]}"] = {"node": _plain(row.get(f"{role}_node")),
                                          "version": _plain(row.get(f"{role}_version"))}
    return out


def _plain(value: Any) -> Any:
    """A frame value as JSON holds it: numpy scalars as Python ones, NA as None."""
    import pandas as pd

    if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _utc(seconds: Any) -> str | None:
    """Unix seconds as an ISO 8601 UTC time (as campaign.json writes its times)."""
    import datetime as dt

    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(float(seconds), dt.timezone.utc).isoformat(
        timespec="seconds")
