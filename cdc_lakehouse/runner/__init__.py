"""The runs: build only what landed.

changed        one run from a new process (cron): the tables whose landing files changed since the
               last successful run, and what depends on them; nothing landed, no dbt at all
continuous     dbt in a loop in one process, its Spark session kept warm between runs
parsed         dbt's parsed project kept from one command of a process to the next
small_runs     Spark's small-input settings for a run of few new bytes
class_archive  a JVM class archive new dbt processes can start from (opt-in, make class-archive)
"""
