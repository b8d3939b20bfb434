"""perf profiles: ``perf script`` text → folded stacks → CPU-time categories (paper §4.4, Fig. 7).

Three steps, each usable on its own:

* :func:`parse_perf_script` streams ``perf script`` output (line by line, never the whole file)
  into :data:`FoldedStacks`, a ``Counter`` of ``comm;root;...;leaf`` → number of samples, the
  "folded" format of Brendan Gregg's ``stackcollapse-perf.pl`` that flame graph tools read.
* :func:`load_rules` reads and validates a versioned rules file (default: ``perf_rules.yml``
  next to this module) mapping function-name patterns to categories.
* :func:`categorize` assigns every sample one category — walking its stack from the LEAF towards
  the root, the first frame that matches a rule decides — and returns the shares.

See ``docs/perf.md`` for the rules format, the recording command lines and measured numbers.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import yaml

from interop_runner.parsers.common import ParseError, excerpt

FoldedStacks: TypeAlias = Counter[str]
"""``comm;frame_root;...;frame_leaf`` → weight (samples by default); see
:func:`parse_perf_script`."""

DEFAULT_RULES_PATH = Path(__file__).with_name("perf_rules.yml")

PACKET_IO = "Packet I/O"
CRYPTO = "Crypto"
CONNECTION_MANAGEMENT = "Connection Management"
FILE_IO = "I/O"
UNCATEGORIZED = "Uncategorized"
IDLE = "Idle"
"""Pseudo-category of idle samples; counted by :func:`category_counts`, never part of shares."""

CATEGORIES: tuple[str, ...] = (PACKET_IO, CRYPTO, CONNECTION_MANAGEMENT, FILE_IO, UNCATEGORIZED)
"""The paper's categories, in Fig. 7 order; ``Uncategorized`` is the fallback."""

RULES_VERSION = 1
_FRAME_CACHE_MAX = 1 << 20


# --------------------------------------------------------------------------------------------
# perf script → folded stacks


def _frame_name(rest: str) -> str:
    """``symbol+0x1f (dso)`` (the part after the address) → frame name for a folded stack."""
    dso = ""
    if rest.endswith(")"):
        if rest.endswith(" (deleted))"):
            cut = rest.rfind(" (", 0, len(rest) - 11)
        else:
            cut = rest.rfind(" (")
        if cut >= 0:
            dso = rest[cut + 2:-1]
            rest = rest[:cut]
    plus = rest.rfind("+0x")
    if plus > 0:
        rest = rest[:plus]
    if rest == "[unknown]" or not rest:
        if dso and dso != "[unknown]":
            base = dso.rsplit("/", 1)[-1]
            if base.endswith(" (deleted)"):
                base = base[:-10]
            return base if base.startswith("[") else f"[{base}]"
        return "[unknown]"
    if ";" in rest:
        rest = rest.replace(";", ":")
    return rest


def _parse_header(line: str) -> tuple[str, int, int, list[str]] | None:
    """``comm pid[/tid] [cpu] time: [period] event: [ip sym (dso)]`` → (comm, pid, period, rest).

    ``rest`` holds the tokens after the event (the sample's own ip/sym/dso when perf recorded
    no call chain). The comm may contain spaces (``rs:main Q:Reg``), so the header is located by
    its time stamp: the first token after the comm that ends in ``:`` and is a decimal number.
    Returns None for lines that are no sample header.
    """
    tokens = line.split()
    n = len(tokens)
    if n >= 4 and tokens[2][0] == "[" and tokens[3][-1] == ":":  # "comm pid [cpu] time:"
        t = 3
    else:
        t = 1
        while t < n:
            tok = tokens[t]
            if tok[-1] == ":" and tok[:-1].replace(".", "", 1).isdecimal():
                break
            t += 1
        else:
            return None
    p = t - 1
    if tokens[p][0] == "[" and tokens[p][-1] == "]":  # the [cpu] field
        p -= 1
    if p < 1:
        return None
    pid_tok = tokens[p]
    slash = pid_tok.find("/")
    pid_s = pid_tok[:slash] if slash >= 0 else pid_tok
    if not pid_s.isdecimal() and not (pid_s[:1] == "-" and pid_s[1:].isdecimal()):
        return None  # perf prints ":-1 -1" for samples of an unknown thread
    if p == 1:
        comm = tokens[0]
    else:
        comm_end = line.find(" " + pid_tok + " ", len(tokens[0]))
        comm = line[:comm_end].strip() if comm_end > 0 else " ".join(tokens[:p])
    period = 1
    e = t + 1
    if e < n and tokens[e].isdecimal():
        period = int(tokens[e])
        e += 1
    # the event name ends with ":" (cycles:, cpu-clock:, cycles:ppp:, sched:sched_switch:)
    if e < n and tokens[e].endswith(":"):
        e += 1
    return comm, int(pid_s), period, tokens[e:]


