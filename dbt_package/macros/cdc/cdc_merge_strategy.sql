{#
  Apply a resolved batch (the model's incremental select, see cdc_resolve_batch) to silver:
  add new source columns, remember deletes as tombstones, merge upserts and deletes, apply a
  truncate; the last statement that writes silver also records the watermark (one commit for the
  rows and the state where the table format allows, see cdc_commit_with_state).
  Changes to keys silver holds go through a MERGE (with only `when matched` clauses when the
  batch has no new key: an inner join, so Spark broadcasts the batch and streams silver, no
  shuffle of the table); keys new to silver are inserted by the same MERGE, or appended when
  the batch holds nothing else. With silver's merge-on-read table properties (dbt_project.yml) the MERGE
  writes delete files and new rows instead of rewriting every data file a batch touches.
#}
{% macro get_incremental_cdc_merge_sql(arg_dict) %}
    {%- set source, target = arg_dict['temp_relation'], arg_dict['target_relation'] -%}
    {{ return(adapter.dispatch('get_incremental_cdc_merge_sql', 'cdc_lakehouse')(source, target, arg_dict['unique_key'])) }}
{% endmacro %}


{% macro default__get_incremental_cdc_merge_sql(source, target, unique_key) %}
{%- set keys = cdc_lakehouse.cdc_key_columns() -%}
{%- set soft = cdc_lakehouse.cdc_delete_mode() == 'soft' -%}
{%- set kind = cdc_lakehouse.cdc_strategy_batch_kind('cdc_merge', 'cdc_current_state', ['changes', 'replace']) -%}
{%- if kind == 'nothing_new' -%}
    {{ return("select 'no new changes' as cdc_merge") }}
{%- endif -%}
{%- set key_match = [] -%}
{%- for column in keys -%}
    {%- do key_match.append("target." ~ adapter.quote(column) ~ " = batch." ~ adapter.quote(column)) -%}
{%- endfor -%}

{#- Columns added at the source, and types widened there, reach silver; older rows read null. -#}
{%- set columns = cdc_lakehouse.cdc_evolve_columns(source, target, ['_cdc_action', '_cdc_target_exists', '_cdc_batch_loaded_at']) -%}

{%- set batch = cdc_lakehouse.cdc_batch_table(source, target) -%}

{#- A late event made the model resolve the whole change log (cdc_late_changes_found): the
    result replaces silver in one MERGE commit (rows it lacks are deleted), and the tombstones
    are rebuilt from the log. -#}
{%- if kind == 'replace' %}
    {#- The tombstones first: they come from the change log alone, and must be in place when the
        watermark moves. -#}
    {% call statement('cdc_rebuild_tombstones') %}
        {{ cdc_lakehouse.cdc_rebuild_tombstones_sql(target, cdc_lakehouse.cdc_upstream_change_log(), keys) }}
    {% endcall %}
    {%- set writes = [] -%}
    {%- set hudi = cdc_lakehouse.cdc_table_format() == 'hudi' -%}
    {%- if hudi %}
    {#- Hudi 1.0 accepts `when not matched by source then delete` and ignores it: no row is
        deleted (seen with hudi-spark3.5-bundle 1.0.2). The keys silver holds and the result
        lacks are deleted first, in a commit of their own (the replace is two commits on Hudi);
        a MERGE whose source reads silver itself fails there (the self-join's key attributes
        are taken for the target's). -#}
    {%- set delete_sql -%}
        delete from {{ target }} as target
        where not exists (
            select 1 from {{ batch }} as batch
            where
                {%- for column in keys %}
                batch.{{ adapter.quote(column) }} = target.{{ adapter.quote(column) }}{{ " and" if not loop.last }}
                {%- endfor %}
        )
    {%- endset -%}
    {%- do writes.append(delete_sql) -%}
    {%- endif %}
    {%- set replace_sql -%}
        merge into {{ target }} as target
        using {{ batch }} as batch
            on {{ key_match | join(' and ') }}
        when matched then {{ cdc_lakehouse.cdc_merge_update_set(columns) }}
        when not matched then {{ cdc_lakehouse.cdc_merge_insert(columns) }}
        {%- if not hudi %}
        when not matched by source then delete
        {%- endif %}
    {%- endset -%}
    {%- do writes.append(replace_sql) -%}
    {%- set newest = run_query("select cast(max(_cdc_loaded_at) as string) from " ~ cdc_lakehouse.cdc_upstream_change_log()).rows[0][0] -%}
    {%- set run = {'kind': 'replace'} -%}
    {%- do run.update(cdc_lakehouse.cdc_batch_window()) -%}
    {{ return(cdc_lakehouse.cdc_commit_with_state(writes, target, newest, run)) }}
{%- endif %}

{#- One look at the batch decides which statements are needed: each one is an Iceberg commit. -#}
{%- set new_actions = "('upsert', 'delete')" if soft else "('upsert')" -%}
{%- set counts = run_query(
    "select"
    ~ " count_if(_cdc_action in ('upsert', 'delete') and _cdc_target_exists) as to_merge,"
    ~ " count_if(_cdc_action in " ~ new_actions ~ " and not _cdc_target_exists) as to_append,"
    ~ " count_if(_cdc_action = 'delete') as deletes,"
    ~ " max(case when _cdc_action = 'truncate' then _cdc_seq end) as truncate_seq,"
    ~ " cast(max(_cdc_batch_loaded_at) as string) as newest,"
    ~ " count_if(_cdc_action = 'upsert' and not _cdc_target_exists) as inserted,"
    ~ " count_if(_cdc_action = 'upsert' and _cdc_target_exists) as updated,"
    ~ " count_if(_cdc_action = 'delete' and " ~ ("true" if soft else "_cdc_target_exists") ~ ") as deleted"
    ~ " from " ~ batch
).rows[0] -%}
{%- set newest, truncate_seq = counts['newest'], counts['truncate_seq'] -%}
{#- What this run did, for the run audit (cdc_run_audit): rows inserted, updated, deleted, and
    the events it read (cdc_batch_window). -#}
{%- set run = {'kind': 'incremental', 'inserted': counts['inserted'], 'updated': counts['updated'], 'deleted': counts['deleted']} -%}
{%- do run.update(cdc_lakehouse.cdc_batch_window()) -%}

{#- The tombstones first (another table): they must be in place when the watermark moves.
    Appended, not merged: readers take the newest per key (cdc_tombstones_query), so a key
    deleted again just gets a second row, and the write costs what the batch holds. -#}
{%- if truncate_seq is not none or (counts['deletes'] > 0 and not soft) %}
{%- set tombstones = cdc_lakehouse.cdc_create_tombstones(target, keys) -%}
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

{#- The statements that write silver, in order; the last one records the watermark. -#}
{%- set writes = [] -%}

{#- Hudi (1.0.2) applies a MERGE's `when matched ... then delete` only after an update clause:
    alone, or before the update, the matched rows are silently kept (seen here; the update-first
    order worked, but no documented rule says so). On Hudi the deletes are a DELETE statement
    of their own, the MERGE only updates. -#}
{%- set hudi = cdc_lakehouse.cdc_table_format() == 'hudi' -%}
{%- if hudi and not soft and counts['deletes'] > 0 %}
{%- set delete_sql %}
    delete from {{ target }} as target
    where exists (
        select 1 from {{ batch }} as batch
        where
            batch._cdc_action = 'delete'
            and batch._cdc_target_exists
            {%- for column in keys %}
            and batch.{{ adapter.quote(column) }} = target.{{ adapter.quote(column) }}
            {%- endfor %}
    )
{%- endset %}
{%- do writes.append(delete_sql) -%}
{%- endif %}
{#- Keys silver holds and keys new to it in one batch: one MERGE that also inserts, so the
    batch is one commit. Its outer join cannot broadcast the batch (Spark broadcasts only the
    side an outer join does not keep), so it costs a shuffle of silver; a batch of known keys
    only keeps the inner join (the batch broadcast, silver streamed), new keys only are an
    append. Hudi keeps its statements apart (see above). -#}
{%- set merged = counts['updated'] if hudi and not soft else counts['to_merge'] -%}
{%- set inserts_in_merge = not hudi and merged > 0 and counts['to_append'] > 0 -%}
{%- if merged > 0 %}
{%- set merge_sql %}
    merge into {{ target }} as target
    using (
        select * from {{ batch }}
        where
            (_cdc_action in {{ "('upsert')" if hudi and not soft else "('upsert', 'delete')" }} and _cdc_target_exists)
            {%- if inserts_in_merge %}
            or (_cdc_action in {{ new_actions }} and not _cdc_target_exists)
            {%- endif %}
    ) as batch
        on {{ key_match | join(' and ') }}
    {%- if not soft and not hudi %}
    when matched and batch._cdc_action = 'delete' then delete
    {%- endif %}
    when matched then {{ cdc_lakehouse.cdc_merge_update_set(columns) }}
    {%- if inserts_in_merge %}
    when not matched and batch._cdc_action in {{ new_actions }} then {{ cdc_lakehouse.cdc_merge_insert(columns) }}
    {%- endif %}
{%- endset %}
{%- do writes.append(merge_sql) -%}
{%- endif %}

{%- if counts['to_append'] > 0 and not inserts_in_merge %}
{%- set insert_sql %}
    insert into {{ target }} ({{ cdc_lakehouse.cdc_column_list(columns) }})
    select {{ cdc_lakehouse.cdc_column_list(columns) }}
    from {{ batch }}
    where _cdc_action in {{ new_actions }} and not _cdc_target_exists
{%- endset %}
{%- do writes.append(insert_sql) -%}
{%- endif %}

{%- if truncate_seq is not none %}
    {#- The rows a truncate removes (hard) or marks deleted (soft) count as deleted: counted
        after the batch's other writes, which run first. -#}
    {%- do cdc_lakehouse.cdc_run_writes(writes) -%}
    {%- set truncated = run_query(
        "select count(*) from " ~ target ~ " where _cdc_seq < " ~ truncate_seq
        ~ (" and not _cdc_is_deleted" if soft else "")
    ).rows[0][0] -%}
    {%- do run.update({'deleted': run.deleted + truncated}) -%}
    {%- set truncate_sql %}
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
    {%- endset %}
    {%- set writes = [truncate_sql] -%}
{%- endif %}

{#- An empty batch (newest is none): see cdc_commit_with_state. -#}
{{ return(cdc_lakehouse.cdc_commit_with_state(writes, target, newest, run)) }}
{% endmacro %}


{#- The relation an incremental run of a silver or history model resolves its batch into: in
    this process's Spark session (`method: session`, the embedded and cluster targets), a
    temporary view of the checkpointed batch (sparksession_checkpoint_view: no table, no
    commit), named after the model's schema too (temporary views have one namespace per
    session, and models of two schemas may share a name); on a Thrift target, a table beside
    the model's. The post-hook (cdc_finalize_merge) drops it. -#}
{% macro cdc_batch_relation(relation) %}
    {%- if target.method == 'session' -%}
        {{ return(cdc_lakehouse.cdc_session_view(relation, 'cdc_batch')) }}
    {%- endif -%}
    {{ return(relation.incorporate(path={"identifier": relation.identifier ~ '__cdc_batch'}, type='table')) }}
{% endmacro %}


{#- A temporary view of this process's session that belongs to the model `relation`:
    `<schema>__<model>__<suffix>`, without a schema (temporary views have one namespace per
    session, and models of two schemas may share a name). -#}
{% macro cdc_session_view(relation, suffix) %}
    {%- set view = relation.schema ~ '__' ~ relation.identifier ~ '__' ~ suffix -%}
    {{ return(relation.incorporate(path={"identifier": view}, type='view').include(database=false, schema=false)) }}
{% endmacro %}


{#- The adapter's incremental materialization asks where a strategy wants the model's select
    (the batch): a silver or history run with changes resolves it once. Not dbt-spark's
    temporary view of the select: Spark analyses a view's SQL again in every statement that
    reads it (the resolution is large: window functions, lambdas, CTEs inlined; analysing it
    twice cost a third of an incremental silver build), and runs it again too, and not `cache
    table` either, because Spark refreshes a cached plan when a table it reads is written:
    after the MERGE, the insert of new keys would resolve the batch again against the merged
    silver (a key change's new key then loses the unchanged-TOAST value of its old key, just
    deleted). A checkpoint (or a table) holds the rows computed once. A run with nothing new
    keeps dbt-spark's temporary view: its select is empty and the strategy writes nothing. -#}
{% macro sparksession_incremental_batch_table(strategy, relation) %}
    {%- if strategy in ('cdc_merge', 'cdc_history') and cdc_lakehouse.cdc_batch_kind() not in (none, 'nothing_new') -%}
        {{ return(cdc_lakehouse.cdc_batch_relation(relation)) }}
    {%- endif -%}
    {{ return(none) }}
{% endmacro %}


{#- The batch a strategy was handed: the batch table (sparksession_incremental_batch_table). -#}
{% macro cdc_batch_table(source, target) %}
    {%- set batch = cdc_lakehouse.cdc_batch_relation(target) -%}
    {%- if source.identifier != batch.identifier -%}
        {{ exceptions.raise_compiler_error(model.name ~ ": the batch of an incremental CDC run is " ~ batch ~ ", got " ~ source ~ " (see sparksession_incremental_batch_table)") }}
    {%- endif -%}
    {{ return(batch) }}
{% endmacro %}
