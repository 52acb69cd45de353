{#
  Read the CDC settings of the current model: key columns (`unique_key`), delete mode
  (`cdc_delete_mode`: hard | soft, default from var `cdc_delete_mode`, else hard).
#}
{% macro cdc_key_columns() %}
    {%- set key = config.get('unique_key') -%}
    {%- if key is none -%}
        {{ exceptions.raise_compiler_error(model.name ~ ": a CDC model needs `unique_key` (its primary-key columns)") }}
    {%- endif -%}
    {{ return([key] if key is string else key) }}
{% endmacro %}


{% macro cdc_delete_mode() %}
    {%- set mode = config.get('cdc_delete_mode') or var('cdc_delete_mode', 'hard') -%}
    {%- if mode not in ('hard', 'soft') -%}
        {{ exceptions.raise_compiler_error(model.name ~ ": cdc_delete_mode must be 'hard' or 'soft', got " ~ mode) }}
    {%- endif -%}
    {{ return(mode) }}
{% endmacro %}


{#
  The pipeline columns of the SQL side (the Python side derives the same lists from the
  decoder's in cdc_lakehouse/tables/generate.py; tests/python/test_tables.py renders these
  macros and compares): every change log carries `cdc_change_log_columns`, in order; silver keeps them
  but `_cdc_unavailable_columns`, in whose place it has `_cdc_is_deleted`, `_cdc_deleted_at`;
  every layer keeps where and when an event was committed and landed,
  `cdc_event_origin_columns`.
#}
{% macro cdc_change_log_columns() %}
    {{ return([
        '_cdc_op', '_cdc_seq', '_cdc_source_ts', '_cdc_tx_id', '_cdc_unavailable_columns',
        '_cdc_file', '_cdc_line', '_cdc_offset', '_cdc_loaded_at',
    ]) }}
{% endmacro %}


{% macro cdc_silver_columns() %}
    {%- set columns = [] -%}
    {%- for column in cdc_lakehouse.cdc_change_log_columns() -%}
        {%- if column == '_cdc_unavailable_columns' -%}
            {%- do columns.extend(['_cdc_is_deleted', '_cdc_deleted_at']) -%}
        {%- else -%}
            {%- do columns.append(column) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(columns) }}
{% endmacro %}


{% macro cdc_event_origin_columns() %}
    {{ return(cdc_lakehouse.cdc_change_log_columns() | reject('in', ['_cdc_op', '_cdc_seq', '_cdc_unavailable_columns']) | list) }}
{% endmacro %}


{#
  Names of a relation's source columns (everything not prefixed `_cdc_`), read from the
  warehouse at run time so that a column added at the source flows through. At parse time,
  or when the relation does not exist yet, returns `fallback`. In a dbt unit test, where `ref()`
  and `this` are fixture CTEs, the columns of the real relation behind the fixture are used.
#}
{% macro cdc_source_column_names(relation, fallback=[]) %}
    {%- if not execute -%}
        {{ return(fallback) }}
    {%- endif -%}
    {%- set relation = cdc_lakehouse.cdc_relation_behind_fixture(relation) -%}
    {%- set names = [] -%}
    {%- for column in adapter.get_columns_in_relation(relation) -%}
        {%- if not column.name.startswith('_cdc_') -%}
            {%- do names.append(column.name) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(names if names else fallback) }}
{% endmacro %}


{#- The name of `relation` (a relation or a string) when it is a dbt unit test's fixture, a CTE
    (`__dbt__cte__<name>`) that only the model's own statement can read; none otherwise. -#}
{% macro cdc_fixture_name(relation) %}
    {%- set identifier = relation if relation is string else (relation.identifier or '') -%}
    {{ return(identifier[12:] if identifier.startswith('__dbt__cte__') else none) }}
{% endmacro %}


{% macro cdc_relation_behind_fixture(relation) %}
    {%- set name = cdc_lakehouse.cdc_fixture_name(relation) -%}
    {%- if name is none -%}
        {{ return(relation) }}
    {%- endif -%}
    {#- The unit-test context has no graph: look the name up in the warehouse's schemas. -#}
    {%- for schema in run_query('show schemas').columns[0].values() | sort -%}
        {%- set found = adapter.get_relation(target.database, schema, name) -%}
        {%- if found is not none -%}
            {{ return(found) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(relation) }}
{% endmacro %}


{#
  Select list for a staging change log: the source columns of `relation` (key columns first),
  then the pipeline columns.
#}
{% macro cdc_staging_columns(relation, key_columns) %}
    {%- set source_columns = cdc_lakehouse.cdc_source_column_names(relation, key_columns) -%}
    {%- set ordered = key_columns + (source_columns | reject('in', key_columns) | list) -%}
    {%- for column in ordered + cdc_lakehouse.cdc_change_log_columns() %}
        {{ adapter.quote(column) }}{{ "," if not loop.last }}
    {%- endfor %}
{% endmacro %}


{#- Comma-separated, quoted column list. -#}
{% macro cdc_column_list(columns) %}
    {%- set quoted = [] -%}
    {%- for column in columns -%}
        {%- do quoted.append(adapter.quote(column)) -%}
    {%- endfor -%}
    {{ return(quoted | join(', ')) }}
{% endmacro %}


{#- Predicate true when any source column of `relation` holds `placeholder` (an ASCII string)
    in a form the decoder recognises. -#}
{% macro cdc_placeholder_predicate(relation, placeholder) %}
    {%- set checks = [] -%}
    {%- if execute -%}
        {#- Every form the decoder recognises (cdc_lakehouse/bronze/decode.py, unavailable_sql): the
            string, base64 of its bytes (bytea), a text array holding it, the array of its bytes. -#}
        {%- set literal = "'" ~ placeholder ~ "'" -%}
        {%- set as_bytes = "to_json(transform(sequence(1, length(" ~ literal ~ ")), i -> ascii(substr(" ~ literal ~ ", i, 1))))" -%}
        {%- for column in adapter.get_columns_in_relation(relation) if not column.name.startswith('_cdc_') -%}
            {%- set name = adapter.quote(column.name) -%}
            {%- set type = column.data_type | lower -%}
            {%- if type == 'string' -%}
                {%- do checks.append(name ~ " in (" ~ literal ~ ", base64(cast(" ~ literal ~ " as binary)))") -%}
            {%- elif type == 'binary' -%}
                {%- do checks.append(name ~ " = cast(" ~ literal ~ " as binary)") -%}
            {%- elif type.startswith('array<string') -%}
                {%- do checks.append("array_contains(" ~ name ~ ", " ~ literal ~ ")") -%}
            {%- elif type.startswith('array<') -%}
                {%- do checks.append("to_json(" ~ name ~ ") = " ~ as_bytes) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(checks | join(' or ') if checks else 'false') }}
{% endmacro %}


{#- A MERGE's `update set` list and `insert (...) values (...)` clause: every column of
    `columns` from the source aliased `batch`. -#}
{% macro cdc_merge_update_set(columns) %}
    {%- set pairs = [] -%}
    {%- for column in columns -%}
        {%- do pairs.append("target." ~ adapter.quote(column) ~ " = batch." ~ adapter.quote(column)) -%}
    {%- endfor -%}
    {{ return("update set " ~ (pairs | join(', '))) }}
{% endmacro %}


{% macro cdc_merge_insert(columns) %}
    {%- set values = [] -%}
    {%- for column in columns -%}
        {%- do values.append("batch." ~ adapter.quote(column)) -%}
    {%- endfor -%}
    {{ return("insert (" ~ cdc_lakehouse.cdc_column_list(columns) ~ ") values (" ~ (values | join(', ')) ~ ")") }}
{% endmacro %}
