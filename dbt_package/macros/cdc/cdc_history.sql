{#
  Body of an SCD type 2 history model:
  `{{ cdc_lakehouse.cdc_history(ref('stg_<source>__<entity>_changes'), unique_key=[...], ignore_columns=[...], delete_mode='hard') }}`
  One row per version of each key, `valid_from` / `valid_to` from the source commit time (ties
  broken by `_cdc_seq`). `ignore_columns`: a change of only these columns opens no version (the
  version keeps the values it opened with). Delete mode as in silver: `soft` adds a deletion-marker
  row. Full build: the whole change log. Incremental run (strategy `cdc_history`): every key
  touched by changes loaded since the table's watermark is recomputed from the whole change log.
#}
{% macro cdc_history(changes, unique_key, ignore_columns=[], delete_mode=none) %}
    {%- set keys = [unique_key] if unique_key is string else unique_key -%}
    {%- set mode = delete_mode or var('cdc_delete_mode', 'hard') -%}
    {%- set ignored = [ignore_columns] if ignore_columns is string else ignore_columns -%}
    {#- A version is a key and the sequence that opened it (Hudi's record key; see adapter hudi.sql). -#}
    {#- Incremental with the cdc_history strategy and cdc_finalize_merge as post-hook, as
        cdc_current_state is with cdc_merge. -#}
    {{ config(
        materialized='incremental', incremental_strategy='cdc_history', on_schema_change='ignore',
        post_hook='{{ cdc_lakehouse.cdc_finalize_merge() }}', unique_key=keys, cdc_delete_mode=mode,
        cdc_history_ignore_columns=ignored, hudi_record_key=keys + ['_cdc_valid_from_seq'],
    ) }}
    {{ return(adapter.dispatch('cdc_history', 'cdc_lakehouse')(changes, keys, ignored, mode)) }}
{% endmacro %}


{#
  What an incremental run of a history model must recompute, decided by one query on the change
  log so that the model's own query stays small (Spark inlines CTEs: every decision left to SQL
  multiplies the plan): one aggregation of the whole log by sequence (key changes, truncates
  loaded before), one of the touched keys' earlier events (late events) and one of the new
  events; which touched keys took part in a primary-key change is a second query, asked only
  when the log holds one (a scalar subquery per question was a Spark job each). Returns
  `empty` (nothing loaded since the watermark), `all_keys` (a new
  truncate, or a newly declared column filled for events already applied, see
  cdc_has_backfilled_columns), `linked_keys` (a touched key took part in a primary-key change),
  `key_changes` (the change log holds a primary-key change at all, as cdc_change_log_plan says; asked
  in the same query) and
  `newest` (SQL expression of the newest `_cdc_loaded_at`), `queried` (true: the scope was
  read off the change log, so its events can be checkpointed, see cdc_history_scope_checkpoint),
  `appends_only` (every new event follows all events of its key loaded before, and every
  truncate: no placeholder, no primary-key change among the touched keys, no column the table
  lacks; see cdc_history_appends), `deletes` (the new events hold a delete) and `new_events`
  (the session's checkpoint of the new events that this query, the appends' batch and the
  scoped changes read, or none: cdc_new_events_checkpoint).
  A dbt unit test, whose fixtures cannot be queried here, overrides it.
#}
{% macro cdc_history_scope(changes, keys, attributes) %}
    {%- set scope = {
        'empty': false, 'all_keys': false, 'linked_keys': false,
        'newest': '(select max(_cdc_loaded_at) from ' ~ changes ~ ')',
    } -%}
    {%- if not execute -%}
        {{ return(scope) }}
    {%- endif -%}
    {#- A newly declared column holds values of events already applied: every key. -#}
    {%- set stored = cdc_lakehouse.cdc_source_column_names(this, attributes) -%}
    {%- set new_columns = attributes | reject('in', stored) | list -%}
    {%- if cdc_lakehouse.cdc_has_backfilled_columns(changes, new_columns) -%}
        {%- do scope.update({'all_keys': true}) -%}
        {{ return(scope) }}
    {%- endif -%}
    {%- set key_list = cdc_lakehouse.cdc_column_list(keys) -%}
    {%- set watermark = cdc_lakehouse.cdc_watermark(this) -%}
    {%- set new_changes = '(select * from ' ~ changes ~ ' where _cdc_loaded_at > ' ~ watermark ~ ')' -%}
    {#- On the session the new events are read once: this query, the appends' batch and the
        scoped changes read the checkpoint (cdc_new_events_checkpoint). -#}
    {%- set new_events = cdc_lakehouse.cdc_new_events_checkpoint(changes, new_changes) -%}
    {%- set query -%}
        with

        new_changes as (
            select * from {{ new_events or new_changes }}
        ),

        {#- The whole change log by sequence: a create and a delete at one sequence are a
            primary-key change (cdc_key_change_sequences); a truncate loaded before. -#}
        sequences as (
            select
                _cdc_seq,
                {{ cdc_lakehouse.cdc_is_key_change() }} as key_change,
                count_if(_cdc_op = 't' and _cdc_loaded_at <= {{ watermark }}) > 0 as truncate_before
            from {{ changes }}
            where _cdc_op in ('c', 'd', 't')
            group by _cdc_seq
        ),

        {#- The newest sequence and commit time among the events of each touched key loaded
            before: a new event at or before them is late (or a copy of one applied). -#}
        key_ends as (
            select {{ key_list }}, max(_cdc_seq) as _cdc_seq, max(_cdc_source_ts) as _cdc_source_ts
            from {{ changes }}
            left semi join new_changes using ({{ key_list }})
            where _cdc_loaded_at <= {{ watermark }} and _cdc_op != 't'
            group by {{ key_list }}
        )

        select
            count(*),
            count_if(_cdc_op = 't'),
            cast(max(_cdc_loaded_at) as string),
            count_if(coalesce(_cdc_unavailable_columns, '') != ''),
            count_if(_cdc_op = 'd'),
            min(_cdc_seq),
            (select count_if(key_change) from sequences),
            (select max(case when truncate_before then _cdc_seq end) from sequences),
            (
                select count(*)
                from new_changes
                inner join key_ends using ({{ key_list }})
                where
                    new_changes._cdc_seq <= key_ends._cdc_seq
                    or new_changes._cdc_source_ts < key_ends._cdc_source_ts
            )
        from new_changes
    {%- endset -%}
    {%- set row = run_query(query).rows[0] -%}
    {%- set key_changes, newest_truncate = row[6], row[7] -%}
    {#- A truncate loaded before, at or after the first new event: the new events are late. -#}
    {%- set truncated_after = newest_truncate is not none and row[5] is not none and newest_truncate >= row[5] -%}
    {#- Keys that took part in a primary-key change (rare): asked only when the log holds one. -#}
    {%- set linked = 0 -%}
    {%- if key_changes > 0 and row[0] > 0 -%}
        {%- set linked = run_query(
            "select count(*) from " ~ (new_events or new_changes) ~ " as new_changes"
            ~ " left semi join (select " ~ key_list ~ " from " ~ changes
            ~ " where _cdc_op in ('c', 'd') and _cdc_seq in (" ~ cdc_lakehouse.cdc_key_change_sequences(changes) ~ ")) as key_change_keys"
            ~ " using (" ~ key_list ~ ") where new_changes._cdc_op != 't'"
        ).rows[0][0] -%}
    {%- endif -%}
    {{ return({
        'empty': row[0] == 0, 'all_keys': row[1] > 0, 'linked_keys': linked > 0,
        'key_changes': key_changes > 0,
        'appends_only': linked == 0 and row[3] == 0 and row[8] == 0 and not truncated_after and not new_columns,
        'deletes': row[4] > 0,
        'newest': "timestamp'" ~ row[2] ~ "'", 'queried': true, 'watermark': watermark,
        'new_events': new_events,
    }) }}
{% endmacro %}


{% macro default__cdc_history(changes, keys, ignore_columns, delete_mode) %}
{%- set q = adapter.quote -%}
{%- set key_list = cdc_lakehouse.cdc_column_list(keys) -%}
{%- set attributes = cdc_lakehouse.cdc_source_column_names(changes) | reject('in', keys) | list -%}
{%- if execute -%}
    {%- for column in attributes if column in ('valid_from', 'valid_to', 'is_current') -%}
        {{ exceptions.raise_compiler_error(model.name ~ ": source column " ~ column ~ " clashes with a history column") }}
    {%- endfor -%}
    {%- for column in ignore_columns if column not in attributes -%}
        {{ exceptions.raise_compiler_error(model.name ~ ": cdc_history_ignore_columns names " ~ column ~ ", not an attribute column of " ~ changes) }}
    {%- endfor -%}
{%- endif -%}
{%- set tracked = attributes | reject('in', ignore_columns) | list -%}
{#- Versions of a key in true order (cdc_event_order), its terms selected as columns by the
    timeline below: every window after it shares one sort (cdc_event_order_columns). -#}
{%- set by_key = cdc_lakehouse.cdc_by_key(keys, order_columns=true) %}

{%- set scope = cdc_lakehouse.cdc_history_scope(changes, keys, attributes) if is_incremental() else none %}
{#- The new events only append to their keys' histories (see cdc_history_appends). Soft deletes
    with ignored columns are left out: a deletion marker carries the latest value of an ignored
    column, which the stored version may not hold (it keeps the value it opened with). -#}
{%- set appends = scope is not none and not scope.empty and not scope.all_keys
    and scope.get('appends_only', false)
    and not (delete_mode == 'soft' and ignore_columns and scope.get('deletes', true)) %}
{%- if scope is not none and scope.empty %}
{#- Nothing landed since the last run: an empty batch of the table's shape; the strategy and
    the post-hook skip their work (no batch table, no MERGE, no watermark commit). -#}
{{ cdc_lakehouse.cdc_batch_kind_note('nothing_new') }}
select
    *,
    cast(null as string) as _cdc_action,
    cast(null as timestamp) as _cdc_batch_loaded_at
from {{ this }}
where false
{%- elif appends %}
{{ cdc_lakehouse.cdc_batch_kind_note('appends') }}
{{ cdc_lakehouse.cdc_history_appends(changes, keys, attributes, tracked, delete_mode, scope) }}
{%- else %}
{{ cdc_lakehouse.cdc_batch_kind_note('changes' if scope is not none else 'full') }}
{#- The primary-key-change machinery only when the change log holds one: its map and lambda
    make the plan heavy enough to exhaust the optimizer on literal (unit-test) inputs. -#}
{#- A full build and an every-key run resolve the whole change log: what it holds, one query. #}
{%- set whole_log = scope is none or scope.all_keys %}
{%- set plan = cdc_lakehouse.cdc_change_log_plan(changes) if whole_log or scope.get('key_changes') is none else {} %}
{%- set key_changes = scope.key_changes if scope is not none and scope.get('key_changes') is not none else plan.get('key_changes', true) %}
{#- The columns the resolved events' placeholders stand for are carried one by one, the others
    in one window (none: every column one by one; the scoped events' are read below). #}
{%- set carried_columns = plan.get('unavailable_columns') if whole_log else none %}

with

changes as (
    select * from {{ changes }}
),

{%- if scope is not none and not scope.all_keys %}
{%- set checkpoint = cdc_lakehouse.cdc_history_scope_checkpoint(changes, keys, scope) %}
{%- if checkpoint is not none %}
{#- The columns the scoped events' placeholders stand for: the only ones carried one by one. #}
{%- set carried_columns = cdc_lakehouse.cdc_unavailable_column_names(checkpoint) %}

scoped_changes as (
    select * from {{ checkpoint }}
),
{%- else %}

{{ cdc_lakehouse.cdc_history_scoped_changes(keys, scope) }},
{%- endif %}
{%- else %}

scoped_changes as (
    select * from changes
),
{%- endif %}

scoped_events as (
    select * from scoped_changes
    where _cdc_op != 't'
),

{#- Redelivered copies of an event collapse to the first delivered. -#}
events as (
    select
        {%- for column in keys + attributes %}
        {{ q(column) }},
        {%- endfor %}
        _cdc_op,
        _cdc_seq,
        {{ cdc_lakehouse.cdc_event_origin_columns() | join(', ') }},
        split(coalesce(_cdc_unavailable_columns, ''), ',') as _cdc_unavailable
    from (
        {{ cdc_lakehouse.cdc_first_copies('scoped_events', keys) }}
    ) as first_copies
),

truncates as (
    {{ cdc_lakehouse.cdc_truncates('scoped_changes') }}
),

key_starts as (
    select
        {{ key_list }},
        min(_cdc_seq) as _cdc_first_seq
    from events
    group by {{ key_list }}
),

{#- Each key's events, and every truncate after its first event as a closing event of the key. -#}
timeline as (
    select
        *,
        {{ cdc_lakehouse.cdc_event_order_columns() }}
    from (
        select * from events
        union all
        select
            {%- for column in keys %}
            key_starts.{{ q(column) }},
            {%- endfor %}
            {%- for column in attributes %}
            null as {{ q(column) }},
            {%- endfor %}
            't' as _cdc_op,
            truncates._cdc_seq,
            {%- for column in cdc_lakehouse.cdc_event_origin_columns() %}
            truncates.{{ column }},
            {%- endfor %}
            cast(array() as array<string>) as _cdc_unavailable
        from key_starts
        inner join truncates on key_starts._cdc_first_seq < truncates._cdc_seq
    ) as events_and_truncates
),

{#- Commit times only grow along a key's events (row locks); the running maximum keeps the
    intervals ordered even if a source clock went back. -#}
dated as (
    select
        *,
        max(_cdc_source_ts) over ({{ by_key }} rows between unbounded preceding and current row)
            as _cdc_valid_from
    from timeline
),

{#- Each event's key generation (a delete or a truncate starts a new one) and the latest value
    sent for each column in it, skipping unchanged-TOAST placeholders and closing events. -#}
{%- set shared = cdc_lakehouse.cdc_shared_carry_columns(attributes, carried_columns) %}
{%- set own_carry = attributes | reject('in', shared) | list %}
{%- set key_changes = key_changes and own_carry %}
carried as (
    {{ cdc_lakehouse.cdc_carried_events('dated', keys, attributes, order_columns=true, carried=carried_columns) }}
),

{%- if key_changes %}

{{ cdc_lakehouse.cdc_key_change_ctes('carried', keys, own_carry) }}
{%- endif %}

{#- Every event with its full row image; closing events carry the last values of the key. -#}
resolved as (
    select
        {%- for column in keys %}
        carried.{{ q(column) }},
        {%- endfor %}
        {%- for column in attributes %}
        {{ cdc_lakehouse.cdc_resolved_value('carried', column, links='links' if key_changes and column in own_carry else none, shared=shared) }} as {{ q(column) }},
        {%- endfor %}
        carried._cdc_op,
        carried._cdc_seq,
        {%- for column in cdc_lakehouse.cdc_event_origin_columns() %}
        carried.{{ column }},
        {%- endfor %}
        carried._cdc_previous_op,
        carried._cdc_valid_from
        {%- for expression, column in cdc_lakehouse.cdc_event_order_terms() if column %},
        carried.{{ column }}
        {%- endfor %}
    from carried
    {%- if key_changes %}
    left join key_changes as links
        on links._cdc_node = {{ cdc_lakehouse.cdc_key_node('carried', keys) }}
    {%- endif %}
),

{#- The previous event's tracked values: one window over a struct of them, not one per column
    (cdc_history_previous). -#}
compared as (
    {{ cdc_lakehouse.cdc_history_previous('resolved', tracked, by_key) }}
),

{{ cdc_lakehouse.cdc_history_versions(keys, attributes, tracked, delete_mode, scope, order_columns=true) }}
{%- endif %}
{% endmacro %}


{#- The end of a history model's select, over a CTE `compared` (each event of the keys resolved,
    in true order, with `_cdc_previous_op`, `_cdc_valid_from` and `_cdc_previous__<column>`, the
    previous event's value of each tracked column): the versions, each with its interval.
    `order_columns`: `compared` selects cdc_event_order_columns (see cdc_by_key). -#}
{% macro cdc_history_versions(keys, attributes, tracked, delete_mode, scope, order_columns=false) %}
{%- set q = adapter.quote -%}
{%- set by_key = cdc_lakehouse.cdc_by_key(keys, order_columns) %}
{#- A version opens at the first event after nothing or a closing event, and at every change of
    a tracked column; a closing event after a version ends it. -#}
boundaries as (
    select *
    from compared
    where
        case
            when _cdc_op in ('d', 't') then coalesce(_cdc_previous_op not in ('d', 't'), true)
            when coalesce(_cdc_previous_op in ('d', 't'), true) then true
            else not (
                true
                {%- for column in tracked %}
                and {{ q(column) }} <=> {{ q('_cdc_previous__' ~ column) }}
                {%- endfor %}
            )
        end
),

intervals as (
    select
        *,
        lead(_cdc_valid_from) over ({{ by_key }}) as _cdc_valid_to,
        lead(_cdc_seq) over ({{ by_key }}) as _cdc_next_seq
    from boundaries
),

versions as (
    select
        {%- for column in keys + attributes %}
        {{ q(column) }},
        {%- endfor %}
        _cdc_valid_from as valid_from,
        _cdc_valid_to as valid_to,
        _cdc_valid_to is null as is_current,
        _cdc_op in ('d', 't') as _cdc_is_deleted,
        _cdc_op,
        _cdc_seq as _cdc_valid_from_seq,
        _cdc_next_seq as _cdc_valid_to_seq,
        {{ cdc_lakehouse.cdc_event_origin_columns() | join(', ') }}
    from intervals
    {%- if delete_mode != 'soft' %}
    where _cdc_op not in ('d', 't')
    {%- endif %}
),

{%- if scope is not none %}

{#- The recomputed versions of the affected keys; the strategy deletes their stored versions
    that are not among them (a late event merged or split an interval). -#}
final as (
    select
        *,
        'upsert' as _cdc_action,
        {{ scope.newest }} as _cdc_batch_loaded_at
    from versions
)
{%- else %}

final as (
    select * from versions
)
{%- endif %}

select * from final
{%- endmacro %}


{#
  The select of an incremental history run whose new events only append to their keys'
  histories (cdc_history_scope's `appends_only`: each follows every event of its key loaded
  before, and every truncate; none holds an unchanged-TOAST placeholder or takes part in a
  primary-key change). Then a key's stored versions before its last one stay as they are, and
  its last one (open, a deletion marker, or closed by a delete or a truncate) holds all the
  resolution needs of the events before: the values of the last event (a tracked column changes
  only at a version's opening) and its commit time bound (the batch's are not older). The run
  reads the new events and the last stored version of each key they touch, not the keys' whole
  change log; the versions are the full resolution's (cdc_history_versions). The strategy
  merges them without deleting any stored version.
#}
{% macro cdc_history_appends(changes, keys, attributes, tracked, delete_mode, scope) %}
{%- set q = adapter.quote -%}
{%- set key_list = cdc_lakehouse.cdc_column_list(keys) -%}
{%- set by_key = cdc_lakehouse.cdc_by_key(keys) -%}
{%- set origin = cdc_lakehouse.cdc_event_origin_columns() %}

with

{#- Up to the newest load the scope saw: an event loaded since (by another process) was not
    checked for lateness, and the watermark stays before it. #}
new_events as (
    {%- if scope.get('new_events') %}
    {#- The events the scope read (cdc_new_events_checkpoint): none loaded since. #}
    select * from {{ scope.new_events }}
    where _cdc_op != 't'
    {%- else %}
    select * from {{ changes }}
    where
        _cdc_loaded_at > {{ scope.watermark }} and _cdc_loaded_at <= {{ scope.newest }}
        and _cdc_op != 't'
    {%- endif %}
),

last_versions as (
    select *
    from (
        select
            stored.*,
            row_number() over (partition by {{ key_list }} order by _cdc_valid_from_seq desc)
                as _cdc_newest_first
        from {{ this }} as stored
        left semi join new_events using ({{ key_list }})
    ) as ranked
    where _cdc_newest_first = 1
),

{#- Each key's state before the batch as its first event: the last version as stored (valid
    from when it was), or the delete or truncate that closed it (hard mode keeps no row of it);
    then one copy of each new event. -#}
timeline as (
    select
        {%- for column in keys + attributes %}
        {{ q(column) }},
        {%- endfor %}
        case when valid_to is null then _cdc_op else 'd' end as _cdc_op,
        case when valid_to is null then _cdc_valid_from_seq else _cdc_valid_to_seq end as _cdc_seq,
        {{ origin | join(', ') }},
        case when valid_to is null then valid_from else valid_to end as _cdc_stored_valid_from
    from last_versions
    union all
    select
        {%- for column in keys + attributes %}
        {{ q(column) }},
        {%- endfor %}
        _cdc_op,
        _cdc_seq,
        {{ origin | join(', ') }},
        cast(null as timestamp) as _cdc_stored_valid_from
    from (
        {{ cdc_lakehouse.cdc_first_copies('new_events', keys) }}
    ) as first_copies
),

sequenced as (
    select
        *,
        lag(_cdc_op) over ({{ by_key }}) as _cdc_previous_op,
        coalesce(
            _cdc_stored_valid_from,
            max(_cdc_source_ts) over ({{ by_key }} rows between unbounded preceding and current row)
        ) as _cdc_valid_from
        {%- if attributes %},
        lag({{ cdc_lakehouse.cdc_row_struct(attributes) }}) over ({{ by_key }}) as _cdc_previous
        {%- endif %}
    from timeline
),

{#- A closing event carries the values of the event before it in its key generation (no
    placeholder to skip); the stored state keeps its own. -#}
compared as (
    select
        {%- for column in keys %}
        {{ q(column) }},
        {%- endfor %}
        {%- for column in attributes %}
        case
            when _cdc_op not in ('d', 't') or _cdc_stored_valid_from is not null then {{ q(column) }}
            when _cdc_previous_op not in ('d', 't') then _cdc_previous.{{ q(column) }}
        end as {{ q(column) }},
        {%- endfor %}
        {%- for column in tracked %}
        _cdc_previous.{{ q(column) }} as {{ q('_cdc_previous__' ~ column) }},
        {%- endfor %}
        _cdc_op,
        _cdc_seq,
        {{ origin | join(', ') }},
        _cdc_previous_op,
        _cdc_valid_from
    from sequenced
),

{{ cdc_lakehouse.cdc_history_versions(keys, attributes, tracked, delete_mode, scope) }}
{%- endmacro %}



{#- A select over `source` adding `_cdc_previous__<column>`, the value of each `tracked` column
    in the key's previous event (null for its first), as cdc_history_versions reads them. One
    window over a struct of the columns gives them all: a window per column made the plan of a
    wide table grow with its columns (54 columns: 54 lag functions to analyse, optimise and
    evaluate, where one does). -#}
{% macro cdc_history_previous(source, tracked, by_key) %}
    {%- set q = adapter.quote -%}
    {%- if not tracked %}
    select * from {{ source }}
    {%- else %}
    select
        *
        {%- for column in tracked %},
        _cdc_previous.{{ q(column) }} as {{ q('_cdc_previous__' ~ column) }}
        {%- endfor %}
    from (
        select
            *,
            lag({{ cdc_lakehouse.cdc_row_struct(tracked) }}) over ({{ by_key }}) as _cdc_previous
        from {{ source }}
    ) as previous
    {%- endif %}
{%- endmacro %}


{#
  Point-in-time read: a select of the state of each key of history model `history` (a relation)
  as of `as_of` (a SQL timestamp expression, e.g. "timestamp'2024-06-04 12:00:00'"): the version
  live at that instant, deleted keys left out. Same columns as the history model.
  `{{ cdc_lakehouse.cdc_as_of(ref('customers_history'), "timestamp'2024-06-04 12:00:00'") }}`
#}
{% macro cdc_as_of(history, as_of) %}
    select *
    from {{ history }} as history
    where {{ cdc_lakehouse.cdc_valid_at('history', as_of) }}
{%- endmacro %}


{#
  Join predicate for point-in-time joins: the version of history alias `alias` that was live at
  `at` (a SQL expression, per row: e.g. the order's placement time). Intervals are half-open,
  `[valid_from, valid_to)`, so exactly one version matches, or none when the key did not exist.
#}
{% macro cdc_valid_at(alias, at) %}
    {{- alias }}.valid_from <= {{ at }}
    and ({{ alias }}.valid_to > {{ at }} or {{ alias }}.valid_to is null)
    and not {{ alias }}._cdc_is_deleted
{%- endmacro %}


{#- Columns of a history model that describe its interval, not the source row. -#}
{% macro cdc_history_interval_columns() %}
    {{ return(['valid_from', 'valid_to', 'is_current']) }}
{% endmacro %}


{#- Source columns of history model `relation` that a current-state model must match: all but
    the interval columns and its ignored columns. -#}
{% macro cdc_history_compared_columns(relation) %}
    {%- set ignored = cdc_lakehouse.cdc_history_ignore_columns_of(relation) -%}
    {%- set columns = [] -%}
    {%- if execute -%}
        {%- for column in adapter.get_columns_in_relation(relation) -%}
            {%- set name = column.name -%}
            {%- if not name.startswith('_cdc_') and name not in cdc_lakehouse.cdc_history_interval_columns() + ignored -%}
                {%- do columns.append(adapter.quote(name)) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(columns | join(', ') if columns else '1 as no_columns') }}
{% endmacro %}


{#- The `cdc_history_ignore_columns` config of the history model behind `relation` (for tests). -#}
{% macro cdc_history_ignore_columns_of(relation) %}
    {%- set node = cdc_lakehouse.cdc_model_node_of(relation) -%}
    {%- set ignored = (node.config.get('cdc_history_ignore_columns') if node else none) or [] -%}
    {{ return([ignored] if ignored is string else ignored) }}
{% endmacro %}


{#- The events an incremental history run recomputes, as the CTEs `affected_keys` and
    `scoped_changes` over a CTE `changes` (the change log): keys touched by changes loaded since
    the watermark (and, when one of them took part in a primary-key change, every key that did:
    their TOAST values flow between them) are recomputed from their whole change log, with every
    truncate. -#}
{% macro cdc_history_scoped_changes(keys, scope) %}
{%- set key_list = cdc_lakehouse.cdc_column_list(keys) -%}
affected_keys as (
    select distinct {{ key_list }}
    {%- if scope.get('new_events') %}
    from {{ scope.new_events }}
    where _cdc_op != 't'
    {%- else %}
    from changes
    where _cdc_loaded_at > {{ scope.get('watermark') or cdc_lakehouse.cdc_watermark(this) }} and _cdc_op != 't'
    {%- endif %}
    {%- if scope.linked_keys %}
    union
    select {{ key_list }}
    from changes
    left semi join ({{ cdc_lakehouse.cdc_key_change_sequences('changes') }}) as key_change_seqs using (_cdc_seq)
    where _cdc_op in ('c', 'd')
    {%- endif %}
),

scoped_changes as (
    select changes.*
    from changes
    left semi join affected_keys using ({{ key_list }})
    union all
    select * from changes
    where _cdc_op = 't'
)
{%- endmacro %}


{#- The scoped changes of an incremental history run read once (method: session): a
    checkpoint view in this process's session (the adapter's checkpoint_view), which the
    resolution reads in place of the change log. Inlined, the change log was scanned once per
    reference in the resolution's plan (26 scans of the bronze table for one run of the
    sample's customers history, with the staging view's filter each time); the checkpoint
    costs one. Returns the view (dropped by the post-hook), or none: a command that does not run
    the model (`dbt compile`, `docs generate`, `show`: no post-hook would drop it, and the SQL
    inlined is only compiled or read once), a Thrift target (no session in this process), or a
    scope not read off the change log (a unit test's fixtures). -#}
{% macro cdc_history_scope_checkpoint(changes, keys, scope) %}
    {%- if not execute or flags.WHICH not in ('build', 'run') or target.method != 'session' or not scope.get('queried', false) -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set view = cdc_lakehouse.cdc_history_scope_relation(this) -%}
    {%- set query -%}
        with
        changes as (
            select * from {{ changes }}
        ),
        {{ cdc_lakehouse.cdc_history_scoped_changes(keys, scope) }}
        select * from scoped_changes
    {%- endset -%}
    {%- do adapter.checkpoint_view(query, view) -%}
    {{ return(view) }}
{% endmacro %}


{#- The session's temporary view of a history model's scoped changes. -#}
{% macro cdc_history_scope_relation(relation) %}
    {{ return(cdc_lakehouse.cdc_session_view(relation, 'cdc_scope')) }}
{% endmacro %}
