{#
  Incremental strategy `cdc_history`: apply a history model's incremental select (see cdc_history:
  every version of each recomputed key) to the history table in one MERGE on key +
  `_cdc_valid_from_seq`, deleting the stored versions of those keys that no longer exist. Rows equal to what
  the table holds are left out, so a replayed batch changes no row. The MERGE records the
  watermark (one commit where the table format allows, see cdc_commit_with_state): the one write
  of the watermark of an incremental run.
#}
{% macro get_incremental_cdc_history_sql(arg_dict) %}
    {%- set source, target = arg_dict['temp_relation'], arg_dict['target_relation'] -%}
    {{ return(adapter.dispatch('get_incremental_cdc_history_sql', 'cdc_lakehouse')(source, target)) }}
{% endmacro %}


{% macro default__get_incremental_cdc_history_sql(source, target) %}
{%- set q = adapter.quote -%}
{%- set keys = cdc_lakehouse.cdc_key_columns() -%}
{%- set kind = cdc_lakehouse.cdc_strategy_batch_kind('cdc_history', 'cdc_history', ['changes', 'appends']) -%}
{%- if kind == 'nothing_new' -%}
    {{ return("select 'no new changes' as cdc_history") }}
{%- endif -%}
{%- set version_match = [] -%}
{%- for column in keys + ['_cdc_valid_from_seq'] -%}
    {%- do version_match.append("target." ~ q(column) ~ " = batch." ~ q(column)) -%}
{%- endfor -%}

{#- Columns added at the source, and types widened there, reach the history; older versions
    read null. -#}
{%- set columns = cdc_lakehouse.cdc_evolve_columns(source, target, ['_cdc_action', '_cdc_batch_loaded_at']) -%}

{#- Resolved once (cdc_batch_relation: a checkpoint, or a table on Thrift; a view would keep the
    resolution's plan, which Spark analyses again in every query over it: the MERGE ran out of
    memory planning it). -#}
{%- set batch = cdc_lakehouse.cdc_batch_table(source, target) -%}
{%- set newest = run_query("select cast(max(_cdc_batch_loaded_at) as string) from " ~ batch).rows[0][0] -%}

{#- Versions that differ from the stored ones, and the stored versions of the recomputed keys
    that no longer exist (a late event merged two intervals or split one): deletes. A key once
    with versions keeps some (events only accumulate), so the batch names every recomputed key.
    A batch of appends (cdc_history_appends) holds each key's last stored version and the new
    ones: no stored version goes.
    A delete carries the stored row (not nulls): Hudi's MERGE builds the incoming record in the
    table's schema before it applies the clause, and fails on a null in a non-nullable column.
    Both read only the stored versions of the recomputed keys (`stored`: the table filtered by a
    semi join on the batch's keys, which Spark broadcasts), not the whole table: joined whole,
    every stored version was shuffled and sorted for the left join on every run, a cost that
    grew with the history, not with the batch. Both joins match on the key, so the rows are the
    same. -#}
{%- set key_list = cdc_lakehouse.cdc_column_list(keys) -%}
{%- set stored -%}
    (
        select * from {{ target }}
        left semi join (select distinct {{ key_list }} from {{ batch }}) as recomputed using ({{ key_list }})
    )
{%- endset -%}
{%- set effective -%}
    select
        {%- for column in columns %}
        batch.{{ q(column) }},
        {%- endfor %}
        batch._cdc_action
    from {{ batch }} as batch
    left join {{ stored }} as target
        on {{ version_match | join(' and ') }}
    where
        target._cdc_valid_from_seq is null
        or not (
            {%- for column in columns %}
            target.{{ q(column) }} <=> batch.{{ q(column) }}{{ " and" if not loop.last }}
            {%- endfor %}
        )
    {%- if kind != 'appends' %}
    union all
    select
        {%- for column in columns %}
        stored.{{ q(column) }},
        {%- endfor %}
        'delete' as _cdc_action
    from {{ stored }} as stored
    left anti join {{ batch }} as batch using ({{ key_list }}, _cdc_valid_from_seq)
    {%- endif %}
{%- endset -%}
{#- Where the MERGE itself records the watermark (cdc_commit_with_state: Iceberg), it runs
    without counting the changes first: a MERGE that changes no version still commits, a
    snapshot without files that carries the watermark, the one commit a replayed batch makes
    anyway. The count evaluated the batch's join with the table once more (about 0.6 s of a
    4.5 s incremental run of 1,000 events). Elsewhere the watermark is a table property, and
    the MERGE runs only when a version changed. -#}
{%- if cdc_lakehouse.cdc_commit_properties_supported() -%}
    {%- set n_changes = none -%}
{%- else -%}
    {%- set n_changes = run_query("select count(*) from (" ~ effective ~ ") as effective").rows[0][0] -%}
{%- endif -%}

{#- Hudi (1.0.2) keeps the rows of a MERGE's `when matched ... then delete` when it comes
    before the update clause (see cdc_merge_strategy.sql): there the stored versions the batch
    no longer has are removed by a DELETE first, and the MERGE only updates and inserts. -#}
{%- set hudi = cdc_lakehouse.cdc_table_format() == 'hudi' -%}
{%- set writes = [] -%}
{%- if hudi and n_changes > 0 and kind != 'appends' %}
{%- set delete_sql %}
    delete from {{ target }} as target
    where
        exists (
            select 1 from {{ batch }} as batch
            where
                {%- for column in keys %}
                batch.{{ q(column) }} = target.{{ q(column) }}{{ " and" if not loop.last }}
                {%- endfor %}
        )
        and not exists (
            select 1 from {{ batch }} as batch
            where
                {%- for column in keys + ['_cdc_valid_from_seq'] %}
                batch.{{ q(column) }} = target.{{ q(column) }}{{ " and" if not loop.last }}
                {%- endfor %}
        )
{%- endset %}
{%- do writes.append(delete_sql) -%}
{%- endif %}
{%- if n_changes is none or n_changes > 0 %}
{%- set merge_sql %}
    merge into {{ target }} as target
    using ({{ effective }}) as batch
        on {{ version_match | join(' and ') }}
    {%- if hudi %}
    when matched and batch._cdc_action = 'upsert' then {{ cdc_lakehouse.cdc_merge_update_set(columns) }}
    {%- else %}
    when matched and batch._cdc_action = 'delete' then delete
    when matched then {{ cdc_lakehouse.cdc_merge_update_set(columns) }}
    {%- endif %}
    when not matched and batch._cdc_action = 'upsert' then {{ cdc_lakehouse.cdc_merge_insert(columns) }}
{%- endset %}
{%- do writes.append(merge_sql) -%}
{%- endif %}

{#- The watermark moves with the last write, here only (the post-hook writes it after full
    builds); an empty batch (events that all scoped no key: truncates) too, see
    cdc_commit_with_state. -#}
{{ return(cdc_lakehouse.cdc_commit_with_state(writes, target, newest)) }}
{% endmacro %}
