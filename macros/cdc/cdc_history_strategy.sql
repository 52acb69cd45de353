{#
  Incremental strategy `cdc_history`: apply a history model's incremental select (see cdc_history:
  the recomputed versions of the touched keys as `upsert`, their versions that no longer exist as
  `delete`) to the history table in one MERGE on key + `_cdc_valid_from_seq`. Rows equal to what
  the table holds are left out, so a replayed batch commits nothing. Returns the statement that
  moves the watermark, so it runs last.
#}
{% macro get_incremental_cdc_history_sql(source, target) %}
    {{ return(adapter.dispatch('get_incremental_cdc_history_sql', 'cdc_lakehouse')(source, target)) }}
{% endmacro %}


{% macro default__get_incremental_cdc_history_sql(source, target) %}
{%- set q = adapter.quote -%}
{%- set keys = cdc_key_columns() -%}
{%- set batch = cdc_batch_relation(target) -%}
{%- set version_match = [] -%}
{%- for column in keys + ['_cdc_valid_from_seq'] -%}
    {%- do version_match.append("target." ~ q(column) ~ " = batch." ~ q(column)) -%}
{%- endfor -%}

{#- A column added at the source: add it to the history; older versions read null. -#}
{%- set target_names = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}
{%- set new_columns = [] -%}
{%- for column in adapter.get_columns_in_relation(source) -%}
    {%- if column.name not in target_names and column.name not in ('_cdc_action', '_cdc_batch_loaded_at') -%}
        {%- do new_columns.append(q(column.name) ~ ' ' ~ column.data_type) -%}
    {%- endif -%}
{%- endfor -%}
{%- if new_columns -%}
    {% call statement('cdc_add_columns') %}
        alter table {{ target }} add columns ({{ new_columns | join(', ') }})
    {% endcall %}
{%- endif -%}
{%- set columns = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}

{#- Resolve once: the select reads the history table, which the merge changes. The post-hook
    (cdc_finalize_merge) drops the cached batch. -#}
{% call statement('cdc_cache_batch') %}
    cache table {{ batch }} as select * from {{ source }}
{% endcall %}
{%- set newest = run_query("select cast(max(_cdc_batch_loaded_at) as string) from " ~ batch).rows[0][0] -%}

{#- Only versions that differ from the stored ones, and deletes. -#}
{%- set effective -%}
    select batch.*
    from {{ batch }} as batch
    left anti join {{ target }} as target
        on
            batch._cdc_action = 'upsert'
            {%- for column in columns %}
            and target.{{ q(column) }} <=> batch.{{ q(column) }}
            {%- endfor %}
{%- endset -%}
{%- set n_changes = run_query("select count(*) from (" ~ effective ~ ") as effective").rows[0][0] -%}

{%- if n_changes > 0 %}
{% call statement('cdc_history_merge') %}
    merge into {{ target }} as target
    using ({{ effective }}) as batch
        on {{ version_match | join(' and ') }}
    when matched and batch._cdc_action = 'delete' then delete
    when matched then update set
        {%- for column in columns %}
        target.{{ q(column) }} = batch.{{ q(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    when not matched and batch._cdc_action = 'upsert' then insert (
        {%- for column in columns %}
        {{ q(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    ) values (
        {%- for column in columns %}
        batch.{{ q(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    )
{% endcall %}
{%- endif %}

{#- The watermark moves last; an empty batch (nothing landed since) changes nothing. -#}
{%- if newest is none -%}
    {{ return("select 'no new changes' as cdc_history") }}
{%- endif -%}
{{ return(cdc_watermark_sql(target, newest)) }}
{% endmacro %}
