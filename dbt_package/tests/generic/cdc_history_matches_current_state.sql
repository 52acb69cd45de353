{#
  Fails for every difference between the live versions of a history model (`is_current`, not
  deleted) and the rows of its current-state model `current_state` (not deleted), over the key
  and the tracked source columns (the history's `cdc_history_ignore_columns` are left out: a
  version keeps their value from when it opened). In the runners' runs, both sides' rows of the
  keys with events since their last tested run (cdc_tested_rows: the two models read one
  change log).
#}
{% test cdc_history_matches_current_state(model, current_state) %}
{%- set column_list = cdc_lakehouse.cdc_history_compared_columns(model) %}

with

history_current as (
    select {{ column_list }}
    from {{ cdc_lakehouse.cdc_tested_rows(model) }}
    where is_current and not _cdc_is_deleted
),

current_state as (
    select {{ column_list }}
    from {{ cdc_lakehouse.cdc_tested_rows(current_state) }}
    where not _cdc_is_deleted
),

only_in_history as (
    select
        'only in history' as _cdc_difference,
        *
    from (
        select * from history_current
        except all
        select * from current_state
    ) as difference
),

only_in_current_state as (
    select
        'only in current state' as _cdc_difference,
        *
    from (
        select * from current_state
        except all
        select * from history_current
    ) as difference
)

select * from only_in_history
union all
select * from only_in_current_state
{% endtest %}
