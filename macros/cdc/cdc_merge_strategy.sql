{#
  Route the custom `cdc_merge` (silver) and `cdc_history` (history models) incremental strategies
  through dbt-spark's incremental materialization, which hard-codes its strategy list. Any other
  strategy goes to dbt-spark.
#}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
    {%- if raw_strategy in ('cdc_merge', 'cdc_history') -%}
        {%- if file_format != 'iceberg' -%}
            {{ exceptions.raise_compiler_error("incremental_strategy '" ~ raw_strategy ~ "' needs file_format 'iceberg', got " ~ file_format) }}
        {%- endif -%}
        {{ return(raw_strategy) }}
    {%- endif -%}
    {{ return(dbt.dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format)) }}
{% endmacro %}


{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
    {%- if strategy == 'cdc_merge' -%}
        {{ return(get_incremental_cdc_merge_sql(source, target, unique_key)) }}
    {%- elif strategy == 'cdc_history' -%}
        {{ return(get_incremental_cdc_history_sql(source, target)) }}
    {%- endif -%}
    {{ return(dbt.dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates)) }}
{% endmacro %}


{#
  Apply a resolved batch (the model's incremental select, see cdc_resolve_batch) to silver:
  add new source columns, merge upserts and deletes, apply a truncate, remember deletes as
  tombstones, and return the statement that moves the watermark, so it runs last.
  Changes to keys silver holds go through a MERGE with only `when matched` clauses (an inner
  join, so Spark broadcasts the batch and streams silver: no shuffle of the table); keys new to
  silver are appended. With silver's merge-on-read table properties (dbt_project.yml) the MERGE
  writes delete files and new rows instead of rewriting every data file a batch touches.
#}
{% macro get_incremental_cdc_merge_sql(source, target, unique_key) %}
    {{ return(adapter.dispatch('get_incremental_cdc_merge_sql', 'cdc_lakehouse')(source, target, unique_key)) }}
{% endmacro %}


{% macro default__get_incremental_cdc_merge_sql(source, target, unique_key) %}
{%- set keys = cdc_key_columns() -%}
{%- set soft = cdc_delete_mode() == 'soft' -%}
{%- set batch = cdc_batch_relation(target) -%}

{#- The model found nothing since the watermark (cdc_current_state): nothing to resolve, write
    or move. The session view still tells the post-hook that the run was incremental. -#}
{%- if cdc_nothing_new_marker() in model.get('compiled_code', '') %}
    {% call statement('cdc_batch_view') %}
        create or replace temporary view {{ batch }} as select * from {{ source }}
    {% endcall %}
    {{ return("select 'no new changes' as cdc_merge") }}
{%- endif %}
{%- set key_match = [] -%}
{%- for column in keys -%}
    {%- do key_match.append("target." ~ adapter.quote(column) ~ " = batch." ~ adapter.quote(column)) -%}
{%- endfor -%}

{#- Columns added at the source, and types widened there, reach silver; older rows read null. -#}
{%- set source_names = cdc_evolve_columns(source, target, ['_cdc_action', '_cdc_target_exists', '_cdc_batch_loaded_at']) -%}
{%- set columns = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}

{#- Resolve once, into a table: the resolution reads silver, and `cache table` is not enough,
    because Spark refreshes a cached plan when a table it reads is written. After the MERGE the
    insert of new keys would resolve the batch again against the merged silver (a key change's
    new key then loses the unchanged-TOAST value of its old key, just deleted). -#}
{{ cdc_materialize_batch(source, target) }}

{#- One look at the batch decides which statements are needed: each one is an Iceberg commit.
    Without `_cdc_target_exists` (a replacing batch) everything goes through one MERGE. -#}
{%- set split = '_cdc_target_exists' in source_names -%}
{%- set new_actions = "('upsert', 'delete')" if soft else "('upsert')" -%}
{%- set stats = run_query(
    "select count_if(_cdc_action in ('upsert', 'delete')), count_if(_cdc_action = 'delete'),"
    ~ " max(case when _cdc_action = 'truncate' then _cdc_seq end),"
    ~ " cast(max(_cdc_batch_loaded_at) as string),"
    ~ (" count_if(_cdc_action in ('upsert', 'delete') and _cdc_target_exists),"
       ~ " count_if(_cdc_action in " ~ new_actions ~ " and not _cdc_target_exists)," if split else " 0, 0,")
    ~ " count_if(_cdc_action = 'replace_marker'),"
    ~ (" count_if(_cdc_action = 'upsert' and not _cdc_target_exists),"
       ~ " count_if(_cdc_action = 'upsert' and _cdc_target_exists),"
       ~ " count_if(_cdc_action = 'delete' and " ~ ("true" if soft else "_cdc_target_exists") ~ ")"
       if split else " null, null, count_if(_cdc_action = 'delete')")
    ~ " from " ~ batch
).rows[0] -%}
{%- set n_changes, n_deletes, truncate_seq, newest = stats[0], stats[1], stats[2], stats[3] -%}
{%- set n_matched, n_new, n_replace_markers = stats[4], stats[5], stats[6] -%}
{#- What this run did, for the run audit (cdc_run_audit): rows inserted, updated, deleted. -#}
{%- set run = {'kind': 'incremental', 'inserted': stats[7], 'updated': stats[8], 'deleted': stats[9]} -%}

{#- A late event made the model resolve the whole change log (cdc_late_changes_found): the
    result replaces silver in one MERGE commit (rows it lacks are deleted), and the tombstones
    are rebuilt from the log. -#}
{%- if n_replace_markers > 0 %}
    {% call statement('cdc_replace') %}
        merge into {{ target }} as target
        using (select * from {{ batch }} where _cdc_action = 'replace') as batch
            on {{ key_match | join(' and ') }}
        when matched then update set
            {%- for column in columns %}
            target.{{ adapter.quote(column) }} = batch.{{ adapter.quote(column) }}{{ "," if not loop.last }}
            {%- endfor %}
        when not matched then insert (
            {%- for column in columns %}
            {{ adapter.quote(column) }}{{ "," if not loop.last }}
            {%- endfor %}
        ) values (
            {%- for column in columns %}
            batch.{{ adapter.quote(column) }}{{ "," if not loop.last }}
            {%- endfor %}
        )
        when not matched by source then delete
    {% endcall %}
    {% call statement('cdc_rebuild_tombstones') %}
        {{ cdc_rebuild_tombstones_sql(target, cdc_upstream_change_log(), keys) }}
    {% endcall %}
    {{ return(cdc_watermark_sql(target, newest, {'kind': 'replace'})) }}
{%- endif %}

{%- if split and n_matched > 0 %}
{% call statement('cdc_merge') %}
    merge into {{ target }} as target
    using (
        select * from {{ batch }}
        where _cdc_action in ('upsert', 'delete') and _cdc_target_exists
    ) as batch
        on {{ key_match | join(' and ') }}
    {%- if not soft %}
    when matched and batch._cdc_action = 'delete' then delete
    {%- endif %}
    when matched then update set
        {%- for column in columns %}
        target.{{ adapter.quote(column) }} = batch.{{ adapter.quote(column) }}{{ "," if not loop.last }}
        {%- endfor %}
{% endcall %}
{%- endif %}

{%- if split and n_new > 0 %}
{% call statement('cdc_insert') %}
    insert into {{ target }} ({{ cdc_column_list(columns) }})
    select {{ cdc_column_list(columns) }}
    from {{ batch }}
    where _cdc_action in {{ new_actions }} and not _cdc_target_exists
{% endcall %}
{%- endif %}

{%- if not split and n_changes > 0 %}
{% call statement('cdc_merge') %}
    merge into {{ target }} as target
    using (select * from {{ batch }} where _cdc_action in ('upsert', 'delete')) as batch
        on {{ key_match | join(' and ') }}
    {%- if not soft %}
    when matched and batch._cdc_action = 'delete' then delete
    {%- endif %}
    when matched then update set
        {%- for column in columns %}
        target.{{ adapter.quote(column) }} = batch.{{ adapter.quote(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    when not matched {{- " and batch._cdc_action = 'upsert'" if not soft }} then insert (
        {%- for column in columns %}
        {{ adapter.quote(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    ) values (
        {%- for column in columns %}
        batch.{{ adapter.quote(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    )
{% endcall %}
{%- endif %}

{%- if truncate_seq is not none %}
    {% call statement('cdc_truncate') %}
        {%- if soft %}
        update {{ target }}
        set
            _cdc_op = 't',
            _cdc_seq = {{ truncate_seq }},
            _cdc_is_deleted = true,
            _cdc_deleted_at = (select max(_cdc_source_ts) from {{ batch }} where _cdc_action = 'truncate')
        where _cdc_seq < {{ truncate_seq }} and not _cdc_is_deleted
        {%- else %}
        delete from {{ target }} where _cdc_seq < {{ truncate_seq }}
        {%- endif %}
    {% endcall %}
{%- endif %}

{%- if truncate_seq is not none or (n_deletes > 0 and not soft) %}
{%- set tombstones = cdc_create_tombstones(target, keys) -%}
{#- Appended, not merged: readers take the newest per key (cdc_tombstones_query), so a key
    deleted again just gets a second row, and the write costs what the batch holds. -#}
{% call statement('cdc_tombstones') %}
    insert into {{ tombstones }}
    select
        {% for column in keys %}{{ adapter.quote(column) }}, {% endfor %}
        _cdc_seq,
        _cdc_loaded_at
    from {{ batch }}
    where _cdc_action = 'truncate' {{- " or _cdc_action = 'delete'" if not soft }}
{% endcall %}
{%- endif %}

{#- An empty batch: nothing landed since the last run, or every event read was older than what
    silver holds (late files), so none survived. The watermark still moves past the latter, or
    every later run would read them again. -#}
{%- if newest is none -%}
    {%- set newest = run_query(
        "select cast(max(_cdc_loaded_at) as string) from " ~ cdc_upstream_change_log()
        ~ " where _cdc_loaded_at > " ~ cdc_watermark(target)
    ).rows[0][0] -%}
{%- endif -%}
{#- The watermark moves last. -#}
{%- if newest is none -%}
    {{ return("select 'no new changes' as cdc_merge") }}
{%- endif -%}
{{ return(cdc_watermark_sql(target, newest, run)) }}
{% endmacro %}


{#- The session view strategies read the batch through (its existence tells the post-hook that
    an incremental run happened: a crashed run leaves no view behind). -#}
{% macro cdc_batch_relation(target) %}
    {{ return(api.Relation.create(identifier=target.identifier ~ '__cdc_batch', type='view')) }}
{% endmacro %}


{#- The table holding the resolved rows of the current batch, beside `target`. -#}
{% macro cdc_batch_rows_relation(target) %}
    {{ return(target.incorporate(path={"identifier": target.identifier ~ '__cdc_batch_rows'}, type='table')) }}
{% endmacro %}


{#- Write the model's select (`source`) once into the batch rows table, and point the session
    view `cdc_batch_relation(target)` at it. -#}
{% macro cdc_materialize_batch(source, target) %}
    {% call statement('cdc_materialize_batch') %}
        create or replace table {{ cdc_batch_rows_relation(target) }}
        using iceberg
        as select * from {{ source }}
    {% endcall %}
    {% call statement('cdc_batch_view') %}
        create or replace temporary view {{ cdc_batch_relation(target) }} as
        select * from {{ cdc_batch_rows_relation(target) }}
    {% endcall %}
{% endmacro %}
