{#
  Fails for rows of a current-state table (a cdc_current_state model) that break its rules, each
  with the reason in `_cdc_failure`: no `_cdc_seq` (the order its row was applied in); a column
  holding Debezium's unchanged-TOAST placeholder (silver keeps the previous value, never the
  placeholder: the rule of cdc_no_toast_placeholder); in hard-delete mode, a row that should be
  gone (the rule of cdc_hard_deletes_removed: flagged deleted, or older than a delete of its key
  or a truncate the table applied; a resurrected row fails it). One query, so one test node per
  table rather than one per rule (each node costs a query plan and a Spark job on every build).
  dbt's `unique` and `not_null` on the key stay tests of their own. The rows of keys with
  events since the runners' last tested run, in their runs (cdc_tested_rows).
#}
{% test cdc_current_state_valid(model, placeholder='__debezium_unavailable_value') %}

with

checked as (
    select
        *,
        case
            when _cdc_seq is null then '_cdc_seq is null'
            when {{ cdc_lakehouse.cdc_placeholder_predicate(model, placeholder) }}
                then 'unchanged-TOAST placeholder'
        end as _cdc_failure
    from {{ cdc_lakehouse.cdc_tested_rows(model) }}
)

select *
from checked
where _cdc_failure is not null
{% if cdc_lakehouse.cdc_delete_mode_of(model) == 'hard' -%}

union all

select
    *,
    'deleted at the source' as _cdc_failure
from ({{ cdc_lakehouse.cdc_rows_deleted_at_source(model) }}) as deleted
{%- endif %}
{% endtest %}
