{#
  Warns (or fails: var `cdc_undeclared_severity`, default warn) when a flatten model holds fields
  of landed rows that are not among its columns: with schemas off, a column added at the source
  and not declared in `cdc_table.columns` yet. Nothing is lost: the decoder keeps such fields, as
  text, in `_cdc_undeclared`; once the column is declared, the next build fills it for every row
  already loaded (fill_declared_columns) and silver and histories follow. One row per field, with
  how many events hold it and the first file; the log names the table and the fields.
#}
{% test cdc_no_undeclared_fields(model) %}
{{ config(severity=var('cdc_undeclared_severity', 'warn')) }}
{%- set columns = adapter.get_columns_in_relation(model) | map(attribute='name') | list if execute else [] -%}
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
    {%- if columns %}
    where undeclared_column not in (
        {%- for column in columns %}
        '{{ column }}'{{ "," if not loop.last }}
        {%- endfor %}
    )
    {%- endif %}
    group by undeclared_column
{%- endset -%}
{%- if execute and '_cdc_undeclared' in columns -%}
    {%- set found = run_query(query ~ " order by undeclared_column") -%}
    {%- if found.rows -%}
        {%- set named = [] -%}
        {%- for row in found.rows -%}
            {%- do named.append(row[0] ~ " (" ~ row[1] ~ " events)") -%}
        {%- endfor -%}
        {%- do log(model ~ ": fields not declared in cdc_table.columns, kept in _cdc_undeclared: " ~ named | join(', ') ~ ". Declare them (name: type) and run again: the rows already loaded are filled.", info=true) -%}
    {%- endif -%}
{%- endif %}
{%- if '_cdc_undeclared' in columns or not execute %}
{{ query }}
{%- else %}
select cast(null as string) as undeclared_column, 0 as events, cast(null as string) as first_file
where false
{%- endif %}
{% endtest %}
