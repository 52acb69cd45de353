{#
  Resolve a batch of change events into one row per key: the row silver must hold after the batch.
  Takes the change-log relation (`changes`), key and attribute column names, and for incremental
  runs the silver `target` with its attribute columns and a `tombstones` query (keys, _cdc_seq;
  null keys = a truncate). Returns a select with silver's columns plus `_cdc_action`
  (upsert | delete | truncate), `_cdc_target_exists` (the key has a row in `target`) and
  `_cdc_batch_loaded_at` (newest change read).
  `carry=false` is for a batch without unchanged-TOAST placeholders (no event lists
  `_cdc_unavailable_columns`, see cdc_change_log_plan): nothing needs carrying, so one
  window over the key's events replaces the carry windows and the key-change chains, with the
  same result. A list names the columns the batch's placeholders stand for (cdc_new_changes'
  `unavailable_columns`): only those get carry windows and key-change chains of their own, the
  others are carried together in one window (cdc_carried_events), with the same result. The
  default, `carry=true`, is right for every batch.
  `key_changes=false` is for a carrying batch without a primary-key change (no sequence holds a
  create and a delete, see cdc_change_log_plan): the key-change chains, which would find no key
  to follow, are left out of the plan (they double its size). The default is right for every
  batch.
  `deleted_values=false` is for a silver table in hard-delete mode, whose deletes remove the row:
  a delete's attribute values are then NULL, not the values it keeps in soft-delete mode (the
  last sent in its key generation). Without placeholders that leaves out a window over whole
  rows, the previous event of every event, kept only for deletes. Carrying batches (carry=true)
  compute them either way.
#}
{% macro cdc_resolve_batch(changes, key_columns, attribute_columns, target=none, target_attribute_columns=[], tombstones=none, carry=true, key_changes=true, deleted_values=true) %}
    {{ return(adapter.dispatch('cdc_resolve_batch', 'cdc_lakehouse')(changes, key_columns, attribute_columns, target, target_attribute_columns, tombstones, carry, key_changes, deleted_values)) }}
{% endmacro %}


{% macro default__cdc_resolve_batch(changes, key_columns, attribute_columns, target, target_attribute_columns, tombstones, carry=true, key_changes=true, deleted_values=true) %}
{%- set q = adapter.quote -%}
{%- set keys = key_columns | map('trim') | list -%}
{%- set key_list = cdc_lakehouse.cdc_column_list(keys) -%}
{#- The batch selects the event order's terms as columns: every window below shares one sort. -#}
{%- set by_key = cdc_lakehouse.cdc_by_key(keys, order_columns=true) -%}
{%- set target_only = target_attribute_columns | reject('in', attribute_columns) | reject('in', keys) | list -%}

with

batch as (
    select
        *,
        split(coalesce(_cdc_unavailable_columns, ''), ',') as _cdc_unavailable,
        {{ cdc_lakehouse.cdc_event_order_columns() }}
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
    {{ cdc_lakehouse.cdc_truncates('batch') }}
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
    of the key (or that delete itself: the strategy records a batch's deletes before its rows,
    so a run that stopped in between finds them remembered but not applied), and than the
    latest truncate. -#}
candidate_copies as (
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
        and _cdc_seq >= coalesce(_cdc_tombstone_seq, -1)
        {%- endif %}
),

{#- Redelivered copies of an event collapse to the first delivered. -#}
candidates as (
    {{ cdc_lakehouse.cdc_first_copies('candidate_copies', keys, order_columns=true) }}
),

{%- if carry %}
{#- Columns a placeholder of the batch may stand for, each carried in a window of its own; the
    others share one (cdc_carried_events). -#}
{%- set carried_columns = none if carry is sameas true else carry -%}
{%- set shared = cdc_lakehouse.cdc_shared_carry_columns(attribute_columns, carried_columns) -%}
{%- set own_carry = attribute_columns | reject('in', shared) | list -%}
carried as (
    {{ cdc_lakehouse.cdc_carried_events('candidates', keys, attribute_columns, order_columns=true, carried=carried_columns) }}
),

winners as (
    select *
    from carried
    where _cdc_is_last
),

{%- if key_changes and own_carry %}

{#- A primary-key change arrives as a delete of the old key and a create of the new key at one
    sequence; an unchanged TOAST value of the new key's generation is found under the old key
    (in the batch, or in silver), or, when the old key itself came from a key change in this
    batch, further up that chain. -#}
{{ cdc_lakehouse.cdc_key_change_ctes('carried', keys, own_carry, target_attribute_columns if target is not none else []) }}

{#- Broadcast: key changes are few, and the winners are then not shuffled again. -#}
resolved as (
    select /*+ broadcast(links) */
        {%- for column in keys %}
        winners.{{ q(column) }},
        {%- endfor %}
        {%- for column in attribute_columns %}
        {{ cdc_lakehouse.cdc_resolved_value('winners', column, target is not none and column in target_attribute_columns, links='links' if column in own_carry else none, shared=shared) }} as {{ q(column) }},
        {%- endfor %}
        {{- cdc_lakehouse.cdc_winner_columns(target_only, target is not none) }}
    from winners
    left join key_changes as links
        on links._cdc_node = {{ cdc_lakehouse.cdc_key_node('winners', keys) }}
),

{%- else %}

resolved as (
    select
        {%- for column in keys %}
        winners.{{ q(column) }},
        {%- endfor %}
        {%- for column in attribute_columns %}
        {{ cdc_lakehouse.cdc_resolved_value('winners', column, target is not none and column in target_attribute_columns, links=none, shared=shared) }} as {{ q(column) }},
        {%- endfor %}
        {{- cdc_lakehouse.cdc_winner_columns(target_only, target is not none) }}
    from winners
),
{%- endif %}

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
            lead(1) over ({{ by_key }}) is null as _cdc_is_last
            {%- if deleted_values %},
            lag(_cdc_op) over ({{ by_key }}) as _cdc_previous_op
            {%- endif %}
            {%- if deleted_values and attribute_columns %},
            lag({{ cdc_lakehouse.cdc_row_struct(attribute_columns) }}) over ({{ by_key }}) as _cdc_previous
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
            {%- if deleted_values %}
            when winners._cdc_previous_op is not null and winners._cdc_previous_op != 'd'
                then winners._cdc_previous.{{ q(column) }}
            {%- if target is not none and column in target_attribute_columns %}
            when
                winners._cdc_previous_op is null
                and winners._cdc_target_seq is not null
                and not winners._cdc_target_is_deleted
                then winners.{{ q('_cdc_target__' ~ column) }}
            {%- endif %}
            {%- endif %}
        end as {{ q(column) }},
        {%- endfor %}
        {{- cdc_lakehouse.cdc_winner_columns(target_only, target is not none) }}
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

{#- A scalar subquery rather than a join: a full build, which does not select the column, does
    not read the batch for it. -#}
final as (
    select
        actions.*,
        (select _cdc_batch_loaded_at from batch_high_watermark) as _cdc_batch_loaded_at
    from (
        select * from resolved
        union all
        select * from latest_truncate
    ) as actions
)

select * from final
{%- endmacro %}


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
