"""Goodput per setting of the stack: TLS cipher and AES acceleration (paper Fig. 5) and
segmentation offloads with the CPU they cost (paper Fig. 9)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from interop_runner.analysis.theories.stats import STAT_COLUMNS, cell_stats, ok_mask
from interop_runner.analysis.views._common import (
    PAIR,
    axis_column,
    cell_medians,
    empty,
    figure,
    finite,
    grouped_bars,
    has_values,
    most_common,
    no_data,
    no_data_axes,
    pair_label,
    stack_of,
)

CIPHERS = {"TLS_AES_128_GCM_SHA256": "AES-128-GCM", "TLS_AES_256_GCM_SHA384": "AES-256-GCM",
           "TLS_CHACHA20_POLY1305_SHA256": "ChaCha20-Poly1305"}
CRYPTO_COLUMNS = [*PAIR, "pair", "stack", "mode", "cipher", "aes_hw", *STAT_COLUMNS,
                  "wire_cipher", "unhonoured"]
OFFLOAD_PATHS = ("knobs.offload", "server_knobs.offload", "client_knobs.offload")
OFFLOAD_ORDER = ("default", "off", "udp-only", "all-on")
OFFLOAD_COLUMNS = [*PAIR, "pair", "stack", "preset", "offload", "gso", *STAT_COLUMNS,
                   "client_cpu_pct", "server_cpu_pct"]


def _bool(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def cipher_mode(cipher: Any, aes_hw: Any) -> str:
    """``AES-128-GCM``, ``AES-128-GCM (no AES-NI)``, ``ChaCha20-Poly1305``, ``default``."""
    name = "default" if cipher is None or cipher is pd.NA else CIPHERS.get(str(cipher),
                                                                         str(cipher))
    return f"{name} (no AES-NI)" if _bool(aes_hw) is False else name


def _pair_order(table: pd.DataFrame) -> list[str]:
    """QUIC pairs first (by name), TCP/TLS last, as in the paper's figures."""
    stack = dict(zip(table["pair"], table["stack"]))
    return sorted(stack, key=lambda pair: (stack[pair] == "TCP/TLS", pair))


def crypto(frame: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
           ) -> tuple[pd.DataFrame, Figure]:
    """Goodput per pair and crypto mode, QUIC and TCP/TLS side by side.

    The mode is the cipher asked for (column ``cipher``, else the ``params.cipher`` axis)
    and, with a ``params.aes_hw`` axis, whether AES hardware acceleration was allowed. Per
    pair and mode: :func:`~interop_runner.analysis.theories.stats.cell_stats` of the goodput, the
    cipher seen on the wire most often (``wire_cipher``, handshake monitor) and the requests
    a side could not honour (``unhonoured``), so a mode that did not really run shows.
    """
    title = "Goodput per cipher (Fig. 5)"
    cipher_col = "cipher" if has_values(frame, "cipher") else \
        axis_column(frame, ("params.cipher",), ("cipher",))
    if cipher_col is None or not has_values(frame, "goodput_mbps"):
        return empty(CRYPTO_COLUMNS), no_data(
            "goodput" if cipher_col else "cipher (params.cipher)", title)
    hw_col = axis_column(frame, ("params.aes_hw",), ("aes_hw",))
    if hw_col is None and has_values(frame, "aes_hw"):
        hw_col = "aes_hw"
    data = frame.copy()
    data["cipher_"] = data[cipher_col].astype(object).where(data[cipher_col].notna(), None)
    data["aes_hw_"] = data[hw_col].map(_bool).astype(object) if hw_col else None
    data["mode"] = [cipher_mode(c, h) for c, h in zip(data["cipher_"], data["aes_hw_"])]
    keys = [*PAIR, "mode"]
    table = cell_stats(data, keys, n_boot=n_boot, seed=seed)
    extra = []
    for key, group in data.groupby(keys, sort=True, observed=True):
        unhonoured = sorted({u.strip() for col in ("server_unhonoured", "client_unhonoured")
                             if col in group for v in group[col].dropna() for u in
                             str(v).split(",") if u.strip()})
        extra.append({**dict(zip(keys, key)), "cipher": most_common(group["cipher_"]),
                      "aes_hw": group["aes_hw_"].dropna().iloc[0]
                      if group["aes_hw_"].notna().any() else None,
                      "wire_cipher": most_common(group["wire_cipher"][ok_mask(group)])
                      if "wire_cipher" in group else None,
                      "unhonoured": ", ".join(unhonoured) or None})
    table = table.merge(pd.DataFrame(extra, columns=[*keys, "cipher", "aes_hw", "wire_cipher",
                                                     "unhonoured"]), on=keys, how="left")
    table["pair"] = [pair_label(s, c) for s, c in zip(table["server"], table["client"])]
    table["stack"] = table["server"].map(stack_of)
    table = table.reindex(columns=CRYPTO_COLUMNS)
    fig, (ax,) = figure(size=(8.0, 4.5))
    modes = sorted(dict.fromkeys(table["mode"]), key=lambda m: ("no AES-NI" in m, m))
    grouped_bars(ax, table, "pair", "mode", groups=_pair_order(table), bars=modes)
    ax.set_ylabel("median goodput [Mbit/s]")
    ax.legend(fontsize=8, title="cipher")
    ax.set_title(title)
    return table, fig


