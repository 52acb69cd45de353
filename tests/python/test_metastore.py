"""The embedded metastore under concurrent writers: one DataNucleus factory per process, and the
statements of the map stores that tables' writes share built before dbt's threads write.

CI once failed a Hudi build with "ownerIdx is null" from DataNucleus' JoinMapStore: two threads'
first use of a store (datanucleus/datanucleus-rdbms#288, in the 4.1 line Spark's Hive ships).
A store's first use came again every time the process replaced its factory, which it did
whenever Spark's, Iceberg's and Hudi's metastore clients, opening it with different settings,
took turns (profiles/profiles.yml, the driver's JVM properties). A race cannot be made to
happen on demand; what closes it can be read: metastore_probe.py runs a dbt command and writes
of the format from new threads in a process of its own, and reads the factory and its stores
by reflection. With the profile's settings of the commit before this test, the factory was
replaced during the Iceberg command and during the Hudi writes; without the session's first
write (adapter/dbt/adapters/sparksession/metastore_warm_up.py) no store was built before the
writes. A first write that fails (an object of the other kind under its name, made by the probe)
must leave a warning with its cause and the command going on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the stores a table's parameters (every format's writes) and its serde's (Spark's catalog and
# Hudi's sync) are written through
BUILT = {
    "iceberg": ["MTable.parameters"],
    # Hudi's sync of a partitioned table adds partitions: their parameters' store too
    "hudi": ["MPartition.parameters", "MSerDeInfo.parameters", "MTable.parameters"],
}


def probe(lakehouse: Path, table_format: str) -> dict:
    env = {
        **os.environ,
        "CDC_LAKEHOUSE_DIR": str(lakehouse),
        "CDC_TABLE_FORMAT": table_format,
        "DBT_PROFILES_DIR": str(REPO / "profiles"),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    script = Path(__file__).with_name("metastore_probe.py")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("PROBE ")]
    assert result.returncode == 0 and lines, (
        f"the probe failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return json.loads(lines[-1].removeprefix("PROBE "))


@pytest.mark.parametrize(
    "table_format",
    [
        pytest.param("iceberg", marks=pytest.mark.dbt),
        pytest.param("hudi", marks=pytest.mark.system),
    ],
)
def test_the_metastore_keeps_one_factory_with_its_statements_built_before_the_writes(
    table_format: str, tmp_path: Path
) -> None:
    report = probe(tmp_path, table_format)
    warm = report["after_warm_up"]
    missing = set(BUILT[table_format]) - set(warm["built"])
    assert not missing, f"the session's first write left these stores unbuilt: {sorted(missing)}"
    assert report["after_command"]["factory"] == warm["factory"], (
        "a client of the dbt command opened the metastore with other settings"
    )
    assert report["after_writes"]["factory"] == warm["factory"], (
        "a client of the format's writes opened the metastore with other settings: "
        f"{report['after_writes']['settings_changed']}"
    )
    assert report["left_in_default"] == ["probe_a", "probe_b"], "the first write left its table"
    assert report["left_in_warehouse"] == ["probe_a", "probe_b"], "the first write left a folder"
    # a first write that fails (here an object of the other kind holds its name) is a warning
    # naming its cause; the command goes on, and the session is not tried again per statement
    blocked = report["blocked"]
    assert blocked["success"], "a failed first write stopped the dbt command"
    warned = [w for w in blocked["warnings"] if "first write" in w]
    assert len(warned) == 1 and "Cause: " in warned[0] and warned[0].split("Cause: ")[1], warned
    assert blocked["done"]
