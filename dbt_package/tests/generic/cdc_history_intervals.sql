{#
  Fails for versions of a history model that break its shape, each with the reason in
  `_cdc_failure`: a null key column or a null `valid_from`, `is_current`, `_cdc_is_deleted` or
  `_cdc_valid_from_seq`; or intervals that do not chain: per key, in `_cdc_valid_from_seq`
  order, each version must end (`valid_to`, `_cdc_valid_to_seq`) no later than the next one
  starts, never before it starts itself, and be `is_current` exactly when it has no end. The
  chain implies one row per (key, `_cdc_valid_from_seq`) and at most one current version per
  key: of two versions starting at the same sequence, or two without an end, the first has a
  next one it does not end before. One query, so one test node per history rather than one per
  rule (each node costs a query plan and a Spark job on every build). `unique_key`: the model's
  key columns. In the runners' runs, the versions of keys with events since their last tested
  run (cdc_tested_rows).
#}
{% test cdc_history_intervals(model, unique_key) %}
{%- set keys = [unique_key] if unique_key is string else unique_key %}

with

versions as (
    select
        *,
        lead(_cdc_valid_from_seq) over (
            partition by {{ cdc_lakehouse.cdc_column_list(keys) }} order by _cdc_valid_from_seq
        ) as _cdc_next_from_seq,
        lead(valid_from) over (
            partition by {{ cdc_lakehouse.cdc_column_list(keys) }} order by _cdc_valid_from_seq
        ) as _cdc_next_from
    from {{ cdc_lakehouse.cdc_tested_rows(model) }}
),

checked as (
    select
        *,
        case
            {% for column in keys + ['valid_from', 'is_current', '_cdc_is_deleted', '_cdc_valid_from_seq'] -%}
            when {{ adapter.quote(column) }} is null then '{{ column }} is null'
            {%- endfor %}
            when
                is_current != (_cdc_valid_to_seq is null)
                or (valid_to is null) != (_cdc_valid_to_seq is null)
                then 'is_current, valid_to and _cdc_valid_to_seq disagree'
            when _cdc_valid_to_seq <= _cdc_valid_from_seq or valid_to < valid_from
                then 'ends before it starts'
            when
                (_cdc_next_from_seq is not null and (_cdc_valid_to_seq is null or _cdc_valid_to_seq > _cdc_next_from_seq))
                or (_cdc_next_from is not null and valid_to > _cdc_next_from)
                then 'overlaps the next version of its key'
        end as _cdc_failure
    from versions
)

select *
from checked
where _cdc_failure is not null
{% endtest %}
