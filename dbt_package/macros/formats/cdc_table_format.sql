{#
  The table format of every table the project writes (silver, histories, gold, bronze, seeds,
  snapshots and the working tables beside them): Iceberg (default), Delta Lake or Apache Hudi,
  chosen by the CDC_TABLE_FORMAT environment variable. One variable, because the profile must pick the
  matching Spark catalog and extension (profiles/profiles.yml) and dbt_project.yml the
  `file_format`; both read it.
#}
{% macro cdc_table_format() %}
    {%- set table_format = env_var('CDC_TABLE_FORMAT', 'iceberg') | lower -%}
    {%- if table_format not in ('iceberg', 'delta', 'hudi') -%}
        {{ exceptions.raise_compiler_error("CDC_TABLE_FORMAT is '" ~ table_format ~ "': use iceberg (the default), delta or hudi") }}
    {%- endif -%}
    {{ return(table_format) }}
{% endmacro %}


{#- The current version of a table, a number that changes with every commit: Iceberg's snapshot
    id of its `main` branch, Delta's log version, Hudi's newest completed instant (a
    yyyyMMddHHmmssSSS time, as a number). None for a table with no commit yet. -#}
{% macro cdc_table_version(relation) %}
    {%- if cdc_lakehouse.cdc_table_format() == 'hudi' -%}
        {%- set rows = run_query("call show_commits(table => '" ~ relation ~ "', limit => 1)").rows -%}
        {{ return(rows[0]['commit_time'] | int if rows | length > 0 else none) }}
    {%- endif -%}
    {%- if cdc_lakehouse.cdc_table_format() == 'delta' -%}
        {%- set rows = run_query("describe history " ~ relation ~ " limit 1").rows -%}
        {{ return(rows[0]['version'] if rows | length > 0 else none) }}
    {%- endif -%}
    {#- Iceberg's Spark table reports its current snapshot id (of `main`) among its properties
        ("none" before the first commit): a catalog lookup, where a query of the `refs`
        metadata table costs a Spark job (planned, scheduled, its closures cleaned and sent). -#}
    {%- set rows = run_query("show tblproperties " ~ relation ~ " ('current-snapshot-id')").rows -%}
    {%- set value = (rows[0][1] if rows | length > 0 else '') | string -%}
    {{ return(value | int if value.lstrip('-').isdigit() else none) }}
{% endmacro %}


{#- The head of a statement that replaces a table with a query's result:
    `create or replace table <relation> using <format>`, then `as select ...`. Hudi's catalog
    has no REPLACE TABLE AS SELECT (UNSUPPORTED_FEATURE.TABLE_OPERATION): there the table is
    dropped first, so the replace is not atomic on Hudi (the working tables this serves are
    rebuilt by the next run if one stops between the two). -#}
{% macro cdc_create_or_replace_table(relation) %}
    {%- if cdc_lakehouse.cdc_table_format() == 'hudi' -%}
        {%- do run_query("drop table if exists " ~ relation ~ " purge") -%}
        {%- do cdc_clear_orphan_table_folder(relation) -%}
        create table {{ relation }} using hudi
    {%- else -%}
        create or replace table {{ relation }} using {{ cdc_lakehouse.cdc_table_format() }}
    {%- endif -%}
{% endmacro %}
