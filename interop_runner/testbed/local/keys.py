"""SSH keys of the local testbed: the management key, the nodes' host keys, the one
authorized_keys file and the strict known_hosts file, all in the layout's state directory."""

from __future__ import annotations

import os
from pathlib import Path

from interop_runner.errors import TestbedError
from interop_runner.testbed.local.host import Host, ensure_dir, write_if_changed
from interop_runner.testbed.local.layout import Layout

MGMT_KEY_COMMENT = "qir-testbed-management"


def ensure_keypair(host: Host, private: Path, comment: str) -> None:
    """Generate an ed25519 key pair without passphrase, or restore a missing ``.pub``."""
    public = private.with_name(private.name + ".pub")
    if private.is_file():
        if public.is_file():
            return
        res = host.run([host.tool("ssh-keygen"), "-y", "-f", str(private)], check=False)
        if res.ok and res.stdout.startswith("ssh-"):
            write_if_changed(public, res.stdout.strip() + f" {comment}\n", 0o600)
            return
    for path in (private, public):
        path.unlink(missing_ok=True)
    host.run([host.tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment,
              "-f", str(private)])
    os.chmod(private, 0o600)
    os.chmod(public, 0o600)


def pubkey_fields(path: Path) -> str:
    """``type base64`` of an OpenSSH public key file (comment dropped)."""
    fields = path.read_text().split()
    if len(fields) < 2:
        raise TestbedError(f"local testbed: {path} is not an OpenSSH public key")
    return f"{fields[0]} {fields[1]}"


def expected_authorized_keys(layout: Layout) -> str:
    """authorized_keys of every node: the management key."""
    return pubkey_fields(layout.mgmt_pubkey) + f" {MGMT_KEY_COMMENT}\n"


def expected_known_hosts(layout: Layout) -> str:
    """known_hosts of the runner: each node's host key at its management address."""
    return "".join(f"{n.mgmt_ip} {pubkey_fields(n.host_pubkey)}\n" for n in layout.nodes)


def ensure_state(host: Host, layout: Layout) -> None:
    """State directory, privsep directory, keys, authorized_keys and known_hosts."""
    ensure_dir(layout.state_dir, 0o700)
    for node in layout.nodes:
        ensure_dir(node.state_dir, 0o700)
    if not layout.privsep_dir.is_dir():
        layout.privsep_dir.mkdir(mode=0o755, parents=True)
    ensure_keypair(host, layout.mgmt_key, MGMT_KEY_COMMENT)
    for node in layout.nodes:
        ensure_keypair(host, node.host_key, f"qir-testbed-{node.name}")
    write_if_changed(layout.authorized_keys, expected_authorized_keys(layout), 0o600)
    write_if_changed(layout.known_hosts, expected_known_hosts(layout), 0o600)


def keys_current(layout: Layout) -> bool:
    """authorized_keys and known_hosts match the keys, and every host key exists."""
    try:
        if (layout.authorized_keys.read_text() != expected_authorized_keys(layout)
                or layout.known_hosts.read_text() != expected_known_hosts(layout)):
            return False
    except (OSError, TestbedError):
        return False
    return all(n.host_key.is_file() for n in layout.nodes)


def keys_present(layout: Layout) -> bool:
    """The management key pair, authorized_keys and known_hosts exist."""
    return all(p.is_file() for p in (layout.mgmt_key, layout.mgmt_pubkey,
                                     layout.authorized_keys, layout.known_hosts))
