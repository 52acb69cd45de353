{#
  The resolution engine shared by current state (cdc_resolve_batch) and history (cdc_history):
  event order, collapse of redelivered copies, key generations, the carry of unchanged-TOAST
  values, and primary-key-change chains. The two differ only in what they write: silver the last
  resolved row of each key, history every version.
#}

{#- The true order of a key's events: the source sequence (LSN), a truncate after an event of
    the same sequence, then the landing position (the first delivered copy first). Each term is
    [expression, column]: a computed term names the column cdc_event_order_columns selects it
    as; a plain column has none. Both macros below render from this one list. -#}
{% macro cdc_event_order_terms() %}
    {{- return([
        ["_cdc_seq", none],
        ["_cdc_op = 't'", "_cdc_order_is_truncate"],
        ["coalesce(_cdc_offset, -1)", "_cdc_order_offset"],
        ["_cdc_file", none],
        ["_cdc_line", none],
    ]) -}}
{% endmacro %}


{#- The event order as an `order by` list: the terms' expressions, or with `order_columns` the
    columns cdc_event_order_columns selected them as. -#}
{% macro cdc_event_order(order_columns=false) %}
    {%- set terms = [] -%}
    {%- for expression, column in cdc_lakehouse.cdc_event_order_terms() -%}
        {%- do terms.append(column if order_columns and column else expression) -%}
    {%- endfor -%}
    {{- return(terms | join(", ")) -}}
{% endmacro %}


{#- The computed terms of cdc_event_order, as columns to select beside the events' own: windows
    ordered by cdc_event_order(order_columns=true) over them share one sort of the events. Spark
    matches a window's order with the order its input already has by expression, and an
    expression written again for a later window (after a filter between them) is a new one: the
    events were sorted a second time (the initial load of 10M events, 2 cores: about 4 s of the
    resolution's 29 s, docs/benchmarks.md). -#}
{% macro cdc_event_order_columns() %}
    {%- set columns = [] -%}
    {%- for expression, column in cdc_lakehouse.cdc_event_order_terms() if column -%}
        {%- do columns.append(expression ~ " as " ~ column) -%}
    {%- endfor -%}
    {{- return(columns | join(", ")) -}}
{% endmacro %}


{% macro cdc_by_key(keys, order_columns=false) %}
    {{- return("partition by " ~ cdc_lakehouse.cdc_column_list(keys) ~ " order by " ~ cdc_lakehouse.cdc_event_order(order_columns)) -}}
{% endmacro %}


{#- Select over `source` (change events, no truncates) keeping the first delivered copy of each
    event: copies (at-least-once redelivery, a file written again) share the key and sequence.
    The window is the one the later steps use; with `order_columns` (the source selects
    cdc_event_order_columns) Spark sorts the batch once. -#}
{% macro cdc_first_copies(source, keys, order_columns=false) %}
    select *
    from (
        select
            *,
            lag(_cdc_seq) over ({{ cdc_lakehouse.cdc_by_key(keys, order_columns) }}) as _cdc_previous_seq
        from {{ source }}
    ) as copies
    where _cdc_previous_seq is null or _cdc_previous_seq != _cdc_seq
{%- endmacro %}


{#
  Select over `source` (one copy of each event, `_cdc_unavailable` an array of the columns an
  event left out as unchanged-TOAST placeholders) adding, per event: its key generation
  (`_cdc_generation`: a delete or a truncate closes one, values never carry across it),
  `_cdc_previous_op`, `_cdc_is_generation_start`, `_cdc_is_last`, and for each attribute column the
  latest value sent in the key's generation up to this event, skipping placeholders and closing
  events (see cdc_carried_value).
  `carried`: the attribute columns an event of `source` may leave out (the placeholders the batch
  holds; none: any column). Each gets a window of its own (`_cdc_carried__<column>`, a struct of
  the generation and the value). The others are sent by every event that is not a delete or a
  truncate, so the latest such event holds the latest value of all of them: one window carries
  them together (`_cdc_carried_row`, the generation and a struct of their values), with the same
  result. On a wide table that is one window where there were one per column: 29 events into a
  54-column table with placeholders in two columns planned 63 windows, twice (the key-change
  chains read the carried events again), a 3-4 s query warm and 12-24 s in the test suite;
  with one window for the other 52 columns, 2 s warm (docs/benchmarks.md).
#}
{% macro cdc_carried_events(source, keys, attribute_columns, order_columns=false, carried=none) %}
    {%- set by_key = cdc_lakehouse.cdc_by_key(keys, order_columns) -%}
    {%- set shared = cdc_lakehouse.cdc_shared_carry_columns(attribute_columns, carried) -%}
    select
        *
        {%- for column in attribute_columns if column not in shared %},
        last(
            case
                when _cdc_op not in ('d', 't') and not array_contains(_cdc_unavailable, '{{ column }}')
                    then named_struct('g', _cdc_generation, 'v', {{ adapter.quote(column) }})
            end,
            true
        ) over ({{ by_key }} rows between unbounded preceding and current row)
            as {{ adapter.quote('_cdc_carried__' ~ column) }}
        {%- endfor %}
        {%- if shared %},
        last(
            case
                when _cdc_op not in ('d', 't')
                    then named_struct('g', _cdc_generation, 'v', {{ cdc_lakehouse.cdc_row_struct(shared) }})
            end,
            true
        ) over ({{ by_key }} rows between unbounded preceding and current row)
            as _cdc_carried_row
        {%- endif %}
    from (
        select
            *,
            coalesce(
                sum(case when _cdc_op in ('d', 't') then 1 else 0 end) over (
                    {{ by_key }} rows between unbounded preceding and 1 preceding
                ),
                0
            ) as _cdc_generation,
            lag(_cdc_op) over ({{ by_key }}) as _cdc_previous_op,
            coalesce(lag(_cdc_op) over ({{ by_key }}) in ('d', 't'), true) as _cdc_is_generation_start,
            lead(1) over ({{ by_key }}) is null as _cdc_is_last
        from {{ source }}
    ) as sequenced
{% endmacro %}


{#- A struct of `columns`, each field named as its column (a row's values in one window
    function, where a function per column made wide tables' plans grow with their columns). -#}
{% macro cdc_row_struct(columns) -%}
    named_struct(
        {%- for column in columns %}
        '{{ column }}', {{ adapter.quote(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    )
{%- endmacro %}


{#- The attribute columns cdc_carried_events carries together in `_cdc_carried_row`: those not
    in `carried` (none: no column, each has its window). -#}
{% macro cdc_shared_carry_columns(attribute_columns, carried=none) %}
    {%- if carried is none -%}
        {{ return([]) }}
    {%- endif -%}
    {{ return(attribute_columns | reject('in', carried) | list) }}
{% endmacro %}


{#- The latest value of `column` sent in the key's generation up to carried event `e`, as
    [generation, value] expressions: from the column's own window, or from `_cdc_carried_row` for
    the `shared` columns (cdc_carried_events). -#}
{% macro cdc_carried_value(e, column, shared=[]) %}
    {%- set q = adapter.quote -%}
    {%- if column in shared -%}
        {{ return([e ~ "._cdc_carried_row.g", e ~ "._cdc_carried_row.v." ~ q(column)]) }}
    {%- endif -%}
    {{ return([e ~ "." ~ q('_cdc_carried__' ~ column) ~ ".g", e ~ "." ~ q('_cdc_carried__' ~ column) ~ ".v"]) }}
{% endmacro %}


{#- The sequences of `changes` (raw: copies possible) that hold a primary-key change: a delete of
    the old key and a create of the new key at one sequence. -#}
{% macro cdc_key_change_sequences(changes) %}
    select _cdc_seq
    from {{ changes }}
    where _cdc_op in ('c', 'd')
    group by _cdc_seq
    having {{ cdc_lakehouse.cdc_is_key_change() }}
{%- endmacro %}


{#- Aggregate condition over the events of one sequence (`group by _cdc_seq`): true when they are
    a primary-key change (a create and a delete). The one definition cdc_key_change_sequences
    and the run plans' aggregations by sequence (cdc_new_changes, cdc_history_scope,
    cdc_change_log_plan) share. -#}
{% macro cdc_is_key_change() -%}
    count_if(_cdc_op = 'c') > 0 and count_if(_cdc_op = 'd') > 0
{%- endmacro %}


{#- What resolving the whole change log `changes` (a relation or a parenthesised query) must know
    of it, in one aggregation by sequence: `key_changes` (a primary-key change: a create and a
    delete at one sequence) and `unavailable_columns` (the columns its unchanged-TOAST
    placeholders stand for, sorted: the only ones carried one by one; empty: nothing to carry).
    Asked by full builds and by runs that resolve the whole log again (silver's `replace`,
    history's every-key scope). Not executing: a key change and every column
    (`unavailable_columns` none), right for any log. A dbt unit test, whose fixtures cannot be
    queried here, overrides it; a key it leaves out takes that default. -#}
{% macro cdc_change_log_plan(changes) %}
    {%- if not execute -%}
        {{ return({'key_changes': true, 'unavailable_columns': none}) }}
    {%- endif -%}
    {%- set query -%}
        with

        sequences as (
            select
                {{ cdc_lakehouse.cdc_is_key_change() }} as key_change,
                {{ cdc_lakehouse.cdc_placeholder_columns() }} as unavailable_columns
            from {{ changes }} as change_log
            group by _cdc_seq
        )

        select
            count_if(key_change),
            {{ cdc_lakehouse.cdc_column_names_json('flatten(collect_list(unavailable_columns))') }}
        from sequences
    {%- endset -%}
    {%- set row = run_query(query).rows[0] -%}
    {{ return({
        'key_changes': row[0] > 0,
        'unavailable_columns': cdc_lakehouse.cdc_column_names_from_json(row[1]),
    }) }}
{% endmacro %}


{#- The columns the unchanged-TOAST placeholders (`_cdc_unavailable_columns`) of `changes` (a
    relation or a parenthesised query, read whole) stand for, sorted: the only ones
    cdc_resolve_batch and cdc_history carry one by one; an empty list when no event left a
    column out (nothing to carry). None when not executing: any column may be. -#}
{% macro cdc_unavailable_column_names(changes) %}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set query -%}
        select {{ cdc_lakehouse.cdc_column_names_json(cdc_lakehouse.cdc_placeholder_columns()) }}
        from {{ changes }} as batch
    {%- endset -%}
    {{ return(cdc_lakehouse.cdc_column_names_from_json(run_query(query).rows[0][0])) }}
{% endmacro %}


{#- An aggregate expression: the column names the placeholders of the rows aggregated stand for
    (`_cdc_unavailable_columns`, comma-separated), as an array with repeats. -#}
{% macro cdc_placeholder_columns() -%}
    flatten(collect_list(split(nullif(_cdc_unavailable_columns, ''), ',')))
{%- endmacro %}


{#- An array expression of column names as sorted, distinct JSON (cdc_column_names_from_json). -#}
{% macro cdc_column_names_json(names) -%}
    to_json(array_sort(array_distinct({{ names }})))
{%- endmacro %}


{% macro cdc_column_names_from_json(value) %}
    {{ return(fromjson(value) | reject('equalto', '') | list) }}
{% endmacro %}


{#- Where a column's value comes from, in order: a (condition, value) list over the carried event
    alias `e`. The value sent in the key's generation (`shared`: see cdc_carried_value); with a
    silver `target`, for generation 0, silver's row (a value the batch never sent). -#}
{% macro cdc_value_sources(e, column, from_target, shared=[]) %}
    {%- set q = adapter.quote -%}
    {%- set generation, value = cdc_lakehouse.cdc_carried_value(e, column, shared) -%}
    {%- set sources = [(generation ~ " = " ~ e ~ "._cdc_generation", value)] -%}
    {%- if from_target -%}
        {%- do sources.append((
            e ~ "._cdc_generation = 0 and " ~ e ~ "._cdc_target_seq is not null and not " ~ e ~ "._cdc_target_is_deleted",
            e ~ "." ~ q('_cdc_target__' ~ column),
        )) -%}
    {%- endif -%}
    {{ return(sources) }}
{% endmacro %}


{#- A key generation as one string, the node of a key-change chain: of the event alias `alias`,
    or (`donor`) of the old key it took over (`_cdc_donor`, see cdc_key_change_ctes). -#}
{% macro cdc_key_node(alias, keys, donor=false) %}
    {%- set fields = [] -%}
    {%- for column in keys -%}
        {%- set source = "_cdc_donor.k" ~ loop.index0 if donor else adapter.quote(column) -%}
        {%- do fields.append("'" ~ column ~ "', " ~ alias ~ "." ~ source) -%}
    {%- endfor -%}
    {{- return("to_json(named_struct('k', named_struct(" ~ fields | join(', ') ~ "), 'g', " ~ alias ~ "." ~ ("_cdc_donor.g" if donor else "_cdc_generation") ~ "))") -}}
{% endmacro %}


{#
  CTEs (each followed by a comma) resolving primary-key changes over `events` (the carried
  events of cdc_carried_events, one copy each): a key change is a delete of the old key and a
  create of the new key at one sequence; the new key's generation finds a value it was never
  sent under the old key, as it was at the delete, or further up a chain of key changes (up to
  64 in one run). `from_target`: the old key's value may also be silver's row. Ends with
  `key_changes` (`_cdc_node`, `_cdc_found`: a struct per column, null when not found), joined
  by cdc_resolved_value. `attribute_columns`: those carried each in a window of their own
  (cdc_carried_events): a column carried in `_cdc_carried_row` is sent by every event that is not
  a delete, the create starting a key's generation included, so its value is always found in
  the generation and never looked for up a chain.
  `events` is read once, and windows do what self-joins would: Spark inlines every CTE a query
  references (deterministic ones, whatever their number of references), so each extra read of
  `events` copied its whole plan (the carry windows over the batch, its scans) into the query;
  with self-joins here a customers batch planned 27 scans of bronze and took most of its time
  in the optimizer.
#}
{% macro cdc_key_change_ctes(events, keys, attribute_columns, target_columns=[]) %}
{%- set q = adapter.quote -%}

{#- A link per key generation started by a key change: the create of the new key takes, from
    the only delete at its sequence (PostgreSQL gives every row change its own LSN; copies were
    collapsed before), the old key, its generation and what it holds. -#}
key_change_starts as (
    select
        *,
        count_if(_cdc_op = 'd') over (partition by _cdc_seq) as _cdc_deletes_at_seq,
        first(
            case when _cdc_op = 'd' then named_struct(
                {%- for column in keys %}
                'k{{ loop.index0 }}', {{ q(column) }},
                {%- endfor %}
                'g', _cdc_generation,
                'found', named_struct(
                    {%- for column in attribute_columns %}
                    '{{ column }}', case
                        {%- for condition, value in cdc_lakehouse.cdc_value_sources('deletes', column, column in target_columns) %}
                        when {{ condition }} then named_struct('v', {{ value }})
                        {%- endfor %}
                    end{{ "," if not loop.last }}
                    {%- endfor %}
                )
            ) end,
            true
        ) over (partition by _cdc_seq) as _cdc_donor
    from {{ events }} as deletes
    where _cdc_op = 'd' or (_cdc_op = 'c' and _cdc_is_generation_start)
),

key_change_links as (
    select
        {{ cdc_lakehouse.cdc_key_node('starts', keys) }} as _cdc_node,
        {{ cdc_lakehouse.cdc_key_node('starts', keys, donor=true) }} as _cdc_parent,
        starts._cdc_donor.found as _cdc_found
    from key_change_starts as starts
    where
        starts._cdc_op = 'c'
        and starts._cdc_deletes_at_seq = 1
        and not (
            {%- for column in keys %}
            starts.{{ q(column) }} <=> starts._cdc_donor.k{{ loop.index0 }}
            {{- " and" if not loop.last }}
            {%- endfor %}
        )
),

{#- Follow each chain to the first old key that holds a value, column by column (the links
    are few: all of them in one window partition). -#}
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
    from (
        select
            *,
            map_from_entries(
                collect_list(struct(_cdc_node, named_struct('parent', _cdc_parent, 'found', _cdc_found))) over ()
            ) as _cdc_links
        from key_change_links
    ) as linked
),
{%- endmacro %}


{#- A column's resolved value for carried event alias `e`: its own generation's, silver's
    (`from_target`), then up the key-change chain (`links`, a key_changes alias, or none).
    `shared`: see cdc_carried_value. -#}
{% macro cdc_resolved_value(e, column, from_target=false, links='links', shared=[]) %}
        case
            {%- for condition, value in cdc_lakehouse.cdc_value_sources(e, column, from_target, shared) %}
            when {{ condition }}
                then {{ value }}
            {%- endfor %}
            {%- if links %}
            when {{ links }}._cdc_found.{{ adapter.quote(column) }} is not null
                then {{ links }}._cdc_found.{{ adapter.quote(column) }}.v
            {%- endif %}
        end
{%- endmacro %}


{#- The truncates of `source` (a change log), one copy of each. -#}
{% macro cdc_truncates(source) %}
    select
        _cdc_seq,
        {{ cdc_lakehouse.cdc_event_origin_columns() | join(', ') }}
    from (
        select
            *,
            row_number() over (
                partition by _cdc_seq
                order by coalesce(_cdc_offset, -1), _cdc_file, _cdc_line
            ) as _cdc_copy
        from {{ source }}
        where _cdc_op = 't'
    ) as copies
    where _cdc_copy = 1
{%- endmacro %}
