{#
  Make `target_relation` able to hold a batch whose columns (`source_relation`) changed type at
  the source: a type that already holds every value is kept; one Iceberg can promote in place
  (int -> bigint, float -> double, a decimal's precision) is altered; anything else stops the
  run before a row is written, naming the table, the column and both types.
  `source_columns` / `target_columns`: the relations' columns when the caller already has them.
#}
{% macro widen_column_types(source_relation, target_relation, source_columns=none, target_columns=none) %}
  {%- set target_types = {} -%}
  {%- for column in target_columns or adapter.get_columns_in_relation(target_relation) -%}
    {%- do target_types.update({column.name: column.data_type}) -%}
  {%- endfor -%}
  {%- set promote = [] -%}
  {%- set incompatible = [] -%}
  {%- for column in source_columns or adapter.get_columns_in_relation(source_relation) -%}
    {%- set current = target_types.get(column.name) -%}
    {%- if current is not none -%}
      {%- set change = adapter.column_type_change(current, column.data_type) -%}
      {%- if change == 'promote' -%}
        {%- do promote.append((column.name, column.data_type)) -%}
      {%- elif change == 'incompatible' -%}
        {%- do incompatible.append(column.name ~ ' (' ~ current ~ ' in the table, ' ~ column.data_type ~ ' now)') -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if incompatible -%}
    {{ exceptions.raise_compiler_error(
        target_relation ~ ": the type of " ~ (incompatible | join(', ')) ~ " changed at the source to one "
        ~ "the table cannot hold without loss, and Iceberg cannot change it in place. Nothing was written. "
        ~ "Rebuild this model and what depends on it: dbt build --full-refresh -s " ~ model.name ~ "+"
    ) }}
  {%- endif -%}
  {%- for name, data_type in promote -%}
    {%- call statement('widen_' ~ name) -%}
      alter table {{ target_relation }} alter column {{ adapter.quote(name) }} type {{ data_type }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}
