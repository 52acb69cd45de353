{#
  Bring `target` (silver or a history) to the shape of the batch `source` before it is written:
  columns added at the source are added (older rows read null), types widened at the source are
  widened (the adapter's widen_column_types: in place where Iceberg can, else a clear error).
  `working_columns`: the strategy's own batch columns, never added. Returns the names of the
  target's columns after the change, in the table's order (new columns last, where Iceberg adds
  them): each relation is described once.
#}
{% macro cdc_evolve_columns(source, target, working_columns) %}
    {%- set source_columns = adapter.get_columns_in_relation(source) -%}
    {%- set target_columns = adapter.get_columns_in_relation(target) -%}
    {%- set target_names = target_columns | map(attribute='name') | list -%}
    {%- set new_columns = [] -%}
    {%- set added = [] -%}
    {%- for column in source_columns -%}
        {%- if column.name not in target_names and column.name not in working_columns -%}
            {%- do new_columns.append(adapter.quote(column.name) ~ ' ' ~ column.data_type) -%}
            {%- do added.append(column.name) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if new_columns -%}
        {% call statement('cdc_add_columns') %}
            alter table {{ target }} add columns ({{ new_columns | join(', ') }})
        {% endcall %}
    {%- endif -%}
    {%- do widen_column_types(source, target, source_columns, target_columns) -%}
    {{ return(target_names + added) }}
{% endmacro %}


{#
  True when a column of the change log `changes` that the model's table lacks (`new_columns`)
  holds a value in an event the table already applied (loaded at or before its watermark): a
  column declared after its values were loaded with schemas off, which the bronze model filled
  for those events (fill_declared_columns, in cdc_lakehouse/bronze/flatten.py). Only a resolution
  of the whole change log gives the table those values. Columns added at the source come with
  events after the watermark: they do not count. The scan stops at the first such event.
#}
{% macro cdc_has_backfilled_columns(changes, new_columns) %}
    {%- if not execute or not new_columns -%}
        {{ return(false) }}
    {%- endif -%}
    {%- set held = [] -%}
    {%- for column in new_columns -%}
        {%- do held.append(adapter.quote(column) ~ " is not null") -%}
    {%- endfor -%}
    {%- set query -%}
        select 1
        from {{ changes }}
        where _cdc_loaded_at <= {{ cdc_lakehouse.cdc_watermark(this) }} and ({{ held | join(' or ') }})
        limit 1
    {%- endset -%}
    {{ return(run_query(query).rows | length > 0) }}
{% endmacro %}
