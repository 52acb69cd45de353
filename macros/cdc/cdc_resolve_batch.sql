{#
  Resolve a batch of change events into one row per key: the row silver must hold after the batch.
  Takes the change-log relation (`changes`), key and attribute column names, and for incremental
  runs the silver `target` with its attribute columns and a `tombstones` query (keys, _cdc_seq;
  null keys = a truncate). Returns a select with silver's columns plus `_cdc_action`
  (upsert | delete | truncate) and `_cdc_batch_loaded_at` (newest change read).
#}
{% macro cdc_resolve_batch(changes, key_columns, attribute_columns, target=none, target_attribute_columns=[], tombstones=none) %}
    {{ return(adapter.dispatch('cdc_resolve_batch', 'cdc_lakehouse')(changes, key_columns, attribute_columns, target, target_attribute_columns, tombstones)) }}
{% endmacro %}


{% macro default__cdc_resolve_batch(changes, key_columns, attribute_columns, target, target_attribute_columns, tombstones) %}
{%- set q = adapter.quote -%}
{%- set keys = key_columns | map('trim') | list -%}
{%- set key_list = cdc_column_list(keys) -%}
{#- The true event order: the source sequence (LSN), then the landing position. Among exact
    duplicates (same sequence, replayed delivery) the first delivered copy sorts last and wins. -#}
{%- set event_order = "_cdc_seq, coalesce(_cdc_offset, -1) desc, _cdc_file desc, _cdc_line desc" -%}
{%- set by_key = "partition by " ~ key_list ~ " order by " ~ event_order -%}
{%- set target_only = target_attribute_columns | reject('in', attribute_columns) | reject('in', keys) | list -%}

with

batch as (
    select
        *,
        split(coalesce(_cdc_unavailable_columns, ''), ',') as _cdc_unavailable
    from {{ changes }}
),

batch_high_watermark as (
    select max(_cdc_loaded_at) as _cdc_batch_loaded_at
    from batch
),

{%- if target is not none %}

target_rows as (
    select
        {%- for column in keys %}
        {{ q(column) }},
        {%- endfor %}
        {%- for column in target_attribute_columns %}
        {{ q(column) }} as {{ q('_cdc_target__' ~ column) }},
        {%- endfor %}
        _cdc_seq as _cdc_target_seq,
        _cdc_is_deleted as _cdc_target_is_deleted
    from {{ target }}
),

stored_tombstones as (
    {{ tombstones }}
),

key_tombstones as (
    select
        {{ key_list }},
        max(_cdc_seq) as _cdc_tombstone_seq
    from stored_tombstones
    where {{ q(keys[0]) }} is not null
    group by {{ key_list }}
),
{%- endif %}

truncates as (
    select
        _cdc_seq,
        _cdc_source_ts,
        _cdc_tx_id,
        _cdc_file,
        _cdc_line,
        _cdc_offset,
        _cdc_loaded_at
    from batch
    where _cdc_op = 't'
),

truncate_floor as (
    select max(_cdc_seq) as _cdc_truncate_seq
    from (
        select _cdc_seq from truncates
        {%- if target is not none %}
        union all
        select _cdc_seq from stored_tombstones where {{ q(keys[0]) }} is null
        {%- endif %}
    ) as all_truncates
),

{#- Events that can still change silver: newer than the target row, than a remembered delete
    of the key, and than the latest truncate. -#}
candidates as (
    select *
    from batch
    {%- if target is not none %}
    left join target_rows using ({{ key_list }})
    left join key_tombstones using ({{ key_list }})
    {%- endif %}
    cross join truncate_floor
    where
        _cdc_op != 't'
        and _cdc_seq > coalesce(_cdc_truncate_seq, -1)
        {%- if target is not none %}
        and _cdc_seq > coalesce(_cdc_target_seq, -1)
        and _cdc_seq > coalesce(_cdc_tombstone_seq, -1)
        {%- endif %}
),

{#- A delete starts a new generation of the key: values never carry across it. -#}
sequenced as (
    select
        *,
        coalesce(
            sum(case when _cdc_op = 'd' then 1 else 0 end) over (
                {{ by_key }} rows between unbounded preceding and 1 preceding
            ),
            0
        ) as _cdc_generation,
        lead(1) over ({{ by_key }}) is null as _cdc_is_last
    from candidates
),

{#- Latest value sent for each column in the key's generation, skipping unchanged-TOAST
    placeholders and delete images. -#}
carried as (
    select
        *
        {%- for column in attribute_columns %},
        last(
            case
                when _cdc_op != 'd' and not array_contains(_cdc_unavailable, '{{ column }}')
                    then named_struct('g', _cdc_generation, 'v', {{ q(column) }})
            end,
            true
        ) over ({{ by_key }} rows between unbounded preceding and current row)
            as {{ q('_cdc_carried__' ~ column) }}
        {%- endfor %}
    from sequenced
),

winners as (
    select *
    from carried
    where _cdc_is_last
),

{#- A primary-key change arrives as a delete of the old key and a create of the new key at one
    sequence; an unchanged TOAST value of the create is found under the old key. -#}
donors as (
    select
        _cdc_seq as _cdc_donor_seq,
        {%- for column in keys %}
        {{ q(column) }} as {{ q('_cdc_donor__' ~ column) }},
        {%- endfor %}
        {%- for column in attribute_columns %}
        {{ q('_cdc_carried__' ~ column) }} as {{ q('_cdc_donor_carried__' ~ column) }},
        {%- if target is not none and column in target_attribute_columns %}
        {{ q('_cdc_target__' ~ column) }} as {{ q('_cdc_donor_target__' ~ column) }},
        {%- endif %}
        {%- endfor %}
        {%- if target is not none %}
        _cdc_generation = 0
        and _cdc_target_seq is not null
        and not _cdc_target_is_deleted as _cdc_donor_target_usable,
        {%- endif %}
        _cdc_generation as _cdc_donor_generation
    from (
        select
            *,
            count(*) over (partition by _cdc_seq) as _cdc_deletes_at_seq
        from carried
        where _cdc_op = 'd'
    ) as deletes
    where _cdc_deletes_at_seq = 1
),

resolved as (
    select
        {%- for column in keys %}
        winners.{{ q(column) }},
        {%- endfor %}
        {%- for column in attribute_columns %}
        case
            when winners.{{ q('_cdc_carried__' ~ column) }}.g = winners._cdc_generation
                then winners.{{ q('_cdc_carried__' ~ column) }}.v
            {%- if target is not none and column in target_attribute_columns %}
            when
                winners._cdc_generation = 0
                and winners._cdc_target_seq is not null
                and not winners._cdc_target_is_deleted
                then winners.{{ q('_cdc_target__' ~ column) }}
            {%- endif %}
            when donors.{{ q('_cdc_donor_carried__' ~ column) }}.g = donors._cdc_donor_generation
                then donors.{{ q('_cdc_donor_carried__' ~ column) }}.v
            {%- if target is not none and column in target_attribute_columns %}
            when donors._cdc_donor_target_usable
                then donors.{{ q('_cdc_donor_target__' ~ column) }}
            {%- endif %}
        end as {{ q(column) }},
        {%- endfor %}
        {%- for column in target_only %}
        winners.{{ q('_cdc_target__' ~ column) }} as {{ q(column) }},
        {%- endfor %}
        winners._cdc_op,
        winners._cdc_seq,
        winners._cdc_source_ts,
        winners._cdc_tx_id,
        winners._cdc_op = 'd' as _cdc_is_deleted,
        case when winners._cdc_op = 'd' then winners._cdc_source_ts end as _cdc_deleted_at,
        winners._cdc_file,
        winners._cdc_line,
        winners._cdc_offset,
        winners._cdc_loaded_at,
        case when winners._cdc_op = 'd' then 'delete' else 'upsert' end as _cdc_action
    from winners
    left join donors
        on
            winners._cdc_op = 'c'
            and winners._cdc_unavailable_columns is not null
            and winners._cdc_seq = donors._cdc_donor_seq
            and not (
                {%- for column in keys %}
                winners.{{ q(column) }} <=> donors.{{ q('_cdc_donor__' ~ column) }}
                {{- " and" if not loop.last }}
                {%- endfor %}
            )
),

{#- The latest truncate of the batch, as one row: silver drops every row older than it. -#}
latest_truncate as (
    select
        {%- for column in keys + attribute_columns + target_only %}
        null as {{ q(column) }},
        {%- endfor %}
        't' as _cdc_op,
        _cdc_seq,
        _cdc_source_ts,
        _cdc_tx_id,
        true as _cdc_is_deleted,
        _cdc_source_ts as _cdc_deleted_at,
        _cdc_file,
        _cdc_line,
        _cdc_offset,
        _cdc_loaded_at,
        'truncate' as _cdc_action
    from (
        select
            *,
            row_number() over (order by _cdc_seq desc) as _cdc_truncate_rank
        from truncates
    ) as ranked
    where _cdc_truncate_rank = 1
),

final as (
    select
        actions.*,
        batch_high_watermark._cdc_batch_loaded_at
    from (
        select * from resolved
        union all
        select * from latest_truncate
    ) as actions
    cross join batch_high_watermark
)

select * from final
{%- endmacro %}
