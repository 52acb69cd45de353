{#
  Select of the fields a bronze model's rows hold in `_cdc_undeclared` that are not among its
  columns: one row per field (`undeclared_column`), with how many events hold it (`events`) and
  the first landing file (`first_file`). When there are any, they are also logged with the table
  name, so the build's output names them. Empty for a table without `_cdc_undeclared`.
  Executed, the query runs once, to name the fields; when it finds none (the usual run) the
  macro returns the empty select, so the test does not read the table a second time on the way
  from bronze to silver (dbt build runs bronze's tests before its children).
#}
{% macro cdc_undeclared_fields(model) %}
{%- set columns = adapter.get_columns_in_relation(model) | map(attribute='name') | list if execute else ['_cdc_undeclared'] -%}
{%- set empty -%}
select
    cast(null as string) as undeclared_column,
    0 as events,
    cast(null as string) as first_file
where false
{%- endset -%}
{%- if '_cdc_undeclared' not in columns %}
{{ empty }}
{%- else %}
{%- set query -%}
select
    undeclared_column,
    count(*) as events,
    min(_cdc_file) as first_file
from (
    select
        explode(json_object_keys(_cdc_undeclared)) as undeclared_column,
        _cdc_file
    from {{ model }}
    where _cdc_undeclared is not null
) as fields
where undeclared_column not in (
    {%- for column in columns %}
    '{{ column }}'{{ "," if not loop.last }}
    {%- endfor %}
)
group by undeclared_column
{%- endset -%}
{%- set named = [] -%}
{%- if execute -%}
    {%- set found = run_query(query ~ " order by undeclared_column") -%}
    {%- for row in found.rows -%}
        {%- do named.append(row[0] ~ " (" ~ row[1] ~ " events)") -%}
    {%- endfor -%}
    {%- if named -%}
        {%- do log(model ~ ": fields not declared in cdc_table.columns, kept in _cdc_undeclared: " ~ named | join(', ') ~ ". Declare them (name: type) and run again: the rows already loaded are filled.", info=true) -%}
    {%- endif -%}
{%- endif %}
{%- if execute and not named %}
{{ empty }}
{%- else %}
{{ query }}
{%- endif %}
{%- endif %}
{% endmacro %}
