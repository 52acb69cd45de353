"""`python -m cdc_lakehouse.tables generate | check | from-postgres | from-landing`.

generate       write the dbt files of every registered table (tables/*.yml); `make tables`
check          exit 1 when a generated file is missing, stale or edited by hand; `make lint`
from-postgres  add a live PostgreSQL schema's tables to a registry file (then generate)
from-landing   add the topics of a landing zone written with schemas on (then generate)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cdc_lakehouse.tables import discover
from cdc_lakehouse.tables.generate import check, write
from cdc_lakehouse.tables.registry import RegistryError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_lakehouse.tables", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--project", default=".", help="dbt project folder (default: .)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("generate", help="write the generated dbt files from tables/*.yml")
    commands.add_parser("check", help="fail when a generated file is out of sync")
    discover.add_arguments(commands)
    args = parser.parse_args(argv)
    project = Path(args.project)
    try:
        if args.command == "generate":
            written, deleted = write(project)
            for name in written:
                print(f"wrote   {name}")
            for name in deleted:
                print(f"deleted {name}")
            print(f"{len(written)} written, {len(deleted)} deleted, the rest up to date")
            return 0
        if args.command == "check":
            problems = check(project)
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                print(
                    f"{len(problems)} generated file(s) out of sync with tables/*.yml: "
                    "run `make tables` (edit the registry entry, not the generated file)",
                    file=sys.stderr,
                )
                return 1
            return 0
        return discover.run(args, project)
    except (RegistryError, discover.DiscoveryError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
