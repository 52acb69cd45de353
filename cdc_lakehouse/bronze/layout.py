"""Landing layouts: where a Kafka Connect storage sink puts a topic's files and how it names them.

A `Layout` is a list of path patterns relative to the landing root, with `{topic}`,
`{partition}`, `{offset}` (the file's first record) or `{last_offset}` (its last), `*` and `**`.
Presets name the sinks in use: Confluent's S3 sink (the default:
`topics/<topic>/<partitioner folders>/<topic>+<partition>+<startoffset>.<ext>`, `topics.dir`
configurable), Aiven's (its `file.name.template`, default `<topic>-<partition>-<startoffset>`,
plus `.gz` when compressed) and the Lenses stream-reactor's (`<prefix>/<field>=<value>/.../
<topic>(<partition>_<lastoffset>).<ext>` with PARTITIONBY, `<prefix>/<topic>/<partition>/
<lastoffset>[_<earliest ts>_<latest ts>].<ext>` without). Pure Python: the table registry
validates layouts without Spark; landing.py lists and reads the files.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Formats a sink may write that this reader does not decode: reported, never read as text.
UNREAD_SUFFIXES = (".snappy", ".zst", ".csv", ".csv.gz")

SINKS = ("confluent", "aiven", "lenses", "custom")
AIVEN_DEFAULT_TEMPLATE = "{{topic}}-{{partition}}-{{start_offset}}"
# Aiven's `file.name.template` variables, as the layout pattern's placeholders.
_AIVEN_VARIABLES = {
    "topic": "{topic}",
    "partition": "{partition}",
    "start_offset": "{offset}",
    "timestamp": "*",
    "key": "*",
}


@dataclass(frozen=True)
class Layout:
    """How a sink lays out a topic's files below the landing root.

    patterns: paths relative to the root, `/`-separated; `{topic}` is the topic, `{partition}`
        the Kafka partition, `{offset}` the offset of the file's first record or `{last_offset}`
        that of its last (Lenses names a file after the last offset it holds); `*` is any text
        within one folder or file name, `**` any number of folders. A file matches when its
        whole path does; a trailing `.*` is the extension(s), also matching none.
    """

    sink: str = "confluent"
    patterns: tuple[str, ...] = ("topics/{topic}/**/{topic}+{partition}+{offset}.*",)

    def __post_init__(self) -> None:
        if self.sink not in SINKS:
            raise ValueError(f"layout.sink must be one of {SINKS}, got {self.sink!r}")
        if not self.patterns:
            raise ValueError("a layout needs at least one pattern")
        for pattern in self.patterns:
            if "{topic}" not in pattern:
                raise ValueError(f"layout pattern {pattern!r} must contain {{topic}}")
            if ("{offset}" in pattern) == ("{last_offset}" in pattern):
                raise ValueError(
                    f"layout pattern {pattern!r} needs exactly one of {{offset}}, {{last_offset}}"
                )
            if pattern.startswith("/") or "//" in pattern:
                raise ValueError(f"layout pattern {pattern!r}: relative to the root, no `//`")

    @classmethod
    def from_config(cls, config: str | Mapping[str, Any] | None) -> Layout:
        """A layout from a source's `layout:` setting: a sink name, or a mapping with `sink` and
        its settings:

        - confluent: `topics_dir` (the sink's `topics.dir`, default `topics`);
        - aiven: `prefix` (prepended to the template, e.g. `landing/`) and `file_name_template`
          (the sink's `file.name.template`, default `{{topic}}-{{partition}}-{{start_offset}}`);
        - lenses: `prefix` (the KCQL `INSERT INTO bucket:prefix`, a folder; default none);
        - custom: `patterns` (or `pattern`), in the form `Layout` documents.
        """
        if config is None:
            return cls()
        if isinstance(config, str):
            config = {"sink": config}
        settings = dict(config)
        sink = settings.pop("sink", "confluent")
        known = {
            "confluent": {"topics_dir"},
            "aiven": {"prefix", "file_name_template"},
            # partition_by (the KCQL PARTITIONBY fields) and compression (gzip: files named
            # `.gz`, as the sink names compressed JSON) are for the writer (capture); the reader
            # reads any `<field>=<value>` folders and either extension.
            "lenses": {"prefix", "partition_by", "compression"},
            "custom": {"patterns", "pattern"},
        }.get(sink)
        if known is None:
            raise ValueError(f"layout.sink must be one of {SINKS}, got {sink!r}")
        unknown = set(settings) - known
        if unknown:
            raise ValueError(
                f"layout ({sink}): unknown setting(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        if sink == "confluent":
            topics_dir = str(settings.get("topics_dir", "topics")).strip("/")
            folder = f"{topics_dir}/" if topics_dir else ""
            return cls(sink, (f"{folder}{{topic}}/**/{{topic}}+{{partition}}+{{offset}}.*",))
        if sink == "aiven":
            template = settings.get("file_name_template", AIVEN_DEFAULT_TEMPLATE)
            return cls(sink, (str(settings.get("prefix", "")) + _from_aiven(template) + ".*",))
        if sink == "lenses":
            prefix = str(settings.get("prefix", "")).strip("/")
            folder = f"{prefix}/" if prefix else ""
            return cls(
                sink,
                (
                    # PARTITIONBY: one `<field>=<value>` folder per field, the topic in the name.
                    f"{folder}**/{{topic}}({{partition}}_{{last_offset}}).*",
                    # No PARTITIONBY: `<topic>/<partition>/<offset>`; from version 7.2 the name
                    # also carries the earliest and latest record timestamps.
                    f"{folder}{{topic}}/{{partition}}/{{last_offset}}.*",
                    f"{folder}{{topic}}/{{partition}}/{{last_offset}}_*_*.*",
                ),
            )
        patterns = settings.get("patterns") or settings.get("pattern")
        if isinstance(patterns, str):
            patterns = [patterns]
        if not patterns:
            raise ValueError("layout (custom): set `patterns`")
        return cls(sink, tuple(str(p) for p in patterns))

    def describe(self) -> str:
        return f"{self.sink} layout ({', '.join(self.patterns)})"


def _from_aiven(template: str) -> str:
    """Aiven's `{{variable[:option=value]}}` template as a layout pattern."""

    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in _AIVEN_VARIABLES:
            raise ValueError(f"file_name_template: unknown variable {{{{{name}}}}}")
        return _AIVEN_VARIABLES[name]

    return re.sub(r"\{\{\s*([a-z_]+)(?::[^}]*)?\s*\}\}", variable, template)


@dataclass(frozen=True)
class _Matcher:
    """One layout pattern for one topic; its regexes are compiled when a file is first
    classified (the folders to list need none)."""

    pattern: str
    topic: str
    folder: str  # the literal folder the topic's files are under ('' for the root)
    depth: int | None  # folders below `folder` when fixed (no `**`)
    own_folder: bool  # `folder` names the topic: every file below it is this topic's
    offset_is_last: bool

    @property
    def regex(self) -> re.Pattern[str]:
        """The relative path of one of this topic's files."""
        return _pattern_regex(self.pattern, self.topic)

    @property
    def generic(self) -> re.Pattern[str]:
        """The relative path of any topic's file."""
        return _pattern_regex(self.pattern, None)


_TOKENS = re.compile(r"(\{topic\}|\{partition\}|\{offset\}|\{last_offset\}|\*)")


@functools.cache
def _pattern_regex(pattern: str, topic: str | None) -> re.Pattern[str]:
    """The regex of a layout pattern, for one topic (or any topic when `topic` is None), compiled
    once per process (a long-lived driver lists every topic at each run)."""
    out = []
    segments = pattern.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            out.append("(?:[^/]+/)*")
            continue
        extension = last and segment.endswith(".*")
        part = ""
        for token in _TOKENS.split(segment[:-2] if extension else segment):
            if token == "{topic}":
                part += re.escape(topic) if topic is not None else "[^/]+?"
            elif token == "{partition}":
                part += r"(?P<partition>\d+)"
            elif token in ("{offset}", "{last_offset}"):
                part += r"(?P<offset>\d+)"
            elif token == "*":
                part += "[^/]*?"
            else:
                part += re.escape(token)
        if extension:
            part += r"(?:\.[^/]+)?"
        out.append(part if last else part + "/")
    return re.compile("^" + "".join(out) + "$")


def _matchers(layout: Layout, topic: str) -> list[_Matcher]:
    matchers = []
    for pattern in layout.patterns:
        segments = pattern.split("/")
        literal = []
        for segment in segments[:-1]:
            if segment != "{topic}" and ("{" in segment or "*" in segment):
                break
            literal.append(topic if segment == "{topic}" else segment)
        rest = segments[len(literal) :]
        matchers.append(
            _Matcher(
                pattern=pattern,
                topic=topic,
                folder="/".join(literal),
                depth=None if "**" in rest else len(rest) - 1,
                own_folder="{topic}" in segments[: len(literal)],
                offset_is_last="{last_offset}" in pattern,
            )
        )
    return matchers


@dataclass(frozen=True)
class LandingFile:
    """One landing file. `path` is the URI as Hadoop lists it, `relative` is relative to root.

    partition and offset: what the file name says (the offset of the file's first record, or of
    its last when `offset_is_last`); problem: why the file is not read (its name does not follow
    the layout, or its format is not one this reader decodes), reported as a reject.
    """

    path: str
    relative: str
    partition: int | None = None
    offset: int | None = None
    offset_is_last: bool = False
    problem: str | None = field(default=None, compare=False)


def _in_flight(relative: str) -> bool:
    """Files a writer has not finished: hidden, `_`-prefixed (`_temporary/`) or `.tmp` names,
    which sinks rename when the file is complete."""
    parts = relative.split("/")
    return any(part.startswith((".", "_")) for part in parts) or parts[-1].endswith(".tmp")


def _unread_format(name: str) -> str | None:
    lowered = name.lower()
    for suffix in UNREAD_SUFFIXES:
        if lowered.endswith(suffix):
            return suffix
    return None


def _classify(
    path: str, relative: str, layout: Layout, matchers: list[_Matcher]
) -> LandingFile | None:
    """The landing file at `relative` if it is this topic's, or one this topic's folder holds
    that the layout cannot name (with its problem); None when it belongs to another topic or
    lies outside every pattern's folder and depth."""
    within = False
    for matcher in matchers:
        prefix = f"{matcher.folder}/" if matcher.folder else ""
        if not relative.startswith(prefix):
            continue
        depth = relative[len(prefix) :].count("/")
        if matcher.depth is not None and depth != matcher.depth and not matcher.own_folder:
            continue
        match = matcher.regex.match(relative)
        if match:
            groups = match.groupdict()
            unread = _unread_format(relative)
            return LandingFile(
                path=path,
                relative=relative,
                partition=int(groups["partition"]) if groups.get("partition") else None,
                offset=int(groups["offset"]),
                offset_is_last=matcher.offset_is_last,
                problem=f"format {unread} is not read (JSON lines, Parquet and Avro only)"
                if unread
                else None,
            )
        if matcher.generic.match(relative):
            return None  # another topic's file
        within = True
    if not within:
        return None
    return LandingFile(path, relative, problem=f"file name does not follow the {layout.describe()}")


class TopicFiles:
    """The files of one topic in a layout: which folders to list and what each file is."""

    def __init__(self, layout: Layout, topic: str) -> None:
        self.layout = layout
        self.topic = topic
        self._matchers = _matchers(layout, topic)

    @property
    def folders(self) -> list[str]:
        """Folders below the root that hold the topic's files ('' is the root itself), none
        inside another (a listing is recursive)."""
        folders = sorted({m.folder for m in self._matchers})
        return [
            f
            for f in folders
            if not any(o != f and (o == "" or f.startswith(o + "/")) for o in folders)
        ]

    def classify(self, path: str, relative: str) -> LandingFile | None:
        """The landing file at `relative` (`path`: its URI) if it is this topic's, or one the
        topic's folders hold that the layout cannot name (with its problem); None for files a
        writer has not finished, files of other topics, and files outside every pattern's
        folder and depth."""
        if _in_flight(relative):
            return None
        return _classify(path, relative, self.layout, self._matchers)
