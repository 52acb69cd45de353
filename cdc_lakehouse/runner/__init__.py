"""The runs: build only what landed.

changed        one run from a new process (cron): the tables whose landing files changed since the
               last successful run, and what depends on them; nothing landed, no dbt at all
continuous     dbt in a loop in one process, its Spark session kept warm between runs
class_archive  the JVM class archive new dbt processes start from (written by make install)
"""
