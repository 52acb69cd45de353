{#
  Fails for events of a change log (a staging model) that silver and history could not apply,
  each with the reason in `_cdc_failure`: no `_cdc_seq` (the order of events), an operation
  other than r, c, u, d or t, or a null key column on an event that is not a truncate
  (truncates have null keys). One query, so one test node per change log rather than one per
  rule (each node costs a query plan and a Spark job on every build). `unique_key`: the table's
  key columns.
#}
{% test cdc_change_log_valid(model, unique_key) %}
{%- set keys = [unique_key] if unique_key is string else unique_key %}

with

checked as (
    select
        *,
        case
            when _cdc_seq is null then '_cdc_seq is null'
            when _cdc_op not in ('r', 'c', 'u', 'd', 't') then 'unknown _cdc_op'
            {% for column in keys -%}
            when _cdc_op != 't' and {{ adapter.quote(column) }} is null then '{{ column }} is null'
            {%- endfor %}
        end as _cdc_failure
    from {{ model }}
)

select *
from checked
where _cdc_failure is not null
{% endtest %}
