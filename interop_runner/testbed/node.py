"""A measurement node as the runner sees it: its executor, its directories, its preparation.

Directories on a node (all below the node's own ``workdir`` and ``tmpdir``, so two nodes on one
machine never share files)::

    <workdir>/implementations/<name>/   uploaded scripts
    <workdir>/setup/                    SETUP_DIR: builds, cached across campaigns
    <workdir>/runs/<campaign-id>/...    per-attempt LOGS, fetched then removed
    <tmpdir>/files/                     server: generated files kept between campaigns
    <tmpdir>/<campaign-id>/www          server: a hard link to the generated file (tmpfs)
    <tmpdir>/<campaign-id>/certs        certificate and key / CA
    <tmpdir>/<campaign-id>/downloads    client: downloaded files
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from interop_runner.config.implementations import ImplementationMeta
from interop_runner.config.testbed import NodeConfig, SSHConfig
from interop_runner.errors import ExecutorError, PreflightError, SetupError
from interop_runner.parsers.hostfacts import split_sections, summarize_facts
from interop_runner.remote.docker_engine import Engine
from interop_runner.remote.executor import CommandFailed, Executor, LocalExecutor, Result
from interop_runner.remote.lease import Lease, holder, owner_line
from interop_runner.remote.ssh import SSHExecutor, SSHTarget
from interop_runner.testbed.hostfacts import FACTS_SCRIPT
from interop_runner.units import format_iec

REQUIRED_TOOLS = ("bash", "sha256sum", "stat", "ss", "head", "df", "env", "setsid", "openssl", "ps",
                  "find", "shred")
# what a router needs (pos_scripts/check-testbed.sh checks them): the runner's lease and
# process groups (bash, flock, setsid) and the emulated path (ip, tc, iptables, ethtool, sysctl)
ROUTER_TOOLS = ("bash", "flock", "setsid", "ip", "tc", "iptables", "ethtool", "sysctl")


SETUP_TAIL_LINES = 30
# the names QIR images give the server (mapped to its address inside their containers)
QIR_SERVER_NAMES = "DNS:server,DNS:server4,DNS:server6,DNS:server46"

# Never copied into the results: private keys (by name, or any text file holding a PEM private
# key), and TLS key logs unless the campaign asks for them (`keylog: true`). Key log names as
# report.KEYLOG_NAME, so what the report looks for is what is held back here.
PRIVATE_KEY_NAME = re.compile(r"\.(key|p12|pfx)$|(^|[-_.])priv(ate)?[-_.]?key|key\.pem$",
                              re.IGNORECASE)
KEYLOG_NAME = re.compile(r"^keys\.log$|keylog|sslkey", re.IGNORECASE)
PRIVATE_DIR_MODE = 0o700
# one round trip: the regular files below $0, then those holding a PEM private key
_LIST_FILES = ('cd "$0" 2>/dev/null || exit 0; find . -type f -printf "%P\\n"; '
               'echo "--private--"; grep -rlI -e "PRIVATE KEY-----" . 2>/dev/null; exit 0')


def ssh_target(cfg: SSHConfig) -> SSHTarget:
    """Translate the config model into the executor's SSH target."""
    return SSHTarget(
        host=cfg.host, port=cfg.port, user=cfg.user, key=cfg.key, known_hosts=cfg.known_hosts,
        jump=ssh_target(cfg.jump) if cfg.jump else None, connect_timeout=cfg.connect_timeout,
        trust_on_first_use=cfg.trust_on_first_use,
    )


# A campaign's scratch directory names the node directory (whose lease the campaign holds) in
# this file: only such directories are ever removed as stale; one kept on purpose
# (keep_files) holds the second file and stays.
OWNER_FILE = ".qir-owner"
KEPT_MARKER = ".qir-kept"

