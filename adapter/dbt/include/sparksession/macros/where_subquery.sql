{#
  The relation a generic data test reads (dbt's get_where_subquery, dispatched by adapter).
  dbt's row- and key-local tests (`unique`, `not_null`, `accepted_values`) on a model of the
  cdc_lakehouse package read the rows the package scopes them to (cdc_tested_rows: in the
  runners' scheduled runs, the keys with events since their last tested run; otherwise every
  row). Every other test reads what dbt gives it: a test with a `where` config dbt's filter, the
  package's own tests the relation (they scope themselves), tests whose result can change with
  rows of other keys (`relationships`: a parent's delete orphans an untouched child) and the
  tests of other packages, whose rules this adapter does not know. (A scoped `not_null` on the
  key reads no null key: a null key comes from an event without one, which the change log's
  test, never scoped, fails.)
#}
{% macro sparksession__get_where_subquery(relation) -%}
    {%- set metadata = model.get('test_metadata') if model is mapping else none -%}
    {%- set local_test = metadata is not none and metadata.get('namespace') is none
        and metadata.get('name') in ('unique', 'not_null', 'accepted_values') -%}
    {%- if config.get('where', '') or not local_test or cdc_lakehouse is not defined -%}
        {{ return(dbt.default__get_where_subquery(relation)) }}
    {%- endif -%}
    {%- set scoped = cdc_lakehouse.cdc_tested_rows(relation) -%}
    {%- if scoped is string -%}
        {{ return(scoped ~ ' dbt_subquery') }}
    {%- endif -%}
    {{ return(relation) }}
{%- endmacro %}
