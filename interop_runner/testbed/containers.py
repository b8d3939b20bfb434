"""Containers a killed runner left on a node, and the cgroups the runner puts them in.

Every container the runner starts carries two labels, the campaign and the node directory
(``remote.docker_engine.LABEL_*``): the engine itself is the journal. A new campaign (after
taking the node's lease) and ``run.py testbed restore`` remove every labelled container of
this node directory (none of theirs exists yet), then the empty cgroups below ``/qir/<node>``.
"""

from __future__ import annotations

from interop_runner.errors import EngineError
from interop_runner.parsers.cgroup import CGROUP_ROOT
from interop_runner.remote.docker_engine import LABEL_CAMPAIGN, LABEL_WORKDIR
from interop_runner.testbed.node import Node

# Remove the cgroups below $0 (every hierarchy below the cgroup mount $1), then its parents up
# to the mount where they are empty (rmdir never removes a cgroup with processes or children).
RMDIRS = ('for d in "$1"/*"$0" "$1$0"; do '
          '[ -d "$d" ] || continue; find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; '
          'p=${d%/*}; while [ "${p##*/}" != cgroup ] && rmdir "$p" 2>/dev/null; do p=${p%/*}; '
          'done; done; exit 0')



def cgroup_root(node_name: str) -> str:
    """The cgroup below which this node's containers go (``/qir/<node>``)."""
    return f"/qir/{node_name}"


def engine_present(node: Node) -> bool:
    """Whether the node has an engine that could hold containers (a unix socket that exists,
    or any other address)."""
    host = node.cfg.docker_host
    if not host.startswith("unix://"):
        return True
    return node.run(["test", "-S", host.removeprefix("unix://")], check=False).ok


def reap_containers(node: Node) -> list[str]:
    """Remove the containers earlier runners left here and their empty cgroups; describe it."""
    if not engine_present(node):
        return []
    engine = node.engine()
    done: list[str] = []
    try:
        found = engine.labelled({LABEL_WORKDIR: node.cfg.workdir})
    except EngineError as exc:
        return [f"could not list containers: {exc}"]
    # Called before this session starts any container: every one found is a leftover (also
    # of this campaign, when it is resumed after its runner was killed).
    for item in found:
        labels = item.get("Labels") or {}
        engine.remove(str(item["Id"]))
        done.append(f"removed container {str(item['Id'])[:12]} ({item.get('Image')}, "
                    f"campaign {labels.get(LABEL_CAMPAIGN)})")
    node.run(["sh", "-c", RMDIRS, cgroup_root(node.name), CGROUP_ROOT], check=False)
    return done
