{#
  Warns (or fails: var `cdc_undeclared_severity`, default warn) when a bronze model holds fields
  of landed rows that are not among its columns: with schemas off, a column added at the source
  and not declared in `cdc_table.columns` yet. Nothing is lost: the decoder keeps such fields, as
  text, in `_cdc_undeclared`; once the column is declared, the next build fills it for every row
  already loaded (fill_declared_columns) and silver and histories follow. One row per field
  (macro cdc_undeclared_fields); the log names the table and the fields.
#}
{% test cdc_no_undeclared_fields(model) %}
    {{ config(severity=var('cdc_undeclared_severity', 'warn')) }}

    {{ cdc_lakehouse.cdc_undeclared_fields(model) }}
{% endtest %}
