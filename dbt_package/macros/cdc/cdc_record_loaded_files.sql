{#
  Post-hook of every bronze model: write `<table>__cdc_loaded_files`, the names of the
  landing files the table holds and the snapshot of the table they describe, from the session
  view the model left (cdc_lakehouse/bronze/flatten.py). The next incremental run reads the names
  from there instead of scanning the table's file column; a run that left no view (nothing new,
  names already recorded) changes nothing.
#}
{% macro cdc_record_loaded_files() %}
    {%- if not execute -%}
        {{ return('') }}
    {%- endif -%}
    {#- The model's view has the table's name (cdc_lakehouse/bronze/flatten.py, LEDGER_SUFFIX). -#}
    {%- set view = cdc_lakehouse.cdc_loaded_files_relation(this).identifier -%}
    {%- if run_query("show views like '" ~ view ~ "'").rows | length == 0 -%}
        {{ return('') }}
    {%- endif -%}
    {%- set version = cdc_lakehouse.cdc_table_version(this) -%}
    {%- if version is not none %}
        {% call statement('cdc_record_loaded_files') %}
            {{ cdc_lakehouse.cdc_create_or_replace_table(cdc_lakehouse.cdc_loaded_files_relation(this)) }}
            as
            select
                file,
                cast({{ version }} as bigint) as snapshot_id
            from {{ view }}
        {% endcall %}
    {%- endif %}
    {% call statement('cdc_drop_loaded_files_view') %}
        drop view if exists {{ view }}
    {% endcall %}
    {{ return('') }}
{% endmacro %}


{#
  Pre-hook of every bronze model: drop `<table>__cdc_loaded_files` unless it describes the
  table's current version (all its rows carry it), so that the model (which trusts the ledger
  when it exists) scans the table's file column instead after a commit the post-hook did not
  record: a failed post-hook, a compaction, a write from elsewhere.
#}
{% macro cdc_forget_stale_loaded_files() %}
    {%- if not execute or not is_incremental() -%}
        {{ return('') }}
    {%- endif -%}
    {#- dbt's relation cache: filled when the invocation starts, so it holds a ledger an earlier
        invocation's post-hook wrote (this model's own post-hook runs after this). -#}
    {%- set ledger = cdc_lakehouse.cdc_loaded_files_relation(this) -%}
    {%- if adapter.get_relation(ledger.database, ledger.schema, ledger.identifier) is none -%}
        {{ return('') }}
    {%- endif -%}
    {%- set version = cdc_lakehouse.cdc_table_version(this) -%}
    {%- set counts = run_query(
        "select count(*), count_if(snapshot_id = " ~ (version if version is not none else 'null') ~ ") from " ~ ledger
    ).rows[0] -%}
    {%- if counts[0] == 0 or counts[1] < counts[0] -%}
        {% call statement('cdc_forget_stale_loaded_files') %}
            drop table if exists {{ ledger }}
        {% endcall %}
    {%- endif -%}
    {{ return('') }}
{% endmacro %}


{#- The table of landing file names beside a bronze table (see cdc_record_loaded_files). -#}
{% macro cdc_loaded_files_relation(relation) %}
    {{ return(relation.incorporate(path={"identifier": relation.identifier ~ "__cdc_loaded_files"}, type='table')) }}
{% endmacro %}