# $1 own campaign id, $2 owner (the workdir), $3 owner file, $4 kept marker, $5 tmpdir,
# $6 workdir/runs. Only names shaped like campaign ids (<name>_<UTC stamp>[-k]) are touched;
# prints each removed path.
_STALE_DIRS = r"""
own=$1 owner=$2 owner_file=$3 kept=$4
stamp='_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]Z'
stale() {
  [ -d "$1" ] && [ ! -L "$1" ] && [ "${1##*/}" != "$own" ] || return 1
  case "${1##*/}" in *$stamp|*$stamp-*) return 0 ;; *) return 1 ;; esac
}
for dir in "$5"/*; do
  stale "$dir" && [ ! -e "$dir/$kept" ] || continue
  [ "$(cat "$dir/$owner_file" 2>/dev/null)" = "$owner" ] || continue
  rm -rf -- "$dir" && printf '%s\n' "$dir"
done
for dir in "$6"/*; do
  stale "$dir" || continue
  rm -rf -- "$dir" && printf '%s\n' "$dir"
done
"""

# $0 the scratch directory, $1 the owner file's name, $2 its content (the workdir)
_CLAIM_SCRATCH = 'mkdir -p "$0" && printf \'%s\\n\' "$2" > "$0/$1"'

@dataclass
class Node:
    """One node of the testbed during a campaign."""

    name: str
    cfg: NodeConfig
    executor: Executor
    campaign_id: str
    command_timeout: float = 120.0
    facts: dict[str, Any] = field(default_factory=dict)
    lease: Lease | None = None
    _engine: Engine | None = field(default=None, repr=False)

    @classmethod
    def connect(cls, name: str, cfg: NodeConfig, campaign_id: str,
                command_timeout: float = 120.0) -> "Node":
        """Open the node's persistent SSH connection (process journal: ``<workdir>/procs``)."""
        executor = SSHExecutor(name, ssh_target(cfg.ssh))
        executor.proc_journal, executor.proc_tag = f"{cfg.workdir}/procs", campaign_id
        return cls(name, cfg, executor, campaign_id, command_timeout)

    @classmethod
    def local(cls, name: str, role: Literal["server", "client"], base: Path | str,
              campaign_id: str, *, ip: str = "127.0.0.1", interface: str = "lo",
              command_timeout: float = 120.0) -> "Node":
        """A node on this machine, driven by a :class:`LocalExecutor` (no SSH, no root): its
        workdir and tmpdir are ``<base>/<name>/work`` and ``<base>/<name>/tmp``, its process
        journal as on a real node. For tests of the run path."""
        root = Path(base).resolve() / name
        cfg = NodeConfig(role=role, ssh=SSHConfig(host="localhost"), interface=interface,
                         ip=ip, workdir=str(root / "work"), tmpdir=str(root / "tmp"))
        executor = LocalExecutor(name)
        executor.proc_journal, executor.proc_tag = f"{cfg.workdir}/procs", campaign_id
        return cls(name, cfg, executor, campaign_id, command_timeout)

    # -- paths ---------------------------------------------------------------------------------
    @property
    def impl_root(self) -> str:
        return f"{self.cfg.workdir}/implementations"

    @property
    def setup_dir(self) -> str:
        return f"{self.cfg.workdir}/setup"

    @property
    def runs_dir(self) -> str:
        return f"{self.cfg.workdir}/runs/{self.campaign_id}"

    @property
    def scratch(self) -> str:
        return f"{self.cfg.tmpdir}/{self.campaign_id}"

    @property
    def www(self) -> str:
        return f"{self.scratch}/www"

    @property
    def certs(self) -> str:
        return f"{self.scratch}/certs"

    @property
    def downloads(self) -> str:
        return f"{self.scratch}/downloads"

    def impl_dir(self, impl: str) -> str:
        return f"{self.impl_root}/{impl}"

    # -- helpers -------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], timeout: float | None = None, *,
            env: Mapping[str, str] | None = None, cwd: str | None = None,
            check: bool = True) -> Result:
        """Shorthand for ``executor.run`` with the node's default command timeout."""
        return self.executor.run(argv, timeout=timeout or self.command_timeout, env=env,
                                 cwd=cwd, check=check)

    def preflight(self, need_bytes: int, where: str, tools: Sequence[str] = ()) -> None:
        """Check tools (the required ones and ``tools``) and free space in ``where`` (created
        if missing)."""
        missing = self.executor.missing_tools((*REQUIRED_TOOLS, *tools), self.command_timeout)
        if missing:
            raise PreflightError(f"{self.name}: missing tools: {', '.join(missing)}")
        self.run(["mkdir", "-p", where, self.cfg.workdir])
        self.require_space(where, need_bytes, "the campaign")

    def require_space(self, where: str, need_bytes: int, what: str) -> None:
        """PreflightError (one line naming this node and ``where``) unless ``where`` has
        ``need_bytes`` free for ``what``."""
        avail = int(self.run(["df", "-B1", "--output=avail", where]).stdout.split()[-1])
        if avail < need_bytes:
            raise PreflightError(
                f"{self.name}: {where} has {format_iec(avail)} free, {what} needs "
                f"{format_iec(need_bytes)} (lower file_size or free space)")

    def collect_facts(self, raw_dir: Path | None = None) -> dict[str, Any]:
        """Host facts (CPU, NUMA, NIC, offloads, rings, IRQs, sysctls) in one round trip.

        The raw text of every section is written to ``raw_dir/<section>.txt`` when given.
        """
        out = self.run(["sh", "-c", FACTS_SCRIPT, "facts", self.cfg.interface]).stdout
        sections = split_sections(out)
        if raw_dir is not None:
            raw_dir.mkdir(parents=True, exist_ok=True)
            for name, text in sections.items():
                (raw_dir / f"{name}.txt").write_text(text + "\n")
        self.facts = summarize_facts(sections)
        return self.facts

    def setup_dir_for(self, meta: ImplementationMeta) -> str:
        """SETUP_DIR of an implementation: shared, or a variant's own (its own build cache)."""
        if meta.variant is None:
            return self.setup_dir
        return f"{self.cfg.workdir}/setup-variants/{meta.name}"

    def variant_env(self, meta: ImplementationMeta, source_label: str | None = None
                    ) -> dict[str, str]:
        """What a variant's ``setup``/``version`` scripts get besides the contract."""
        spec = meta.variant
        if spec is None:
            return {}
        env = dict(spec.build_env)
        if spec.version:
            env["QIR_VARIANT_VERSION"] = spec.version
        if spec.source or spec.archive:  # a tree, or a release archive unpacked as one
            env["QIR_VARIANT_SOURCE"] = f"{self.impl_dir(meta.name)}/variant-src"
            env["QIR_VARIANT_SOURCE_ID"] = source_label or "source"
        return env

    def install(self, meta: ImplementationMeta, timeout: float, source: Path | None = None,
                source_label: str | None = None,
                extra_env: Mapping[str, str] | None = None, strip_top: bool = False) -> str | None:
        """Upload an implementation, run its ``setup`` (cached by the script), return version.

        A variant gets its own folder and SETUP_DIR; ``source`` (a tar of the library's source
        tree) is unpacked to ``<impl dir>/variant-src`` (``strip_top``: without the archive's
        one top-level directory, as in an upstream release archive). ``extra_env`` goes to
        ``setup`` and ``version`` (e.g. QIR_SOURCES, where the upstream archives are on the
        node).
        """
        target = self.impl_dir(meta.name)
        for folder, local in meta.shared_dirs().items():
            self.run(["rm", "-rf", f"{self.impl_root}/{folder}"])
            self.executor.put_dir(local, f"{self.impl_root}/{folder}")
        self.run(["rm", "-rf", target])
        self.executor.put_dir(meta.path, target)
        if source is not None:
            self.run(["mkdir", "-p", f"{target}/variant-src"])
            self.executor.put(source, f"{target}/variant-src.tar")
            strip = ["--strip-components=1"] if strip_top else []
            self.run(["tar", "-xf", f"{target}/variant-src.tar", "-C", f"{target}/variant-src",
                      *strip], timeout=600)
            self.run(["rm", "-f", f"{target}/variant-src.tar"])
        setup_dir = self.setup_dir_for(meta)
        env = {"ROLE": self.cfg.role, "SETUP_DIR": setup_dir,
               **self.variant_env(meta, source_label), **(extra_env or {})}
        self.run(["mkdir", "-p", setup_dir])
        try:
            self.run([f"{target}/setup"], timeout=timeout, env=env, cwd=target)
        except CommandFailed as exc:
            out = [ln for ln in (exc.result.stdout + "\n" + exc.result.stderr).splitlines()
                   if ln.strip()]
            tail = "\n".join(out[-SETUP_TAIL_LINES:])
            last = out[-1].strip() if out else "no output"
            raise SetupError(f"{self.name}: setup of {meta.name} failed (exit "
                             f"{exc.result.exit_code}): {last}", tail) from None
        if meta.has_script("version"):
            res = self.run([f"{target}/version"], env=env, cwd=target, check=False)
            if res.ok and res.stdout.strip():
                return res.stdout.strip().splitlines()[0]
        return None

    def upload_cached(self, local: Path, sha256: str, remote_dir: str) -> str:
        """Copy a management-side file into ``remote_dir`` on the node, unless the node holds
        a file of that name with that SHA-256 already; return its remote path. The copy goes
        to a temporary name first, so an interrupted upload never looks complete."""
        remote = f"{remote_dir}/{local.name}"
        self.run(["mkdir", "-p", remote_dir])
        have = self.run(["sh", "-c", '[ -f "$0" ] && sha256sum -- "$0" || true', remote],
                        timeout=600).stdout.split()
        if not have or have[0] != sha256:
            self.executor.put(local, f"{remote}.part")
            self.run(["mv", "-f", "--", f"{remote}.part", remote])
        return remote

    def script_env(self, meta: ImplementationMeta, base: Mapping[str, str],
                   params: Mapping[str, object]) -> dict[str, str]:
        """Contract environment for one script call on this node."""
        return {**base, "ROLE": self.cfg.role, "SETUP_DIR": self.setup_dir_for(meta),
                **meta.param_env(dict(params))}

    def make_certificate(self, ip: str) -> bytes:
        """Create a self-signed certificate for ``ip``; return the PEM certificate."""
        self.run(["mkdir", "-p", self.certs])
        self.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj", "/CN=qir",
                  "-addext", f"subjectAltName=IP:{ip},{QIR_SERVER_NAMES}",
                  "-keyout", f"{self.certs}/priv.key",
                  "-out", f"{self.certs}/cert.pem"])
        return self.executor.read_bytes(f"{self.certs}/cert.pem")

    def install_ca(self, pem: bytes) -> None:
        """Place the server certificate as ``ca.pem`` for the client to verify against."""
        self.run(["mkdir", "-p", self.certs])
        self.executor.write_bytes(f"{self.certs}/ca.pem", pem)

    @property
    def trusted_host_keys(self) -> list[dict[str, str]]:
        """Host keys this node's connection accepted on first use (empty: none)."""
        return list(getattr(self.executor, "trusted_host_keys", []))

    def fetch_dir(self, remote: str, local: Path, keylogs: bool = False,
                  skipped: list[str] | None = None) -> list[str]:
        """Copy the regular files of a remote directory tree into ``local``; return their names.

        Directories are created 0700 and files 0600. Private keys are never copied, TLS key
        logs only with ``keylogs``; the names of the files held back are appended to
        ``skipped`` (they go with the remote directory when it is removed).
        """
        res = self.run(["sh", "-c", _LIST_FILES, remote], check=False)
        found, _, private = res.stdout.partition("--private--\n") if res.ok else ("", "", "")
        secret = {n.removeprefix("./") for n in private.splitlines() if n}
        names = []
        for rel in (n for n in found.splitlines() if n):
            base = rel.rsplit("/", 1)[-1]
            if rel in secret or PRIVATE_KEY_NAME.search(base) or \
                    (not keylogs and KEYLOG_NAME.search(base)):
                if skipped is not None:
                    skipped.append(rel)
                continue
            dest = local / rel
            for directory in reversed([local / p for p in Path(rel).parents]):
                if not directory.is_dir():
                    directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True)
                    directory.chmod(PRIVATE_DIR_MODE)
            self.executor.get(f"{remote}/{rel}", dest)
            names.append(rel)
        return names

    def reap_leftovers(self) -> list[str]:
        """Kill what a killed earlier runner left running here (its process journal) and
        remove that campaign's scratch and run directories; describe what was done."""
        killed = self.executor.reap_journal(self.command_timeout)
        tags = sorted({tag for _, tag in killed if tag and "/" not in tag and tag != ".."})
        paths = [p for tag in tags if tag != self.campaign_id
                 for p in (f"{self.cfg.tmpdir}/{tag}", f"{self.cfg.workdir}/runs/{tag}")]
        if paths:
            self.run(["rm", "-rf", "--", *paths])
        done = [f"killed process group {pg} (campaign {tag})" for pg, tag in killed]
        return done + self._remove_stale_dirs()

    def _remove_stale_dirs(self) -> list[str]:
        """Remove the scratch and run directories of campaigns whose runner died without
        cleaning up (SIGKILL, a crash, a power cut), also when none of their processes was
        left running. Called under this node's lease, so no other runner owns them; a
        scratch directory kept on purpose (``keep_files``) carries a marker and stays."""
        res = self.run(["sh", "-c", _STALE_DIRS, "stale", self.campaign_id, self.cfg.workdir,
                        OWNER_FILE, KEPT_MARKER, self.cfg.tmpdir, f"{self.cfg.workdir}/runs"],
                       check=False)
        return [f"removed {path} (left by a runner that did not end cleanly)"
                for path in res.stdout.splitlines() if path.strip()]

    def claim_scratch(self) -> None:
        """Create this campaign's scratch directory, naming the node directory whose lease
        the campaign holds (what lets a later campaign remove it if this runner dies)."""
        self.run(["sh", "-c", _CLAIM_SCRATCH, self.scratch, OWNER_FILE, self.cfg.workdir])

    def cleanup(self, keep_files: bool) -> None:
        """Remove this campaign's scratch files (unless kept: then marked as kept) and run
        directories."""
        paths = [self.runs_dir] + ([] if keep_files else [self.scratch])
        if keep_files:
            self.run(["sh", "-c", '[ ! -d "$0" ] || : > "$0/$1"', self.scratch, KEPT_MARKER],
                     check=False)
        try:
            self.run(["rm", "-rf", "--", *paths])
            # Directories the campaign created stay only if something else lives in them.
            self.run(["sh", "-c", 'for d in "$@"; do rmdir "$d" 2>/dev/null || true; done',
                      "rmdir", f"{self.cfg.workdir}/runs", self.cfg.tmpdir])
        except ExecutorError:
            pass

    def take_lease(self, wait: float = 10.0) -> None:
        """Hold this node directory for this runner until :meth:`close` (lease.NodeBusy when
        another runner holds it); taken again after a reconnect."""
        self.lease = Lease(self.executor, self.cfg.workdir, owner_line(self.campaign_id))
        self.lease.take(wait)
        if isinstance(self.executor, SSHExecutor):
            self.executor.after_reconnect.append(self.lease.retake)

    def lease_holder(self) -> str | None:
        """Who holds this node directory's lease (None: free)."""
        return holder(self.executor, self.cfg.workdir, self.command_timeout)

    def engine(self) -> Engine:
        """The node's Docker Engine, driven through this node's connection (opened on first
        use; ``cfg.docker_host``)."""
        if self._engine is None:
            self._engine = Engine(self.name, self.executor, self.cfg.docker_host,
                                  self.command_timeout)
        return self._engine

    def close(self) -> None:
        """Give up the lease and close the connection."""
        if self._engine is not None:
            self._engine.close()
        if self.lease is not None:
            self.lease.release()
        self.executor.close()

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {shlex.quote(self.cfg.ssh.host)})"
