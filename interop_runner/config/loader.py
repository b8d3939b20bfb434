"""Reading a campaign and its testbed files: YAML 1.2 read, ``--set`` applied, the models
validated, then what the models cannot check alone (the registry's names and parameters, every
sweep value and combination, each variant's path, the testbeds' ports and router, the SSH
files of real hosts). Every problem is one line (ConfigError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from interop_runner.config.campaign import CampaignConfig, variant_configs
from interop_runner.config.implementations import (
    ImplementationMeta,
    load_registry,
)
from interop_runner.config.messages import format_errors
from interop_runner.config.overrides import apply_overrides
from interop_runner.config.registry_check import check_implementations
from interop_runner.config.sweep import Sweep, Variant, apply, variants
from interop_runner.config.testbed import SSHConfig, TestbedConfig
from interop_runner.config.written import (
    WRITTEN,
)
from interop_runner.config.yaml12 import read_config_yaml
from interop_runner.errors import ConfigError, RegistryError


def load_testbed(path: Path | str) -> TestbedConfig:
    """Read and validate a testbed file."""
    path = Path(path)
    data = read_config_yaml(path)
    try:
        return TestbedConfig.model_validate(data, context=WRITTEN)
    except ValidationError as exc:
        raise ConfigError(format_errors(str(path), exc, TestbedConfig)) from None


def _check_sweep(source: str, data: dict[str, Any], cfg: CampaignConfig,
                 registry: dict[str, ImplementationMeta]) -> list[str]:
    """Validate every axis value on its own, so an error names the axis and the value, then
    (when those pass) every combination the sweep makes, named by its values."""
    errors: list[str] = []
    for i, axis in enumerate(cfg.sweep.axes):
        for j, value in enumerate(axis.values):
            single = cfg.sweep.model_copy(update={"axes": [axis]})
            where = f"{source}: sweep.axes[{i}].values[{j}] ({axis.path}={value!r})"
            errors += _check_variant(where, data, single, Variant("", ((axis.label, value),)),
                                     registry)
    labels = [axis.label for axis in cfg.sweep.axes]
    for label in {x for x in labels if labels.count(x) > 1}:
        errors.append(f"{source}: sweep.axes: two axes are named {label!r}; give one a `name`")
    if errors or len(cfg.sweep.axes) < 2:
        return errors
    for variant in variants(cfg.sweep):
        named = ", ".join(f"{axis.path}={value!r}"
                          for axis, (_, value) in zip(cfg.sweep.axes, variant.values))
        errors += _check_variant(f"{source}: sweep ({named})", data, cfg.sweep, variant,
                                 registry, keep_key=True)[:1]  # one line per combination
    return errors


def _check_variant(where: str, data: dict[str, Any], sweep: Sweep, variant: Variant,
                   registry: dict[str, ImplementationMeta], keep_key: bool = False
                   ) -> list[str]:
    """The problems of one variant's config, each ``where: message`` (``where: key:
    message`` with ``keep_key``)."""
    try:
        vcfg = CampaignConfig.model_validate(apply(data, sweep, variant), context=WRITTEN)
    except ValidationError as exc:
        lines = format_errors("-", exc, CampaignConfig)  # "-: key: message"
    except ValueError as exc:  # apply: an axis indexes a list past its end
        return [f"{where}: {exc}"]
    else:
        lines = check_implementations("-", vcfg, registry)
    return [f"{where}: {line.split(': ', 1 if keep_key else 2)[-1]}" for line in lines]


def _absolute_trace(path: Path, data: dict[str, Any], cfg: CampaignConfig
                    ) -> tuple[dict[str, Any], CampaignConfig]:
    """A relative ``path.trace`` is relative to the campaign file: made absolute, so the
    stored config names the file that was used."""
    if cfg.path is None or cfg.path.trace is None or Path(cfg.path.trace).is_absolute():
        return data, cfg
    trace = str((path.parent / cfg.path.trace).resolve())
    data = {**data, "path": {**data["path"], "trace": trace}}
    return data, cfg.model_copy(update={"path": cfg.path.model_copy(update={"trace": trace})})


def _check_paths(source: str, cfg: CampaignConfig) -> list[str]:
    """Each variant's path resolves: its trace exists and parses, its link buffers hold a
    packet (what the models cannot check on their own)."""
    errors: list[str] = []
    for variant, vcfg in variant_configs(cfg):
        if vcfg.path is None:
            continue
        try:
            vcfg.path.resolved()
        except ValueError as exc:
            where = f" (variant {variant.id})" if variant.id else ""
            errors.append(f"{source}: path{where}: {exc}")
    return sorted(set(errors + _check_flow_links(source, cfg)))


def _check_flow_links(source: str, cfg: CampaignConfig) -> list[str]:
    """A flow pinned to a link (or split over both) needs a path with two links."""
    errors: list[str] = []
    for variant, vcfg in variant_configs(cfg):
        two_links = vcfg.path is not None and vcfg.path.links is not None
        for i, flow in enumerate(vcfg.flows or []):
            if flow.link is not None and not two_links:
                where = f" (variant {variant.id})" if variant.id else ""
                errors.append(f"{source}: flows[{i}].link{where}: link {flow.link} needs a "
                              "path with two links (path.links)")
    return errors



def load_campaign(path: Path | str) -> tuple[CampaignConfig, TestbedConfig]:
    """Read and validate a campaign file and its (first) testbed file.

    The testbed path is resolved relative to the campaign file. Raises ConfigError.
    """
    cfg, testbeds = load_campaign_testbeds(path)
    return cfg, testbeds[0]


def load_campaign_testbeds(path: Path | str, overrides: list[str] | None = None
                           ) -> tuple[CampaignConfig, list[TestbedConfig]]:
    """Read and validate a campaign file (with ``--set`` ``overrides``, see
    :func:`apply_overrides`) and every testbed file it names."""
    path = Path(path)
    data = apply_overrides(read_config_yaml(path), overrides or [], str(path))
    try:
        cfg = CampaignConfig.model_validate(data, context=WRITTEN)
    except ValidationError as exc:
        raise ConfigError(format_errors(str(path), exc, CampaignConfig)) from None
    try:
        registry = load_registry()
    except RegistryError as exc:
        raise ConfigError([str(exc)]) from None
    data, cfg = _absolute_trace(path, data, cfg)
    errors = check_implementations(str(path), cfg, registry)
    errors += _check_sweep(str(path), data, cfg, registry)
    errors += [] if errors else _check_paths(str(path), cfg)  # needs every variant valid
    key = "testbed" if cfg.testbed is not None else "testbeds"
    paths = [resolve_testbed_path(path, f) for f in cfg.testbed_files()]
    for i, testbed_path in enumerate(paths):
        where = key if key == "testbed" else f"testbeds[{i}]"
        if not testbed_path.is_file():
            errors.append(f"{path}: {where}: file not found: {testbed_path}")
    if errors:
        raise ConfigError(errors)
    testbeds = [load_testbed(p) for p in paths]
    names = [t.name for t in testbeds]
    for name in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"{path}: testbeds: two testbeds are named {name!r}")
    errors += [f"{path}: {line}" for t, f in zip(testbeds, cfg.testbed_files())
               for line in _testbed_problems(cfg, t, f)]
    if len(testbeds) > 1 and sum(t.local for t in testbeds) > 1 and any(
            v.side_knobs(r).rmem or v.side_knobs(r).wmem
            for _, v in variant_configs(cfg) for r in ("server", "client")):
        errors.append(f"{path}: testbeds: local testbeds share the host's net.core sysctls, so "
                      "rmem/wmem knobs cannot be used with more than one of them")
    if errors:
        raise ConfigError(errors)
    return cfg, testbeds


def _testbed_problems(cfg: CampaignConfig, testbed: TestbedConfig, file: str) -> list[str]:
    """What a campaign asks of a testbed that it cannot do, found before anything runs."""
    problems = []
    port = testbed.port or cfg.port
    last = port + max(len(cfg.flows or []), 1) - 1
    clash = [f"{name} ({node.ssh.port})" for name, node in testbed.endpoint_nodes()
             if port <= node.ssh.port <= last]
    if clash:
        ports = f"ports {port}..{last}" if last > port else f"port {port}"
        problems.append(f"port: the measurement's {ports} would take the SSH port of node "
                        f"{', '.join(clash)} (testbed {file}): choose another `port`")
    if testbed.router() is None and any(
            v.path is not None and v.path.record_packets for _, v in variant_configs(cfg)):
        problems.append(f"path.record_packets: testbed {file} has no router, where the "
                        "bottleneck's packets are captured")
    return problems


def resolve_testbed_path(config_path: Path, testbed_file: str) -> Path:
    """Path of a testbed file named in a campaign (relative paths: relative to the config)."""
    candidate = Path(testbed_file).expanduser()
    return candidate if candidate.is_absolute() else (config_path.parent / candidate)


def check_ssh_files(config_path: Path, cfg: CampaignConfig,
                    testbeds: list[TestbedConfig]) -> None:
    """Raise ConfigError naming every SSH key / known_hosts file of a real-host testbed that is
    missing on this machine (a local testbed creates its own with `testbed up`)."""
    errors: list[str] = []
    for file, testbed in zip(cfg.testbed_files(), testbeds):
        if testbed.local:
            continue
        source = resolve_testbed_path(config_path, file)
        for name, node in testbed.nodes.items():
            ssh: SSHConfig | None = node.ssh
            where = f"nodes.{name}.ssh"
            while ssh is not None:
                for key in ("key", "known_hosts"):
                    value = getattr(ssh, key)
                    if key == "known_hosts" and ssh.trust_on_first_use:
                        continue  # created on first use
                    if value is not None and not Path(value).expanduser().is_file():
                        errors.append(f"{source}: {where}.{key}: file not found: "
                                      f"{Path(value).expanduser()}")
                ssh, where = ssh.jump, where + ".jump"
    if errors:
        raise ConfigError(errors)