def parse_perf_script(
    lines: Iterable[str],
    *,
    comm_filter: Callable[[str], bool] | None = None,
    pid_filter: set[int] | None = None,
    weight: Literal["samples", "period"] = "samples",
) -> FoldedStacks:
    """Fold ``perf script`` output (an iterable of lines, e.g. an open file) into stacks.

    A sample is a header line ``comm pid[/tid] [cpu] time: [period] event:`` followed by one
    frame line per stack entry (``addr symbol+off (dso)``, leaf first) and a blank line. Each
    sample adds to the key ``comm;root;...;leaf``: ``+0x..`` offsets are stripped, an unknown
    symbol becomes ``[dso basename]`` (``[libc-2.31.so]``, ``[kernel.kallsyms]``) when the dso
    is known and ``[unknown]`` otherwise, ``;`` inside a symbol becomes ``:``. A sample without
    a call chain (no ``-g``) contributes its one frame from the header line.

    ``weight="samples"`` (default, as in the paper) counts samples; with ``perf record -F``
    perf keeps the rate per busy CPU constant, so samples are proportional to CPU time.
    ``weight="period"`` sums the period field instead (cycles, or ns for ``cpu-clock``).

    ``comm_filter`` keeps samples whose comm it accepts (called once per distinct comm);
    ``pid_filter`` keeps samples whose pid is in the set (the number before ``/`` for
    ``pid/tid`` headers, otherwise the single number perf printed, which is the tid unless
    ``perf script -F`` asked for ``pid``).

    Empty input gives an empty Counter; input with text but not a single sample header raises
    :class:`ParseError`. Lines that are no header inside otherwise valid output are skipped.
    """
    stacks: Counter[str] = Counter()
    frames: list[str] = []
    comm = ""
    value = 0
    active = False  # inside a sample that passes the filters
    by_period = weight == "period"
    comm_ok: dict[str, bool] = {}
    if weight not in ("samples", "period"):
        raise ValueError(f"weight must be 'samples' or 'period', not {weight!r}")

    cache: dict[str, str] = {}  # raw frame line → frame name (few distinct lines)
    n_headers = 0
    first_odd = ""  # first line that is neither header, frame, blank nor comment
    for line in lines:
        c = line[:1]
        header = None
        # call-chain lines start with a tab; a header starts with the comm, which perf
        # right-aligns (leading spaces) when it prints no call chains
        if c == "\t" or (c == " " and (header := _parse_header(line)) is None):
            if active:
                name = cache.get(line)
                if name is None:
                    s = line.strip()
                    if not s:
                        continue
                    sp = s.find(" ")
                    name = "[unknown]" if sp < 0 else _frame_name(s[sp + 1:])
                    if len(cache) >= _FRAME_CACHE_MAX:
                        cache.clear()
                    cache[line] = name
                frames.append(name)
            continue
        if c == "\n" or c == "" or c == "\r":
            if active:
                if frames:
                    frames.reverse()
                    stacks[comm + ";" + ";".join(frames)] += value
                    frames = []
                else:
                    stacks[comm] += value
                active = False
            continue
        if c == "#":
            continue
        # a header line; a sample not closed by a blank line ends here too
        if active:
            if frames:
                frames.reverse()
                stacks[comm + ";" + ";".join(frames)] += value
                frames = []
            else:
                stacks[comm] += value
            active = False
        if header is None:
            header = _parse_header(line)
            if header is None:
                if not n_headers and not first_odd:
                    first_odd = line
                continue
        n_headers += 1
        comm, pid, period, rest_tokens = header
        if comm_filter is not None:
            keep = comm_ok.get(comm)
            if keep is None:
                keep = comm_ok[comm] = comm_filter(comm)
            if not keep:
                continue
        if pid_filter is not None and pid not in pid_filter:
            continue
        active = True
        value = period if by_period else 1
        if len(rest_tokens) >= 2:  # no call chain: "ip sym+off (dso)" on the header line
            frames.append(_frame_name(" ".join(rest_tokens[1:])))
    if active:
        if frames:
            frames.reverse()
            stacks[comm + ";" + ";".join(frames)] += value
        else:
            stacks[comm] += value
    if not n_headers and first_odd:
        raise ParseError(f"not perf script output: {excerpt(first_odd)!r}")
    return stacks


