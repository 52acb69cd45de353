{#
  on-run-end hook: when var `cdc_export_dir` is set, write every bronze, silver and gold table
  built by the run (and the rejects, and the run's audit rows) to `<dir>/<schema>.<table>/` as JSON lines with exact, canonical text values (decimals
  with their scale, timestamps to the microsecond in UTC, binary as base64, arrays as JSON).
  Used by the tests to compare the lake with the source; handy for diffing two builds.
  The column types of every model built, views included, go to `<dir>/cdc.types/` in one
  write: one line per column (`relation` as schema.table, `position`, `column_name`,
  `data_type`: the Spark type readers see).
#}
{% macro cdc_export(results) %}
    {%- set export_dir = var('cdc_export_dir', none) -%}
    {%- if not execute or export_dir is none -%}
        {{ return('') }}
    {%- endif -%}
    {%- set types = [] -%}
    {%- for result in results -%}
        {%- set node = result.node -%}
        {%- set exported = node.schema in ('bronze', 'silver', 'gold') or node.name == 'cdc_rejects' -%}
        {%- if node.resource_type == 'model' and result.status == 'success' -%}
            {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias) -%}
            {%- set columns = adapter.get_columns_in_relation(relation) -%}
            {%- for column in columns -%}
                {%- do types.append("('" ~ node.schema ~ "." ~ node.alias ~ "', " ~ loop.index ~ ", '" ~ column.name ~ "', '" ~ column.data_type ~ "')") -%}
            {%- endfor -%}
            {%- if exported %}
            {% call statement('cdc_export_' ~ node.alias) %}
                insert overwrite directory '{{ export_dir }}/{{ node.schema }}.{{ node.alias }}'
                using json
                options ('ignoreNullFields' = 'false')
                select /*+ coalesce(1) */
                    {%- for column in columns %}
                    {{ cdc_lakehouse.cdc_canonical_text(adapter.quote(column.name), column.data_type) }} as {{ adapter.quote(column.name) }}
                    {{- "," if not loop.last }}
                    {%- endfor %}
                from {{ relation }}
            {% endcall %}
            {%- endif %}
        {%- endif -%}
    {%- endfor -%}
    {%- if types %}
        {% call statement('cdc_export_types') %}
            insert overwrite directory '{{ export_dir }}/cdc.types'
            using json
            select /*+ coalesce(1) */ *
            from values
                {{ types | join(',\n                ') }}
                as types (relation, position, column_name, data_type)
        {% endcall %}
    {%- endif %}
    {#- This run's rows of the run audit (cdc_run_audit), when it wrote any. -#}
    {%- set audit = cdc_lakehouse.cdc_run_audit_relation() -%}
    {%- if adapter.get_relation(audit.database, audit.schema, audit.identifier) is not none -%}
        {% call statement('cdc_export_audit') %}
            insert overwrite directory '{{ export_dir }}/{{ audit.schema }}.{{ audit.identifier }}'
            using json
            options ('ignoreNullFields' = 'false')
            select /*+ coalesce(1) */ *
            from {{ audit }}
            where invocation_id = '{{ invocation_id }}'
        {% endcall %}
    {%- endif -%}
    {{ return('') }}
{% endmacro %}


{#- Exact text of a value of Spark type `data_type`. -#}
{% macro cdc_canonical_text(expression, data_type) %}
    {%- set t = data_type | lower -%}
    {%- if t.startswith('decimal') or t == 'date' -%}
        {{ return('cast(' ~ expression ~ ' as string)') }}
    {%- elif t == 'timestamp' -%}
        {{ return("date_format(" ~ expression ~ ", \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\")") }}
    {%- elif t == 'timestamp_ntz' -%}
        {{ return("date_format(" ~ expression ~ ", \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS\")") }}
    {%- elif t == 'binary' -%}
        {{ return('base64(' ~ expression ~ ')') }}
    {%- elif t in ('array<timestamp>', 'array<timestamp_ntz>', 'array<date>') -%}
        {#- to_json would write a timestamp to the millisecond: each element as its scalar -#}
        {{ return('to_json(transform(' ~ expression ~ ', x -> ' ~ cdc_lakehouse.cdc_canonical_text('x', t[6:-1]) ~ '))') }}
    {%- elif t.startswith('array') or t.startswith('map') or t.startswith('struct') -%}
        {{ return('to_json(' ~ expression ~ ')') }}
    {%- endif -%}
    {{ return(expression) }}
{% endmacro %}
