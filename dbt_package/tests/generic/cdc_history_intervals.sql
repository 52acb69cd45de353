{#
  Fails for versions of a history model whose intervals do not chain: per key, in
  `_cdc_valid_from_seq` order, each version must end (`valid_to`, `_cdc_valid_to_seq`) no later
  than the next one starts, never before it starts itself, and be `is_current` exactly when it
  has no end. `unique_key`: the model's key columns.
#}
{% test cdc_history_intervals(model, unique_key) %}
{%- set keys = [unique_key] if unique_key is string else unique_key %}

with

versions as (
    select
        *,
        lead(_cdc_valid_from_seq) over (
            partition by {{ keys | join(', ') }} order by _cdc_valid_from_seq
        ) as _cdc_next_from_seq,
        lead(valid_from) over (
            partition by {{ keys | join(', ') }} order by _cdc_valid_from_seq
        ) as _cdc_next_from
    from {{ model }}
)

select *
from versions
where
    is_current != (_cdc_valid_to_seq is null)
    or (valid_to is null) != (_cdc_valid_to_seq is null)
    or _cdc_valid_to_seq <= _cdc_valid_from_seq
    or valid_to < valid_from
    or (_cdc_next_from_seq is not null and (_cdc_valid_to_seq is null or _cdc_valid_to_seq > _cdc_next_from_seq))
    or (_cdc_next_from is not null and valid_to > _cdc_next_from)
{% endtest %}