@contextmanager
def open_perf_script(path: str | Path) -> Iterator[Iterator[str]]:
    """Lines of a ``perf script`` text file; ``*.zst`` is streamed through the ``zstd`` CLI.

    Use as ``with open_perf_script(p) as lines: parse_perf_script(lines)``. Undecodable bytes
    (perf prints raw symbol bytes) become U+FFFD.
    """
    path = Path(path)
    if path.suffix != ".zst":
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            yield iter(fh)
        return
    zstd = shutil.which("zstd")
    if zstd is None:
        raise FileNotFoundError(f"{path}: reading .zst needs the 'zstd' program (apt install zstd)")
    proc = subprocess.Popen([zstd, "-dc", "--", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8",
                            errors="replace", bufsize=1 << 20)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield iter(proc.stdout)
    except BaseException:
        proc.kill()
        raise
    finally:
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        rc = proc.wait(timeout=60)
    if rc != 0:
        raise OSError(f"{path}: zstd -dc failed ({rc}): {err.strip()}")


def read_perf_script(
    path: str | Path,
    *,
    comm_filter: Callable[[str], bool] | None = None,
    pid_filter: set[int] | None = None,
    weight: Literal["samples", "period"] = "samples",
) -> FoldedStacks:
    """:func:`parse_perf_script` on a file (plain or ``.zst``)."""
    with open_perf_script(path) as lines:
        return parse_perf_script(lines, comm_filter=comm_filter, pid_filter=pid_filter,
                                 weight=weight)


def split_folded(key: str) -> tuple[str, list[str]]:
    """``comm;root;...;leaf`` → (comm, [root, ..., leaf])."""
    parts = key.split(";")
    return parts[0], parts[1:]


def filter_comm(stacks: FoldedStacks, keep: Callable[[str], bool]) -> FoldedStacks:
    """The stacks whose comm (first element) ``keep`` accepts."""
    return Counter({k: v for k, v in stacks.items() if keep(k.split(";", 1)[0])})


def comm_totals(stacks: FoldedStacks) -> Counter[str]:
    """Samples per comm."""
    out: Counter[str] = Counter()
    for key, value in stacks.items():
        out[key.split(";", 1)[0]] += value
    return out


# --------------------------------------------------------------------------------------------
# rules


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file and the offending rule."""


@dataclass(frozen=True)
class Rule:
    """One pattern → category; ``origin`` tells where it came from (``generic``, ``lsquic``)."""

    category: str
    pattern: str
    origin: str

    @property
    def regex(self) -> str:
        """The pattern as a regular expression (used with ``fullmatch``, case-sensitive)."""
        if self.pattern.startswith("re:"):
            return self.pattern[3:]
        return fnmatch.translate(self.pattern)


@dataclass(frozen=True)
class Rules:
    """A validated rules file. Use :meth:`matcher` (cached) to classify frames."""

    version: int
    idle: tuple[Rule, ...]
    generic: tuple[Rule, ...]
    implementations: Mapping[str, tuple[Rule, ...]]
    source: str = "<rules>"
    _matchers: dict[str | None, _Matcher] = field(default_factory=dict, compare=False,
                                                   repr=False)

    def rules_for(self, implementation: str | None) -> tuple[Rule, ...]:
        """Rules in precedence order: the implementation's own, then generic, then idle."""
        own = self.implementations.get(implementation, ()) if implementation else ()
        return own + self.generic + self.idle

    def matcher(self, implementation: str | None) -> _Matcher:
        """Frame classifier for ``implementation`` (unknown names get the generic rules)."""
        key = implementation if implementation in self.implementations else None
        m = self._matchers.get(key)
        if m is None:
            m = _Matcher(self.rules_for(key))
            self._matchers[key] = m
        return m


class _Matcher:
    """All rules as one alternation (first alternative in precedence order wins), memoised."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self._category: dict[str, str] = {}
        parts = []
        for i, rule in enumerate(rules):
            parts.append(f"(?P<r{i}>(?:{rule.regex}))")
            self._category[f"r{i}"] = rule.category
        self._re = re.compile("|".join(parts)) if parts else None
        self._cache: dict[str, str | None] = {}

    def __call__(self, frame: str) -> str | None:
        """Category (or ``Idle``) of one frame, None if no rule matches."""
        try:
            return self._cache[frame]
        except KeyError:
            pass
        m = self._re.fullmatch(frame) if self._re is not None else None
        cat = self._category[m.lastgroup] if m is not None and m.lastgroup else None
        self._cache[frame] = cat
        return cat


def _rule_list(value: Any, where: str, category: str, source: str) -> tuple[Rule, ...]:
    if category == IDLE:
        pass
    elif category not in CATEGORIES:
        first = value[0] if isinstance(value, list) and value else None
        hint = _hint(category, CATEGORIES)
        raise RulesError(
            f"{source}: {where}: unknown category {category!r}"
            + (f" (rule {first!r})" if first is not None else "")
            + f"; known: {', '.join(CATEGORIES)}{hint}")
    if not isinstance(value, list):
        raise RulesError(f"{source}: {where}.{category}: expected a list of patterns")
    out = []
    origin = where.split(".")[-1]
    for i, pattern in enumerate(value):
        if not isinstance(pattern, str) or not pattern.strip():
            raise RulesError(f"{source}: {where}.{category}[{i}]: a pattern must be a non-empty "
                             f"string, got {pattern!r}")
        rule = Rule(category, pattern, origin)
        try:
            re.compile(rule.regex)
        except re.error as exc:
            raise RulesError(f"{source}: {where}.{category}[{i}]: bad pattern {pattern!r}: "
                             f"{exc}") from None
        out.append(rule)
    return tuple(out)


def _hint(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'X'?)"`` or ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _category_map(value: Any, where: str, source: str) -> tuple[Rule, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise RulesError(f"{source}: {where}: expected a mapping of category → patterns")
    out: list[Rule] = []
    for category, patterns in value.items():
        if not isinstance(category, str):
            raise RulesError(f"{source}: {where}: category names must be strings, "
                             f"got {category!r}")
        if category == IDLE:
            raise RulesError(f"{source}: {where}: {IDLE!r} rules belong in the top-level "
                             "'idle' list")
        out.extend(_rule_list(patterns, where, category, source))
    return tuple(out)


def parse_rules(data: Any, source: str = "<rules>") -> Rules:
    """Validate a loaded rules document (see ``docs/perf.md``); raises :class:`RulesError`."""
    if not isinstance(data, dict):
        raise RulesError(f"{source}: expected a mapping with version, idle, generic, "
                         "implementations")
    allowed = {"version", "idle", "generic", "implementations"}
    for key in data:
        if key not in allowed:
            raise RulesError(f"{source}: unknown key {key!r}{_hint(str(key), allowed)}")
    version = data.get("version")
    if version != RULES_VERSION:
        raise RulesError(f"{source}: version: expected {RULES_VERSION}, got {version!r}")
    idle_list = data.get("idle") or []
    idle = _rule_list(idle_list, "idle", IDLE, source) if idle_list else ()
    generic = _category_map(data.get("generic"), "generic", source)
    impls_raw = data.get("implementations") or {}
    if not isinstance(impls_raw, dict):
        raise RulesError(f"{source}: implementations: expected a mapping name → categories")
    impls: dict[str, tuple[Rule, ...]] = {}
    for name, cats in impls_raw.items():
        impls[str(name)] = _category_map(cats, f"implementations.{name}", source)
    return Rules(version=version, idle=idle, generic=generic, implementations=impls,
                 source=source)


def load_rules(path: str | Path | None = None) -> Rules:
    """Load and validate a rules file (default: the packaged ``perf_rules.yml``)."""
    p = Path(path) if path is not None else DEFAULT_RULES_PATH
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise RulesError(f"{p}: not valid YAML: {exc}") from None
    return parse_rules(data, str(p))


# --------------------------------------------------------------------------------------------
# categories


def classify_stack(frames: list[str], matcher: Callable[[str], str | None]) -> str:
    """Category of one stack (root → leaf): the first matching frame walking from the leaf."""
    for frame in reversed(frames):
        cat = matcher(frame)
        if cat is not None:
            return cat
    return UNCATEGORIZED


def category_counts(stacks: FoldedStacks, rules: Rules,
                    implementation: str | None = None) -> dict[str, int]:
    """Samples per category, including the pseudo-category ``Idle``; zero counts omitted."""
    matcher = rules.matcher(implementation)
    out: Counter[str] = Counter()
    for key, value in stacks.items():
        parts = key.split(";")
        out[classify_stack(parts[1:], matcher)] += value
    return {c: out[c] for c in (*CATEGORIES, IDLE) if out[c]}


def categorize(stacks: FoldedStacks, rules: Rules,
               implementation: str | None = None) -> dict[str, float]:
    """Share of non-idle samples per category (keys in :data:`CATEGORIES` order, sum 1.0).

    Every sample gets the category of the first frame, walking from the leaf to the root, that
    matches a rule (the implementation's rules before the generic ones at each frame); samples
    whose first matching frame is an idle rule are left out, as in the paper's Fig. 7; samples
    no rule matches are ``Uncategorized``. Empty input (or only idle) gives ``{}``.
    """
    counts = category_counts(stacks, rules, implementation)
    counts.pop(IDLE, None)
    total = sum(counts.values())
    if total == 0:
        return {}
    return {c: counts.get(c, 0) / total for c in CATEGORIES}