def _preset(offload: Any, gso: Any) -> str:
    name = "default" if offload is None or offload is pd.NA else str(offload)
    flag = _bool(gso)
    return name if flag is None else f"{name}, app GSO {'on' if flag else 'off'}"


def _preset_key(preset: str) -> tuple[int, str, bool]:
    head = preset.split(",")[0]
    rank = OFFLOAD_ORDER.index(head) if head in OFFLOAD_ORDER else len(OFFLOAD_ORDER)
    return rank, head, preset.endswith("GSO off")


def offloads(frame: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
             ) -> tuple[pd.DataFrame, Figure]:
    """Goodput per pair and offload preset, with the client's and server's CPU.

    The preset is the ``knobs.offload`` axis (``off``, ``udp-only``, ``all-on``; a per-node
    offload axis also counts), combined with the stacks' own GSO when that varies
    (``params.gso`` axis or the ``gso`` column): ``off, app GSO on``. Per pair and preset:
    :func:`~interop_runner.analysis.theories.stats.cell_stats` of the goodput and the medians of
    ``client_cpu_pct`` and ``server_cpu_pct`` (100 = one core).
    """
    title = "Goodput per offload preset (Fig. 9)"
    column = axis_column(frame, OFFLOAD_PATHS, ("offload",))
    if column is None or not has_values(frame, "goodput_mbps"):
        return empty(OFFLOAD_COLUMNS), no_data(
            "goodput" if column else "an offload preset axis (knobs.offload)", title)
    gso_col = axis_column(frame, ("params.gso",), ("gso",))
    if gso_col is None and "gso" in frame and frame["gso"].dropna().nunique() > 1:
        gso_col = "gso"
    data = frame[frame[column].notna()].copy()  # rows of the sweep only
    data["offload"] = data[column].astype(object)
    data["gso"] = data[gso_col].map(_bool).astype(object) if gso_col else None
    data["preset"] = [_preset(o, g) for o, g in zip(data["offload"], data["gso"])]
    keys = [*PAIR, "preset"]
    table = cell_stats(data, keys, n_boot=n_boot, seed=seed)
    table = table.merge(cell_medians(data, keys, {"client_cpu_pct": "client_cpu_pct",
                                                  "server_cpu_pct": "server_cpu_pct"}),
                        on=keys, how="left")
    settings = data[[*keys, "offload", "gso"]].drop_duplicates(keys)
    table = table.merge(settings, on=keys, how="left")
    table["pair"] = [pair_label(s, c) for s, c in zip(table["server"], table["client"])]
    table["stack"] = table["server"].map(stack_of)
    table = table.reindex(columns=OFFLOAD_COLUMNS)
    presets = sorted(dict.fromkeys(table["preset"]), key=_preset_key)
    fig, (ax, cpu) = figure(2, 1, size=(8.0, 7.0), sharex=True)
    positions = grouped_bars(ax, table, "pair", "preset", groups=_pair_order(table),
                             bars=presets)
    ax.set_ylabel("median goodput [Mbit/s]")
    ax.legend(fontsize=8, title="offloads")
    ax.set_title(title)
    if not (table["client_cpu_pct"].notna().any() or table["server_cpu_pct"].notna().any()):
        no_data_axes(cpu, "CPU utilisation")
    else:
        for role, marker in (("client", "o"), ("server", "s")):
            points = [(positions[(p, s)], v) for p, s, v in
                      zip(table["pair"], table["preset"], table[f"{role}_cpu_pct"])
                      if (p, s) in positions and finite(v)]
            if points:
                cpu.scatter(*zip(*points), marker=marker, label=f"{role} CPU")
        cpu.set_ylabel("median CPU [% of a core]")
        cpu.legend(fontsize=8)
        cpu.grid(alpha=0.3)
    return table, fig
