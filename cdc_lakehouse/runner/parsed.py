"""dbt's parsed project, kept for the next command of a long-lived process.

Every `dbtRunner().invoke(...)` starts by loading the project: dbt reads its partial-parse file,
checks every file, rebuilds the graph and writes `manifest.json`: about 1.2 s of Python per
command at 50 tables even when nothing in the project changed, of which about half a second
shows in a warm run's wall time (`python -m benchmarks.kept_parse`, docs/benchmarks.md). A
long-lived process (the continuous driver, the tests' warm dbt process) runs the same project
again and again, so it parses once and hands the manifest to the next commands, dbt's documented
way to skip parsing (`dbtRunner(manifest=...)`, "Reusing objects" in dbt's
programmatic-invocation docs). The manifest is parsed again as soon as anything parsing
depends on differs from the last parse:

- the project's files (the folders `changed.project_digest` reads: models, macros, seeds,
  snapshots, tests, analyses, the registry, dbt_project.yml, the installed packages) and the
  profiles file, compared by contents;
- the command's options that `dbt parse` takes too (`--vars`, `--target`, `--profile`,
  `--project-dir`, `--profiles-dir`, `--target-path`, `--threads`...), which the parse is given.

A command that changes the manifest itself or its inputs (`parse`, `deps`, `clean`, `retry`, and
`--defer` / `--state`, which merge another manifest into it) runs as a plain invocation and drops
the kept manifest. Between two commands the nodes' compiled state (compiled SQL, injected
ephemeral CTEs) is reset to what parsing left: dbt compiles a node in place and would otherwise
keep the previous command's CTEs. Environment variables are not compared: a process's
environment stays as it started. The `manifest.json` a command writes keeps the invocation id of
the parse it came from (its run results have the command's own).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Commands whose run leaves the manifest they were given unusable for the next one, or that
# must parse: they run without a kept manifest, and the next command parses again.
PARSING_COMMANDS = frozenset({"parse", "deps", "clean", "retry", "debug", "init"})
MERGING_OPTIONS = frozenset({"--defer", "--state", "--defer-state", "--favor-state"})


def _option_table(command: Any) -> dict[str, bool]:
    """Option string -> takes a value, for one click command or group (dbt's own definition)."""
    table: dict[str, bool] = {}
    for param in command.params:
        takes_value = not getattr(param, "is_flag", False) and getattr(param, "nargs", 1) != 0
        for opt in (*param.opts, *getattr(param, "secondary_opts", ())):
            table[opt] = takes_value
    return table


def _command(args: Sequence[str]) -> tuple[list[str], Any, list[str]] | None:
    """(the command's words, e.g. ['docs', 'generate'], its click command, the other
    arguments), or None when `args` names no dbt command. dbt's global options may come first."""
    import click
    from dbt.cli.main import cli

    found: Any = cli
    names: list[str] = []
    rest: list[str] = []
    options = _option_table(cli)
    index = 0
    while index < len(args):
        word = args[index]
        if isinstance(found, click.Group) and not word.startswith("-"):
            if word not in found.commands:
                return None
            found = found.commands[word]
            names.append(word)
            options |= _option_table(found)
            index += 1
            continue
        takes_value = options.get(word, False) and "=" not in word
        rest += list(args[index : index + 1 + takes_value])
        index += 1 + takes_value
    if not names or isinstance(found, click.Group):
        return None
    return names, found, rest


def parse_options(args: Sequence[str]) -> list[str] | None:
    """The options of `args` that `dbt parse` takes too, with their values, in their order; None
    when the command must not reuse a manifest (see PARSING_COMMANDS, MERGING_OPTIONS)."""
    from dbt.cli.main import cli

    command = _command(args)
    if command is None or command[0][0] in PARSING_COMMANDS:
        return None
    names, found, rest = command
    given = _option_table(cli) | _option_table(found)
    accepted = _option_table(cli) | _option_table(cli.commands["parse"])
    carried: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        option = word.split("=", 1)[0]
        if option in MERGING_OPTIONS:
            return None
        takes_value = given.get(option, False) and "=" not in word
        value = rest[index + 1 : index + 2] if takes_value else []
        if option in accepted and word.startswith("-"):
            carried += [word, *value]
        index += 1 + len(value)
    return carried


def _option_value(options: Sequence[str], name: str) -> str | None:
    """The value of option `name` in `options` (`--name value` or `--name=value`), or None."""
    for index, word in enumerate(options):
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
        if word == name and index + 1 < len(options):
            return options[index + 1]
    return None


def _profiles_file(options: Sequence[str], project: Path) -> Path:
    folder = _option_value(options, "--profiles-dir") or os.environ.get("DBT_PROFILES_DIR")
    if folder:
        return Path(folder) / "profiles.yml"
    local = project / "profiles.yml"
    return local if local.exists() else Path.home() / ".dbt" / "profiles.yml"


def project_signature(project: Path, profiles: Path) -> str:
    """The digest `changed.project_digest` takes of the files parsing reads, and the profiles
    file's contents: a changed file changes it (contents, not modification times, which two
    quick edits can share)."""
    from cdc_lakehouse.runner.changed import project_digest

    text = profiles.read_bytes() if profiles.is_file() else b""
    return project_digest(project) + hashlib.sha256(text).hexdigest()


def reset_compiled_state(manifest: Any) -> None:
    """Put each node back as parsing left it: not compiled, no injected CTEs (seeds, which
    dbt does not compile, have none of it)."""
    from dbt.contracts.graph.nodes import CompiledNode

    for node in manifest.nodes.values():
        if isinstance(node, CompiledNode):
            node.compiled = False
            node.compiled_code = None
            node.extra_ctes_injected = False
            node.extra_ctes = []
            node._pre_injected_sql = None


class ParsedProject:
    """The last parsed manifest of this process and what it was parsed from; `invoke` runs a
    dbt command with it, parsing first when it is missing or out of date."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.manifest: Any = None
        self.parses = 0

    def invoke(self, args: Sequence[str]) -> Any:
        """`dbt <args>` in this process (dbtRunner's result), with the kept manifest when the
        project and the parse options are those it was parsed from."""
        from dbt.cli.main import dbtRunner

        options = parse_options(args)
        if options is None:
            self.key, self.manifest = None, None
            return dbtRunner().invoke(list(args))
        folder = _option_value(options, "--project-dir") or os.environ.get("DBT_PROJECT_DIR", ".")
        project = Path(folder).resolve()
        key = (
            str(project),
            tuple(options),
            project_signature(project, _profiles_file(options, project)),
        )
        if key != self.key or self.manifest is None:
            self.key, self.manifest = None, None
            parsed = dbtRunner().invoke(["parse", *options])
            self.parses += 1
            if not parsed.success or parsed.result is None:
                # dbt reports the parse error again, as the plain command would
                return dbtRunner().invoke(list(args))
            self.key, self.manifest = key, parsed.result
        else:
            reset_compiled_state(self.manifest)
        return dbtRunner(manifest=self.manifest).invoke(list(args))
