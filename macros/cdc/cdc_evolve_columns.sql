{#
  Bring `target` (silver or a history) to the shape of the batch `source` before it is written:
  columns added at the source are added (older rows read null), types widened at the source are
  widened (the adapter's widen_column_types: in place where Iceberg can, else a clear error).
  `working_columns`: the strategy's own batch columns, never added. Returns the names of the
  batch's columns (each relation is described once).
#}
{% macro cdc_evolve_columns(source, target, working_columns) %}
    {%- set source_columns = adapter.get_columns_in_relation(source) -%}
    {%- set target_columns = adapter.get_columns_in_relation(target) -%}
    {%- set target_names = target_columns | map(attribute='name') | list -%}
    {%- set new_columns = [] -%}
    {%- for column in source_columns -%}
        {%- if column.name not in target_names and column.name not in working_columns -%}
            {%- do new_columns.append(adapter.quote(column.name) ~ ' ' ~ column.data_type) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if new_columns -%}
        {% call statement('cdc_add_columns') %}
            alter table {{ target }} add columns ({{ new_columns | join(', ') }})
        {% endcall %}
    {%- endif -%}
    {%- do widen_column_types(source, target, source_columns, target_columns) -%}
    {{ return(source_columns | map(attribute='name') | list) }}
{% endmacro %}
