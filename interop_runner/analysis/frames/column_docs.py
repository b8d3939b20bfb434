"""The columns of the results frame, documented in one generated table (docs/columns.md).

Base columns come from the attempt's record (run.json); monitor columns from the registered
monitors (:mod:`interop_runner.monitors`); a test checks the table against the loaders.
"""

from __future__ import annotations

from interop_runner.analysis.frames.host_columns import HOST_COLUMNS
from interop_runner.analysis.frames.path_columns import PATH_COLUMNS
from interop_runner.analysis.theories.ceilings import CEILING_COLUMNS
from interop_runner.analysis.theories.fairness import FAIRNESS_COLUMNS
from interop_runner.monitors import ROLES, all_columns

# name -> (unit, source, meaning); every key of COLUMNS and the derived columns
BASE_DOCS: dict[str, tuple[str, str, str]] = {
    "campaign": ("", "run.json", "campaign id (<name>_<UTC time>)"),
    "testbed": ("", "run.json", "testbed the attempt ran on"),
    "server": ("", "run.json server.implementation", "server implementation (variant name)"),
    "client": ("", "run.json client.implementation", "client implementation (variant name)"),
    "testcase": ("", "run.json", "test case (goodput)"),
    "repetition": ("", "run.json", "repetition number within its cell"),
    "attempt": ("", "run.json", "attempt number within its repetition (resume adds attempts)"),
    "status": ("", "run.json", "ok, failed, timeout, unsupported, interrupted, crashed"),
    "reason": ("", "run.json", "why an attempt is not ok"),
    "alpn": ("", "run.json", "protocol used: h3, hq-interop, http/1.1 ..."),
    "goodput_mbps": ("Mbit/s (SI)", "run.json", "8 x bytes moved (every stream, connection "
                     "and direction of the workload) / transfer time on the client"),
    "goodput_down_mbps": ("Mbit/s (SI)", "run.json", "the download direction's goodput (NA: "
                          "the workload downloads nothing)"),
    "goodput_up_mbps": ("Mbit/s (SI)", "run.json", "the upload direction's goodput (NA: the "
                        "workload uploads nothing)"),
    "workload": ("", "run.json workload", "the workload's label: its kind, and streams x "
                 "connections when more than one (`upload 4x2`); compare and history keep "
                 "workloads apart"),
    "direction": ("", "run.json workload.kind", "download, upload or bidirectional"),
    "streams": ("", "run.json workload", "concurrent bulk streams per connection"),
    "connections": ("", "run.json workload", "parallel connections of the client"),
    "duration_s": ("s", "run.json", "transfer time, timed on the client node"),
    "file_size": ("bytes", "run.json", "size of the served file"),
    "bytes_received": ("bytes", "run.json", "bytes landed: every transfer of the workload "
                       "(downloads on the client, uploads on the server)"),
    "hash_ok": ("", "run.json", "download's hash equals the served file's"),
    "sha256_expected": ("", "run.json 1-3", "SHA-256 of the served file (older records)"),
    "sha256_received": ("", "run.json 1-3", "SHA-256 of the download (older records)"),
    "hash_algorithm": ("", "run.json", "blake3 or sha256: how the download was verified"),
    "digest_expected": ("hex", "run.json", "digest of the served file"),
    "digest_received": ("hex", "run.json", "digest of the downloaded file"),
    "start_ns": ("ns since the epoch", "run.json (client node clock)", "transfer start"),
    "end_ns": ("ns since the epoch", "run.json (client node clock)", "transfer end"),
    "server_version": ("", "run.json", "server implementation version"),
    "client_version": ("", "run.json", "client implementation version"),
    "server_exit_code": ("", "run.json", "server exit status (NA while it was stopped)"),
    "client_exit_code": ("", "run.json", "client exit status"),
    "server_params": ("", "run.json", "server parameters as JSON"),
    "client_params": ("", "run.json", "client parameters as JSON"),
    "congestion_control": ("", "run.json params", "congestion control asked for"),
    "cipher": ("", "run.json params", "TLS cipher suite asked for"),
    "socket_rcvbuf": ("bytes", "run.json params", "SO_RCVBUF asked for"),
    "socket_sndbuf": ("bytes", "run.json params", "SO_SNDBUF asked for"),
    "gso": ("", "run.json params", "UDP GSO asked for"),
    "gro": ("", "run.json params", "UDP GRO asked for"),
    "ack_ratio": ("", "run.json params", "ACK ratio 1:n asked of the client (the data "
                  "receiver): it acknowledges every n-th ack-eliciting packet"),
    "max_ack_delay": ("ms", "run.json params", "longest the client may hold an ACK, asked for"),
    "flow_control_window": ("bytes", "run.json params", "the client's (the data receiver's) "
                            "fixed connection and stream flow-control window, asked for"),
    "server_cc": ("", "run.json server.effective", "congestion control the server ran"),
    "client_cc": ("", "run.json client.effective", "congestion control the client ran"),
    "server_unhonoured": ("", "run.json", "parameters the server could not honour"),
    "client_unhonoured": ("", "run.json", "parameters the client could not honour"),
    "server_negotiated_cipher": ("", "QIR_NEGOTIATED line", "cipher the server reported"),
    "client_negotiated_cipher": ("", "QIR_NEGOTIATED line", "cipher the client reported"),
    "server_negotiated_cc": ("", "QIR_NEGOTIATED line", "congestion control the server reported"),
    "client_negotiated_cc": ("", "QIR_NEGOTIATED line", "congestion control the client reported"),
    "wire_cipher": ("", "handshake monitor (run.json handshake.selected)",
                    "cipher suite chosen, read from the decrypted Initial packets"),
    "variant": ("", "run.json", "sweep variant id"),
    "axes": ("", "run.json", "the variant's axis values as JSON (also as axis_<name>)"),
    "cell_server": ("", "run.json cell", "server as written in the campaign (A/B cells)"),
    "cell_client": ("", "run.json cell", "client as written in the campaign (A/B cells)"),
    "started_at": ("UTC time", "run.json", "attempt start (management node)"),
    "finished_at": ("UTC time", "run.json", "attempt end (management node)"),
    "schema_version": ("", "run.json", "schema version the record was written with"),
    "path": ("", "loader", "the attempt's directory"),
    **{name: (unit, "run.json host_load, host_busy", meaning)
       for name, (_, unit, meaning) in HOST_COLUMNS.items()},
    **{name: (unit, "run.json path", meaning)
       for name, (_, unit, meaning) in PATH_COLUMNS.items()},
    **{name: (unit, "run.json flows, bottleneck captures", meaning)
       for name, (_, unit, meaning) in FAIRNESS_COLUMNS.items()},
    **{name: (unit, "run.json path, closed form (docs/closed-form.md)", meaning)
       for name, (_, unit, meaning) in CEILING_COLUMNS.items()},
    "monitors_missing": ("", "loader", "<role>.<monitor>: reason, for every monitor value "
                         "that is NA although the monitor was asked for"),
    "link_rate_mbps": ("Mbit/s (SI)", "tc monitor, host facts",
                       "narrowest rate on the path (qdisc limit or NIC speed)"),
    "<server|client>_cpu_mhz": ("MHz", "host facts (lscpu max, else /proc/cpuinfo)",
                                "the node's CPU frequency the cycles estimate used"),
    "<server|client>_cycles_per_byte": (
        "cycles/byte", "cpu_s_per_gib, host facts",
        "CPU cost per byte delivered in CPU cycles, estimated as cpu_s x frequency / "
        "bytes_received (not counted: see cycles_basis)"),
    "cycles_basis": ("", "analysis/frames/cpu_cost.py",
                     "how cycles_per_byte was obtained (today always estimated from the "
                     "frequency, and whether the node has a hardware cycle counter), and why "
                     "a side's value is NA although its CPU cost was measured"),
    "client_ack_ratio_measured": (
        "datagrams/datagram", "nstat client_udp_out_datagrams / client_udp_in_datagrams",
        "the client's datagrams sent per datagram received: about 1/n at an ACK ratio of 1:n "
        "(exact with gso and gro off: a GRO/GSO datagram holds several packets)"),
    "ack_ratio_basis": ("", "analysis/frames/ack_ratio.py",
                        "how client_ack_ratio_measured was obtained, or why it is NA"),
    "bottleneck": ("", "diagnosis", "label of what limited the attempt (docs/monitors.md)"),
    "bottleneck_reason": ("", "diagnosis", "the evidence for the label"),
    "axis_<name>": ("as configured", "run.json axes", "one column per sweep axis"),
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "-"


def column_rows() -> list[tuple[str, str, str, str, str]]:
    """(name, unit, source, monitor, meaning) for every column of the frame."""
    rows = [(name, *BASE_DOCS[name][:2], "-", BASE_DOCS[name][2]) for name in BASE_DOCS]
    for monitor, column in all_columns():
        roles = "|".join(r for r in ROLES if r in monitor.roles)
        name = f"<{roles}>_{column.name}" if "|" in roles else f"{roles}_{column.name}"
        rows.append((name, column.unit, column.source, monitor.name, column.description))
    return rows


def columns_markdown() -> str:
    """docs/columns.md: the generated table (``python -m
    interop_runner.analysis.frames.column_docs``)."""
    lines = [
        "# Columns of the results frame",
        "",
        "Generated by `python -m interop_runner.analysis.frames.column_docs > docs/columns.md`; "
        "a test fails when it is stale.",
        "",
        "`load_results` (and `load_qir10g` for predecessor trees) gives one row per attempt. "
        "Every column of a monitor the loaded campaigns ran exists, NA where the tool produced "
        "nothing, with the reason in `monitors_missing`. `<server|client>_` columns exist "
        "once per role. Families (`nic_<counter>`, `nstat_<counter>`) have one column per "
        "counter any loaded attempt reported. Predecessor trees add `experiment`, "
        "`qir_*`, `<role>_node` and `<role>_param_<name>` (docs/qir10g.md).",
        "",
        "| column | unit | source | monitor | meaning |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in column_rows()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(columns_markdown(), end="")
