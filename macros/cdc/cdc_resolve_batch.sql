{#
  Resolve a batch of change events into one row per key: the row silver must hold after the batch.
  Takes the change-log relation (`changes`), key and attribute column names, and for incremental
  runs the silver `target` with its attribute columns and a `tombstones` query (keys, _cdc_seq;
  null keys = a truncate). Returns a select with silver's columns plus `_cdc_action`
  (upsert | delete | truncate), `_cdc_target_exists` (the key has a row in `target`) and
  `_cdc_batch_loaded_at` (newest change read).
  `carry=false` is for a batch without unchanged-TOAST placeholders (no event lists
  `_cdc_unavailable_columns`, see cdc_batch_has_unavailable): nothing needs carrying, so one
  window over the key's events replaces the carry windows and the key-change chains, with the
  same result. The default, `carry=true`, is right for every batch.
#}
{% macro cdc_resolve_batch(changes, key_columns, attribute_columns, target=none, target_attribute_columns=[], tombstones=none, carry=true) %}
    {{ return(adapter.dispatch('cdc_resolve_batch', 'cdc_lakehouse')(changes, key_columns, attribute_columns, target, target_attribute_columns, tombstones, carry)) }}
{% endmacro %}


{% macro default__cdc_resolve_batch(changes, key_columns, attribute_columns, target, target_attribute_columns, tombstones, carry=true) %}
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

{#- Only silver rows and remembered deletes of keys in the batch can matter: reading just those
    keeps the joins below as small as the batch, whatever the size of silver. -#}
batch_keys as (
    select distinct {{ key_list }}
    from batch
    where {{ q(keys[0]) }} is not null
),

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
    left semi join batch_keys using ({{ key_list }})
),

stored_tombstones as (
    {{ tombstones }}
),

key_tombstones as (
    select
        {{ key_list }},
        max(_cdc_seq) as _cdc_tombstone_seq
    from stored_tombstones
    left semi join batch_keys using ({{ key_list }})
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

{%- if carry %}
carried as (
    {{ cdc_carried_events('candidates', attribute_columns, by_key) }}
),

winners as (
    select *
    from carried
    where _cdc_is_last
),

{#- A primary-key change arrives as a delete of the old key and a create of the new key at one
    sequence; an unchanged TOAST value of the new key's generation is found under the old key
    (in the batch, or in silver), or, when the old key itself came from a key change in this
    batch, further up that chain. Only the keys taking part in a key change need this, so it
    reads their events alone (usually none), not the whole batch again. -#}
key_change_seqs as (
    select _cdc_seq
    from candidates
    where _cdc_op in ('c', 'd')
    group by _cdc_seq
    having count_if(_cdc_op = 'd') = 1 and count_if(_cdc_op = 'c') > 0
),

key_change_keys as (
    select distinct {{ key_list }}
    from candidates
    left semi join key_change_seqs using (_cdc_seq)
    where _cdc_op in ('c', 'd')
),

{#- Broadcast: key changes are few, and the batch is then not shuffled a second time. -#}
key_change_candidates as (
    select /*+ broadcast(key_change_keys) */ *
    from candidates
    left semi join key_change_keys using ({{ key_list }})
),

key_change_carried as (
    {{ cdc_carried_events('key_change_candidates', attribute_columns, by_key) }}
),

{#- The old key of a key change: the single delete at that sequence. -#}
donors as (
    select
        _cdc_seq as _cdc_donor_seq,
        {%- for column in keys %}
        {{ q(column) }} as {{ q('_cdc_donor__' ~ column) }},
        {%- endfor %}
        _cdc_generation as _cdc_donor_generation
        {%- for column in attribute_columns %},
        case
            when {{ q('_cdc_carried__' ~ column) }}.g = _cdc_generation
                then named_struct('v', {{ q('_cdc_carried__' ~ column) }}.v)
            {%- if target is not none and column in target_attribute_columns %}
            when _cdc_generation = 0 and _cdc_target_seq is not null and not _cdc_target_is_deleted
                then named_struct('v', {{ q('_cdc_target__' ~ column) }})
            {%- endif %}
        end as {{ q('_cdc_found__' ~ column) }}
        {%- endfor %}
    from key_change_carried
    left semi join key_change_seqs using (_cdc_seq)
    where _cdc_op = 'd'
),

{#- One link per key generation started by a key change: what the old key holds (`_cdc_found`,
    one struct per column, null when not known there) and the old key's generation. -#}
{%- set node_keys = [] -%}
{%- for column in keys -%}
    {%- do node_keys.append("'" ~ column ~ "', {alias}." ~ q(column)) -%}
{%- endfor %}
key_change_links as (
    select
        to_json(named_struct('k', named_struct({{ node_keys | join(', ') | replace('{alias}', 'starts') }}), 'g', starts._cdc_generation)) as _cdc_node,
        to_json(named_struct('k', named_struct(
            {%- for column in keys -%}
            '{{ column }}', donors.{{ q('_cdc_donor__' ~ column) }}{{ ", " if not loop.last }}
            {%- endfor -%}
        ), 'g', donors._cdc_donor_generation)) as _cdc_parent,
        named_struct(
            {%- for column in attribute_columns %}
            '{{ column }}', donors.{{ q('_cdc_found__' ~ column) }}{{ "," if not loop.last }}
            {%- endfor %}
        ) as _cdc_found
    from key_change_carried as starts
    inner join donors
        on
            starts._cdc_seq = donors._cdc_donor_seq
            and not (
                {%- for column in keys %}
                starts.{{ q(column) }} <=> donors.{{ q('_cdc_donor__' ~ column) }}
                {{- " and" if not loop.last }}
                {%- endfor %}
            )
    where starts._cdc_op = 'c' and starts._cdc_is_generation_start
),

key_change_map as (
    select
        map_from_entries(
            collect_list(struct(_cdc_node, named_struct('parent', _cdc_parent, 'found', _cdc_found)))
        ) as _cdc_links
    from key_change_links
),

{#- Follow each chain of key changes (up to 64 in one batch) to the first old key that holds a
    value, column by column. -#}
key_changes as (
    select
        _cdc_node,
        aggregate(
            sequence(1, 64),
            named_struct('parent', _cdc_parent, 'found', _cdc_found),
            (acc, i) -> case
                when acc.parent is null or not map_contains_key(_cdc_links, acc.parent)
                    then named_struct('parent', cast(null as string), 'found', acc.found)
                else named_struct(
                    'parent', _cdc_links[acc.parent].parent,
                    'found', named_struct(
                        {%- for column in attribute_columns %}
                        '{{ column }}', coalesce(acc.found.{{ q(column) }}, _cdc_links[acc.parent].found.{{ q(column) }}){{ "," if not loop.last }}
                        {%- endfor %}
                    )
                )
            end
        ).found as _cdc_found
    from key_change_links
    cross join key_change_map
),

{#- Broadcast: key changes are few, and the winners are then not shuffled again. -#}
resolved as (
    select /*+ broadcast(links) */
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
            when links._cdc_found.{{ q(column) }} is not null
                then links._cdc_found.{{ q(column) }}.v
        end as {{ q(column) }},
        {%- endfor %}
        {{- cdc_winner_columns(target_only, target is not none) }}
    from winners
    left join key_changes as links
        on links._cdc_node = to_json(named_struct('k', named_struct({{ node_keys | join(', ') | replace('{alias}', 'winners') }}), 'g', winners._cdc_generation))
),

{%- else %}

{#- No placeholder in the batch: an event's values are its own. The winner is the key's last
    event; a delete keeps the values of the event before it in the same key generation (the
    last sent since the previous delete), or silver's row when the batch has nothing earlier,
    as the carry windows would find. -#}
winners as (
    select *
    from (
        select
            *,
            lead(1) over ({{ by_key }}) is null as _cdc_is_last,
            lag(_cdc_op) over ({{ by_key }}) as _cdc_previous_op
            {%- if attribute_columns %},
            lag(named_struct(
                {%- for column in attribute_columns %}
                '{{ column }}', {{ q(column) }}{{ "," if not loop.last }}
                {%- endfor %}
            )) over ({{ by_key }}) as _cdc_previous
            {%- endif %}
        from candidates
    ) as sequenced
    where _cdc_is_last
),

resolved as (
    select
        {%- for column in keys %}
        winners.{{ q(column) }},
        {%- endfor %}
        {%- for column in attribute_columns %}
        case
            when winners._cdc_op != 'd'
                then winners.{{ q(column) }}
            when winners._cdc_previous_op is not null and winners._cdc_previous_op != 'd'
                then winners._cdc_previous.{{ q(column) }}
            {%- if target is not none and column in target_attribute_columns %}
            when
                winners._cdc_previous_op is null
                and winners._cdc_target_seq is not null
                and not winners._cdc_target_is_deleted
                then winners.{{ q('_cdc_target__' ~ column) }}
            {%- endif %}
        end as {{ q(column) }},
        {%- endfor %}
        {{- cdc_winner_columns(target_only, target is not none) }}
    from winners
),
{%- endif %}

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
        'truncate' as _cdc_action,
        false as _cdc_target_exists
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


{#
  Select over `source` (candidate events with `_cdc_unavailable`) adding, per event: its key
  generation (`_cdc_generation`, a delete starts a new one: values never carry across it),
  `_cdc_is_last`, `_cdc_is_generation_start`, and for each attribute column the latest value
  sent in the key's generation up to this event (`_cdc_carried__<column>`, a struct of the
  generation and the value), skipping unchanged-TOAST placeholders and delete images.
#}
{% macro cdc_carried_events(source, attribute_columns, by_key) %}
    select
        *
        {%- for column in attribute_columns %},
        last(
            case
                when _cdc_op != 'd' and not array_contains(_cdc_unavailable, '{{ column }}')
                    then named_struct('g', _cdc_generation, 'v', {{ adapter.quote(column) }})
            end,
            true
        ) over ({{ by_key }} rows between unbounded preceding and current row)
            as {{ adapter.quote('_cdc_carried__' ~ column) }}
        {%- endfor %}
    from (
        select
            *,
            coalesce(
                sum(case when _cdc_op = 'd' then 1 else 0 end) over (
                    {{ by_key }} rows between unbounded preceding and 1 preceding
                ),
                0
            ) as _cdc_generation,
            lead(1) over ({{ by_key }}) is null as _cdc_is_last,
            coalesce(lag(_cdc_op) over ({{ by_key }}) = 'd', true) as _cdc_is_generation_start
        from {{ source }}
    ) as sequenced
{% endmacro %}


{#- The columns of a resolved row after its attribute values, taken from the winning event
    (`winners`): silver-only columns from the target row, then the change metadata and action. -#}
{% macro cdc_winner_columns(target_only, has_target) %}
        {%- for column in target_only %}
        winners.{{ adapter.quote('_cdc_target__' ~ column) }} as {{ adapter.quote(column) }},
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
        case when winners._cdc_op = 'd' then 'delete' else 'upsert' end as _cdc_action,
        {{ "winners._cdc_target_seq is not null" if has_target else "false" }} as _cdc_target_exists
{%- endmacro %}
