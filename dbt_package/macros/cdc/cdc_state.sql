{#
  Where a silver or history table keeps its CDC state besides its rows:
  - the watermark: `cdc.watermark`, the newest `_cdc_loaded_at` of the change log applied. On
    Iceberg in this process's session (cdc_commit_properties_supported) an incremental run writes
    it into the summary of the snapshot that commits its last rows (one commit for rows and
    state); elsewhere, and where a run commits no row (a full build's post-hook, a batch whose
    events all changed nothing), a table property written after the rows. The watermark read is
    the newer of the two. A crash before the write means the batch is applied again
    (idempotent: events not newer than silver change nothing);
  - tombstones: table `<silver>__cdc_tombstones` (key columns, `_cdc_seq`, `_cdc_loaded_at`), the
    sequence of each hard delete, and rows with null keys for truncates, so a late older event
    cannot bring a deleted row back. They are written before the watermark moves.
#}
{% macro cdc_tombstones_relation(relation) %}
    {{ return(relation.incorporate(path={"identifier": relation.identifier ~ "__cdc_tombstones"}, type='table')) }}
{% endmacro %}


{% macro cdc_watermark(relation) %}
    {%- set value = cdc_lakehouse.cdc_watermark_value(relation) -%}
    {{ return("timestamp'" ~ (value or '1970-01-01 00:00:00') ~ "'") }}
{% endmacro %}


{% macro cdc_watermark_value(relation) %}
    {{ return(cdc_lakehouse.cdc_committed_state(relation).get('cdc.watermark')) }}
{% endmacro %}


{#- The CDC state `relation` has committed, as strings: `cdc.watermark` and what the last run
    applied (`cdc.run.*`, see cdc_state_properties); {} for a table without any. On Iceberg, the
    summary of the newest snapshot that carries them (a compaction's does not), unless a table
    property written later holds a newer watermark (a full build writes the properties and keeps
    the older snapshots); elsewhere, the table properties. Snapshots are read on every Iceberg
    target, not only where they can be written: a Thrift target reads what an in-process run
    committed on the same tables. The watermark read (cdc_watermark_value) and the run audit
    (cdc_run_audit_row) both read it here. -#}
{% macro cdc_committed_state(relation) %}
    {%- if not execute -%}
        {{ return({}) }}
    {%- endif -%}
    {%- set state = {} -%}
    {%- for row in run_query("show tblproperties " ~ relation).rows -%}
        {%- if row[0].startswith('cdc.') -%}
            {%- do state.update({row[0]: row[1]}) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if cdc_lakehouse.cdc_table_format() == 'iceberg' -%}
        {#- The names a run writes (cdc_state_properties), the watermark first. -#}
        {%- set names = cdc_lakehouse.cdc_state_properties(none, {}) | list -%}
        {%- set committed = run_query(
            "select summary['" ~ names | join("'], summary['") ~ "'] from " ~ relation ~ ".snapshots"
            ~ " where summary['cdc.watermark'] is not null order by committed_at desc limit 1"
        ).rows -%}
        {#- Both are timestamps cast to strings by Spark (cdc_state_properties): they compare as
            the timestamps do. -#}
        {%- if committed | length > 0 and committed[0][0] > (state.get('cdc.watermark') or '') -%}
            {%- for name in names -%}
                {%- do state.update({name: committed[0][loop.index0]}) -%}
            {%- endfor -%}
        {%- endif -%}
    {%- endif -%}
    {{ return(state) }}
{% endmacro %}


{#- True where a statement can commit the CDC state with its rows (Iceberg snapshot
    properties, set by the adapter in this process's Spark session: see the adapter's
    commit_properties.py). -#}
{% macro cdc_commit_properties_supported() %}
    {{ return(target.method == 'session' and cdc_lakehouse.cdc_table_format() == 'iceberg') }}
{% endmacro %}


{#
  The end of an incremental strategy: run `statements` (SQL writing `relation`, in order) and
  record the watermark `value` and what the run applied (`run`, see cdc_state_properties).
  Returns the statement the materialization runs last: where supported, the last of
  `statements` itself, committing its rows with the state in its snapshot's summary (one
  commit); otherwise the table-property write, after every statement has run. A `value` of
  none (the batch kept no row: every event read was older than what the table holds, or scoped
  no key) moves the watermark to the newest event loaded after it all the same, or every later
  run would read those events again; not to the change log's newest, which a process loading
  bronze meanwhile may have moved past events this run did not read. With no such event either,
  nothing is written.
#}
{% macro cdc_commit_with_state(statements, relation, value, run=none) %}
    {%- if value is none -%}
        {%- set value = cdc_lakehouse.cdc_newest_loaded_since_watermark(relation) -%}
    {%- endif -%}
    {%- if value is none -%}
        {{ return("select 'no new changes' as cdc_state") }}
    {%- endif -%}
    {%- set supported = statements | length > 0 and cdc_lakehouse.cdc_commit_properties_supported() -%}
    {%- do cdc_lakehouse.cdc_run_writes(statements[:-1] if supported else statements) -%}
    {%- if supported -%}
        {{ return("/* iceberg commit properties: " ~ tojson(cdc_lakehouse.cdc_state_properties(value, run)) ~ " */\n" ~ statements[-1]) }}
    {%- endif -%}
    {{ return(cdc_lakehouse.cdc_watermark_sql(relation, value, run)) }}
{% endmacro %}


{#- Run `statements` (SQL writing a strategy's table), in order. -#}
{% macro cdc_run_writes(statements) %}
    {%- for sql in statements -%}
        {% call statement('cdc_write_' ~ loop.index) %}{{ sql }}{% endcall %}
    {%- endfor -%}
{% endmacro %}


{#- The state a run records: `cdc.watermark` and, given `run` (a dict: kind, inserted, updated,
    deleted; a silver run also events, applied_seq and newest_source_ts, see
    cdc_batch_window_note), what this run applied (`cdc.run.*`, stamped with the invocation
    id). The run audit hook (cdc_run_audit) reads them. -#}
{% macro cdc_state_properties(value, run=none) %}
    {%- set properties = {'cdc.watermark': value | string} -%}
    {%- if run is not none -%}
        {%- do properties.update({'cdc.run.invocation_id': invocation_id}) -%}
        {%- for name in ('kind', 'inserted', 'updated', 'deleted', 'events', 'applied_seq', 'newest_source_ts') -%}
            {%- set number = run.get(name) -%}
            {%- do properties.update({'cdc.run.' ~ name: '' if number is none else number | string}) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(properties) }}
{% endmacro %}


{#- The load time (string) of the newest change-log event after `relation`'s watermark, or none:
    where a run whose batch kept no row moves the watermark (its events were read all the same). -#}
{% macro cdc_newest_loaded_since_watermark(relation) %}
    {{ return(run_query(
        "select cast(max(_cdc_loaded_at) as string) from " ~ cdc_lakehouse.cdc_upstream_change_log()
        ~ " where _cdc_loaded_at > " ~ cdc_lakehouse.cdc_watermark(relation)
    ).rows[0][0]) }}
{% endmacro %}


{#
  Statement that sets the watermark to the newest `_cdc_loaded_at` found by `max_query`
  (a query returning one timestamp); keeps the current one when that query finds nothing.
#}
{% macro cdc_set_watermark_sql(relation, max_query, run=none) %}
    {%- set found = run_query("select cast((" ~ max_query ~ ") as string)").rows[0][0] -%}
    {%- set value = found or cdc_lakehouse.cdc_watermark_value(relation) or '1970-01-01 00:00:00' -%}
    {{ return(cdc_lakehouse.cdc_watermark_sql(relation, value, run)) }}
{% endmacro %}


{#- Statement that writes the state (cdc_state_properties) as table properties, in one commit. -#}
{% macro cdc_watermark_sql(relation, value, run=none) %}
    {%- set properties = [] -%}
    {%- for name, setting in cdc_lakehouse.cdc_state_properties(value, run).items() -%}
        {%- do properties.append("'" ~ name ~ "' = '" ~ setting ~ "'") -%}
    {%- endfor -%}
    {{ return("alter table " ~ relation ~ " set tblproperties (" ~ (properties | join(', ')) ~ ")") }}
{% endmacro %}


{#
  Query over the stored tombstones of `relation` (key columns, `_cdc_seq`); an empty query of
  the same shape while the tombstone table does not exist yet.
#}
{% macro cdc_tombstones_query(relation, key_columns) %}
    {%- set tombstones = cdc_lakehouse.cdc_tombstones_relation(relation) -%}
    {%- set existing = adapter.get_relation(tombstones.database, tombstones.schema, tombstones.identifier) if execute else none -%}
    {%- if existing is not none -%}
        {{ return("select " ~ cdc_lakehouse.cdc_column_list(key_columns) ~ ", _cdc_seq from " ~ tombstones) }}
    {%- endif -%}
    {%- set select_list = [] -%}
    {%- for column in key_columns -%}
        {%- do select_list.append(adapter.quote(column)) -%}
    {%- endfor -%}
    {{ return("select " ~ (select_list | join(', ')) ~ ", _cdc_seq from " ~ this ~ " where false") }}
{% endmacro %}


{% macro cdc_create_tombstones(relation, key_columns) %}
    {%- set tombstones = cdc_lakehouse.cdc_tombstones_relation(relation) -%}
    {%- if adapter.get_relation(tombstones.database, tombstones.schema, tombstones.identifier) is not none -%}
        {#- Its key columns follow the table's when a key's type is widened at the source (the
            strategy has widened the table's already, cdc_evolve_columns; the table's columns
            come from the description it made, unless it altered the table): else the first
            delete of a key beyond the old type fails the run (an int key widened to bigint).
            A table from before this check gets its key widened on its next delete. -#}
        {%- do widen_column_types(relation, tombstones) -%}
        {{ return(tombstones) }}
    {%- endif -%}
    {%- if cdc_lakehouse.cdc_table_format() == 'hudi' -%}
        {#- Hudi refuses to create a table where a killed create left files (see
            cdc_create_or_replace_table). -#}
        {%- do cdc_clear_orphan_table_folder(tombstones) -%}
    {%- endif -%}
    {% call statement('cdc_create_tombstones') %}
        create table if not exists {{ tombstones }}
        using {{ cdc_lakehouse.cdc_table_format() }}
        as
        select
            {% for column in key_columns %}{{ adapter.quote(column) }}, {% endfor %}
            _cdc_seq,
            _cdc_loaded_at
        from {{ relation }}
        where false
    {% endcall %}
    {{ return(tombstones) }}
{% endmacro %}


{#
  The change log a silver or history model reads: its single upstream model. `node`: the
  model's graph node (default: the model being run; a test passes cdc_lakehouse.cdc_model_node_of(...)).
#}
{% macro cdc_upstream_change_log(node=none) %}
    {%- set node = node or model -%}
    {%- for unique_id in node.depends_on.nodes -%}
        {%- set parent = graph.nodes.get(unique_id) -%}
        {%- if parent is not none and parent.resource_type == 'model' -%}
            {{ return(adapter.get_relation(parent.database, parent.schema, parent.alias)) }}
        {%- endif -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error(node.name ~ ": a CDC model must ref its change log") }}
{% endmacro %}


{#- The graph node of the model behind `relation` (for tests), or none. -#}
{#- The delete mode (`cdc_delete_mode`) of the silver model that builds `relation`; `hard`, the
    default, when no model of the project does (or when not executing). -#}
{% macro cdc_delete_mode_of(relation) %}
    {%- set node = cdc_lakehouse.cdc_model_node_of(relation) -%}
    {{ return(((node.config.get('cdc_delete_mode') if node else none) or 'hard')) }}
{% endmacro %}


{% macro cdc_model_node_of(relation) %}
    {%- if execute -%}
        {%- for node in graph.nodes.values() -%}
            {%- if node.resource_type == 'model' and node.alias == relation.identifier and node.schema == relation.schema -%}
                {{ return(node) }}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(none) }}
{% endmacro %}


{#- Rows of silver model `relation` (hard-delete mode) that its change log deleted: flagged, or
    older than a delete of their key or a truncate applied by the table (loaded at or before its
    watermark). The query of the cdc_hard_deletes_removed test. -#}
{% macro cdc_rows_deleted_at_source(relation) %}
{%- if not execute -%}
    {{ return('select 1 where false') }}
{%- endif -%}
{%- set node = cdc_lakehouse.cdc_model_node_of(relation) -%}
{%- set keys = (node.config.get('unique_key') if node else none) or [] -%}
{%- set keys = [keys] if keys is string else keys -%}
{%- if not keys -%}
    {{ exceptions.raise_compiler_error(relation ~ ": cdc_hard_deletes_removed needs a model built by cdc_lakehouse.cdc_current_state (unique_key)") }}
{%- endif -%}
{%- set key_list = cdc_lakehouse.cdc_column_list(keys) %}
with

applied as (
    select *
    from {{ cdc_lakehouse.cdc_upstream_change_log(node) }}
    where _cdc_loaded_at <= {{ cdc_lakehouse.cdc_watermark(relation) }}
),

last_deletes as (
    select
        {{ key_list }},
        max(_cdc_seq) as _cdc_deleted_seq
    from applied
    where _cdc_op = 'd'
    group by {{ key_list }}
),

last_truncate as (
    select max(_cdc_seq) as _cdc_truncate_seq
    from applied
    where _cdc_op = 't'
)

select silver.*
from {{ cdc_lakehouse.cdc_tested_rows(relation) }} as silver
left join last_deletes using ({{ key_list }})
cross join last_truncate
where
    silver._cdc_is_deleted
    or silver._cdc_seq < last_deletes._cdc_deleted_seq
    or silver._cdc_seq < last_truncate._cdc_truncate_seq
{%- endmacro %}
