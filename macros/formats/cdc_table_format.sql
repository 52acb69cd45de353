{#
  The table format of every table the project writes (silver, histories, gold, bronze, seeds,
  snapshots and the working tables beside them): Iceberg (default) or Delta Lake, chosen by the
  CDC_TABLE_FORMAT environment variable. One variable, because the profile must pick the
  matching Spark catalog and extension (profiles/profiles.yml) and dbt_project.yml the
  `file_format`; both read it.
#}
{% macro cdc_table_format() %}
    {%- set table_format = env_var('CDC_TABLE_FORMAT', 'iceberg') | lower -%}
    {%- if table_format not in ('iceberg', 'delta') -%}
        {{ exceptions.raise_compiler_error("CDC_TABLE_FORMAT is '" ~ table_format ~ "': use iceberg (the default) or delta") }}
    {%- endif -%}
    {{ return(table_format) }}
{% endmacro %}


{#- The current version of a table, a number that changes with every commit: Iceberg's snapshot
    id of its `main` branch, Delta's log version. None for a table with no commit yet. -#}
{% macro cdc_table_version(relation) %}
    {%- if cdc_table_format() == 'delta' -%}
        {%- set rows = run_query("describe history " ~ relation ~ " limit 1").rows -%}
        {{ return(rows[0]['version'] if rows | length > 0 else none) }}
    {%- endif -%}
    {%- set rows = run_query("select snapshot_id from " ~ relation ~ ".refs where name = 'main'").rows -%}
    {{ return(rows[0][0] if rows | length > 0 else none) }}
{% endmacro %}
