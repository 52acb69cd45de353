"""The table registry (`tables/<source>.yml`) and what is built from it: the generated dbt files
of every table (`generate`), and registry entries discovered from a live PostgreSQL or a landing
zone (`discover`). Command line: `python -m cdc_lakehouse.tables --help`."""

from cdc_lakehouse.tables.registry import RegistryError, Source, Table, load, table, tables

__all__ = ["RegistryError", "Source", "Table", "load", "table", "tables"]
