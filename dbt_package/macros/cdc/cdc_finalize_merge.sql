{#
  Post-hook of every silver and history model. It drops the batch (view or table) an incremental
  run resolved into (cdc_batch_relation), its new events (cdc_new_events_checkpoint) and a
  history run's scoped changes (cdc_history_scope_checkpoint).
  After a full build of a silver model (cdc_batch_kind `full`) it writes what the strategy
  writes on incremental runs: the tombstones of the whole change log and the watermark. A
  history model's is the watermark after a full build.
#}
{% macro cdc_finalize_merge() %}
    {%- if not execute -%}
        {{ return('') }}
    {%- endif -%}
    {%- set kind = cdc_lakehouse.cdc_batch_kind() -%}
    {%- set history = config.get('incremental_strategy') == 'cdc_history' -%}
    {#- What an incremental run read once into the session: its new events (read before the
        run's kind is known, so on every kind), a history's scoped changes. -#}
    {%- if kind != 'full' and target.method == 'session' -%}
        {{ cdc_lakehouse.cdc_drop_batch(cdc_lakehouse.cdc_new_events_relation(this)) }}
        {%- if history and kind == 'changes' -%}
            {{ cdc_lakehouse.cdc_drop_batch(cdc_lakehouse.cdc_history_scope_relation(this)) }}
        {%- endif -%}
    {%- endif -%}
    {%- if kind == 'nothing_new' -%}
        {#- Nothing landed since the watermark: no batch table was made, nothing moves. -#}
        {{ return('') }}
    {%- endif -%}
    {{ cdc_lakehouse.cdc_drop_batch(cdc_lakehouse.cdc_batch_relation(this)) }}
    {%- if history -%}
        {#- After a full build, the newest change loaded, which it applied (an incremental run's
            strategy moved the watermark itself). -#}
        {%- if kind != 'full' -%}
            {{ return('') }}
        {%- endif -%}
        {% call statement('cdc_set_watermark') %}
            {{ cdc_lakehouse.cdc_set_watermark_sql(this, "select max(_cdc_loaded_at) from " ~ cdc_lakehouse.cdc_upstream_change_log()) }}
        {% endcall %}
        {{ return('') }}
    {%- endif -%}
    {%- if kind != 'full' -%}
        {{ return('') }}
    {%- endif -%}

    {%- set changes = cdc_lakehouse.cdc_upstream_change_log() -%}
    {%- set keys = cdc_lakehouse.cdc_key_columns() -%}
    {% call statement('cdc_rebuild_tombstones') %}
        {{ cdc_lakehouse.cdc_rebuild_tombstones_sql(this, changes, keys) }}
    {% endcall %}
    {%- set rows = run_query("select count(*) from " ~ this).rows[0][0] -%}
    {% call statement('cdc_set_watermark') %}
        {{ cdc_lakehouse.cdc_set_watermark_sql(
            this,
            "select max(_cdc_loaded_at) from " ~ changes,
            {'kind': 'full', 'inserted': rows, 'updated': 0, 'deleted': 0},
        ) }}
    {% endcall %}
    {{ return('') }}
{% endmacro %}


{#- Tombstones of the whole change log: the newest delete (hard mode) of each key, and truncates. -#}
{% macro cdc_rebuild_tombstones_sql(relation, changes, keys) %}
    {{ cdc_lakehouse.cdc_create_or_replace_table(cdc_lakehouse.cdc_tombstones_relation(relation)) }}
    as
    select
        {% for column in keys %}{{ adapter.quote(column) }}, {% endfor %}
        max(_cdc_seq) as _cdc_seq,
        max(_cdc_loaded_at) as _cdc_loaded_at
    from {{ changes }}
    where
        _cdc_op = 't'
        {{- " or _cdc_op = 'd'" if cdc_lakehouse.cdc_delete_mode() == 'hard' }}
    group by {{ cdc_lakehouse.cdc_column_list(keys) }}
{% endmacro %}


{#- Drop the batch a run resolved into (cdc_batch_relation): the temporary view of its
    checkpoint, or the table (and its files) if a run left one. Asking the metastore first is
    cheap; `drop table if exists` of a missing Iceberg table costs about a second of catalog
    lookups. -#}
{% macro cdc_drop_batch(relation) %}
    {%- if not relation.include_policy.schema -%}
        {% call statement('cdc_drop_' ~ relation.identifier) %}
            drop view if exists {{ relation }}
        {% endcall %}
        {{ return('') }}
    {%- endif -%}
    {%- set found = run_query("show tables in " ~ relation.schema ~ " like '" ~ relation.identifier ~ "'") -%}
    {%- if found.rows | length > 0 -%}
        {% call statement('cdc_drop_' ~ relation.identifier) %}
            drop table if exists {{ relation }} purge
        {% endcall %}
    {%- endif -%}
{% endmacro %}
