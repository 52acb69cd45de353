{#
  on-run-end hook: one row per silver current-state model of the run in the run audit table
  (`<cdc_audit_schema>.cdc_run_audit`): events read, rows inserted, updated and deleted, lines
  rejected, the watermarks and the lag; then a short summary on the terminal. Takes dbt's `results`.
#}
{% macro cdc_run_audit(results) %}
    {%- if not execute or flags.WHICH not in ('build', 'run') -%}
        {{ return('') }}
    {%- endif -%}
    {%- set silver = [] -%}
    {%- for result in results -%}
        {%- if result.node.resource_type == 'model' and result.node.config.get('incremental_strategy') == 'cdc_merge' -%}
            {%- do silver.append(result) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if not silver -%}
        {{ return('') }}
    {%- endif -%}

    {%- set audit = cdc_lakehouse.cdc_run_audit_relation() -%}
    {#- DDL and the insert without fetching: over Thrift they return no result set to fetch. -#}
    {% do adapter.execute('create schema if not exists ' ~ audit.schema, fetch=false) %}
    {% do adapter.execute(cdc_lakehouse.cdc_run_audit_ddl(audit), fetch=false) %}

    {%- set rows = [] -%}
    {%- for result in silver -%}
        {%- do rows.append(cdc_lakehouse.cdc_run_audit_row(result)) -%}
    {%- endfor -%}
    {%- do cdc_lakehouse.cdc_run_audit_counts(rows, audit) -%}
    {%- set lines = [] -%}
    {%- for row in rows -%}
        {%- do lines.append(cdc_lakehouse.cdc_run_audit_line(row)) -%}
    {%- endfor -%}
    {% do adapter.execute(cdc_lakehouse.cdc_run_audit_insert(audit, rows), fetch=false) %}
    {{ print('\nCDC run audit (' ~ audit ~ '):\n'
        ~ '  ' ~ 'table'.ljust(24) ~ 'kind'.ljust(12) ~ 'events'.rjust(9) ~ 'inserted'.rjust(10)
        ~ 'updated'.rjust(9) ~ 'deleted'.rjust(9) ~ 'rejected'.rjust(10) ~ '  lag\n'
        ~ (lines | join('\n'))) }}
    {{ return('') }}
{% endmacro %}


{% macro cdc_run_audit_relation() %}
    {{ return(api.Relation.create(schema=var('cdc_audit_schema', 'audit'), identifier='cdc_run_audit', type='table')) }}
{% endmacro %}


{% macro cdc_run_audit_ddl(audit) %}
    create table if not exists {{ audit }} (
        invocation_id string,
        run_started_at timestamp,
        recorded_at timestamp,
        model string,
        relation_name string,
        status string,
        run_kind string,
        events_read bigint,
        rows_inserted bigint,
        rows_updated bigint,
        rows_deleted bigint,
        lines_rejected bigint,
        loaded_watermark timestamp,
        applied_seq decimal(38, 0),
        newest_source_ts timestamp,
        lag_seconds bigint
    )
    using {{ cdc_lakehouse.cdc_table_format() }}
{% endmacro %}


{#- The audit row of one silver model's result, as a dict of SQL literals and display values;
    its counts come from cdc_run_audit_counts. -#}
{% macro cdc_run_audit_row(result) %}
    {%- set node = result.node -%}
    {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias, type='table') -%}
    {%- set changes, bronze = cdc_lakehouse.cdc_run_audit_upstream(node) -%}
    {%- set row = {
        'model': node.name, 'relation': relation | string, 'status': result.status | string,
        'kind': none, 'events': none, 'inserted': none, 'updated': none, 'deleted': none,
        'rejected': none, 'watermark': none, 'seq': none, 'newest': none,
        'changes': changes, 'bronze': bronze,
    } -%}
    {%- if row.status != 'success' -%}
        {{ return(row) }}
    {%- endif -%}

    {#- What the strategy (or the full build's post-hook) applied, if it ran in this invocation. -#}
    {%- set properties = cdc_lakehouse.cdc_committed_state(relation) -%}
    {#- The events the committed run read, their newest sequence and source commit time, where
        its strategy recorded them (cdc_batch_window_note): cdc_run_audit_counts then counts
        nothing for this row. A run with nothing new read none, and the newest it reports are
        those of the last run that committed. -#}
    {%- set events = properties.get('cdc.run.events') -%}
    {%- set window = {
        'seq': properties.get('cdc.run.applied_seq') or none,
        'newest': properties.get('cdc.run.newest_source_ts') or none,
        'counted': true,
    } -%}
    {%- if properties.get('cdc.run.invocation_id') == invocation_id -%}
        {%- do row.update({'kind': properties.get('cdc.run.kind')}) -%}
        {%- for name in ('inserted', 'updated', 'deleted') -%}
            {%- set value = properties.get('cdc.run.' ~ name) -%}
            {%- do row.update({name: (value | int) if value else none}) -%}
        {%- endfor -%}
        {%- if events -%}
            {%- do row.update(window) -%}
            {%- do row.update({'events': events | int}) -%}
        {%- endif -%}
    {%- else -%}
        {%- do row.update({'kind': 'no-op', 'inserted': 0, 'updated': 0, 'deleted': 0}) -%}
        {%- if events -%}
            {%- do row.update(window) -%}
            {%- do row.update({'events': 0}) -%}
        {%- endif -%}
    {%- endif -%}
    {%- do row.update({'watermark': properties.get('cdc.watermark')}) -%}
    {{ return(row) }}
{% endmacro %}


{#- The counts of the audit rows (cdc_run_audit_row) of successful models, in at most two
    queries for all of them (a query per table and count cost two seconds of a no-op run of the
    sample): the lines rejected while flattening in this run and, for rows whose committed run
    did not record the events it read (a full build, a table written before runs recorded
    them), the events read (the change log between the previous audited watermark and this
    one), for which the previous audited row of each such table is read first. Updates the
    rows in place. -#}
{% macro cdc_run_audit_counts(rows, audit) %}
    {%- set done = rows | selectattr('status', 'equalto', 'success') | list -%}
    {%- if not done -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set names = [] -%}
    {%- for row in done if not row.get('counted') -%}
        {%- do names.append("'" ~ row.relation ~ "'") -%}
    {%- endfor -%}
    {%- set previous = {} -%}
    {%- for found in ([] if not names else run_query(
        "select relation_name, cast(loaded_watermark as string), cast(applied_seq as string),"
        ~ " cast(newest_source_ts as string)"
        ~ " from (select *, row_number() over (partition by relation_name order by recorded_at desc) as newest_first"
        ~ " from " ~ audit ~ " where relation_name in (" ~ names | join(', ') ~ ") and status = 'success')"
        ~ " where newest_first = 1"
    ).rows) -%}
        {%- do previous.update({found[0]: [found[1], found[2], found[3]]}) -%}
    {%- endfor -%}

    {#- One branch per count: (row, 'window' or 'rejected', count, max seq, newest source ts). -#}
    {%- set branches = [] -%}
    {%- for row in done -%}
        {%- set before = previous.get(row.relation, [none, none, none]) -%}
        {%- if row.get('counted') -%}
            {#- Recorded by the run (cdc_run_audit_row). -#}
        {%- elif row.kind == 'no-op' and before[0] is not none -%}
            {%- do row.update({'events': 0, 'seq': before[1], 'newest': before[2]}) -%}
        {%- else -%}
            {%- set lower = none if row.kind in ('full', 'no-op') else before[0] -%}
            {%- do row.update({'seq': before[1], 'newest': before[2]}) -%}
            {%- do branches.append(
                "select " ~ loop.index0 ~ " as position, 'window' as measure, count(*) as n,"
                ~ " cast(max(_cdc_seq) as string) as seq, cast(max(_cdc_source_ts) as string) as newest"
                ~ " from " ~ row.changes
                ~ " where _cdc_loaded_at <= timestamp'" ~ (row.watermark or '1970-01-01 00:00:00') ~ "'"
                ~ (" and _cdc_loaded_at > timestamp'" ~ lower ~ "'" if lower else "")
            ) -%}
        {%- endif -%}
        {%- if row.bronze is not none -%}
            {%- do branches.append(
                "select " ~ loop.index0 ~ " as position, 'rejected' as measure, count(*) as n,"
                ~ " cast(null as string) as seq, cast(null as string) as newest"
                ~ " from " ~ row.bronze ~ " where _cdc_reject_reason is not null"
                ~ " and _cdc_loaded_at >= timestamp'" ~ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "'"
            ) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if branches -%}
        {%- for found in run_query(branches | join('\nunion all\n')).rows -%}
            {%- set row = done[found[0] | int] -%}
            {%- if found[1] == 'rejected' -%}
                {%- do row.update({'rejected': found[2]}) -%}
            {%- else -%}
                {%- do row.update({
                    'events': 0 if row.kind == 'no-op' else found[2],
                    'seq': found[3] or row.seq,
                    'newest': found[4] or row.newest,
                }) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{% endmacro %}


{#- The change log a silver node reads (its upstream model) and the bronze model behind it. -#}
{% macro cdc_run_audit_upstream(node) %}
    {%- set found = [] -%}
    {%- for depth in range(2) -%}
        {%- set parents = [] -%}
        {%- for unique_id in (found[-1] if found else node).depends_on.nodes -%}
            {%- set parent = graph.nodes.get(unique_id) -%}
            {%- if parent is not none and parent.resource_type == 'model' -%}
                {%- do parents.append(parent) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- if parents -%}
            {%- do found.append(parents[0]) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set relations = [] -%}
    {%- for parent in found -%}
        {%- do relations.append(api.Relation.create(schema=parent.schema, identifier=parent.alias)) -%}
    {%- endfor -%}
    {%- if relations | length == 1 -%}
        {%- do relations.append(none) -%}
    {%- endif -%}
    {{ return(relations[:2]) }}
{% endmacro %}


{% macro cdc_run_audit_insert(audit, rows) %}
    {%- set values = [] -%}
    {%- for row in rows -%}
        {%- set literals = [] -%}
        {%- for name in ('kind', 'watermark', 'seq', 'newest') -%}
            {%- do literals.append("null" if row[name] is none else "'" ~ row[name] ~ "'") -%}
        {%- endfor -%}
        {%- set numbers = [] -%}
        {%- for name in ('events', 'inserted', 'updated', 'deleted', 'rejected') -%}
            {%- do numbers.append("null" if row[name] is none else row[name] | string) -%}
        {%- endfor -%}
        {%- do values.append(
            "select '" ~ invocation_id ~ "', timestamp'" ~ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "',"
            ~ " current_timestamp(), '" ~ row.model ~ "', '" ~ row.relation ~ "', '" ~ row.status ~ "',"
            ~ " " ~ literals[0] ~ ", " ~ (numbers | join(', ')) ~ ","
            ~ " cast(" ~ literals[1] ~ " as timestamp), cast(" ~ literals[2] ~ " as decimal(38, 0)),"
            ~ " cast(" ~ literals[3] ~ " as timestamp),"
            ~ " unix_timestamp(current_timestamp()) - unix_timestamp(cast(" ~ literals[3] ~ " as timestamp))"
        ) -%}
    {%- endfor -%}
    {{ return("insert into " ~ audit ~ "\n" ~ (values | join("\nunion all\n"))) }}
{% endmacro %}


{#- One summary line: counts, and the lag as days/hours/minutes. -#}
{% macro cdc_run_audit_line(row) %}
    {%- set numbers = [] -%}
    {%- for name, width in [('events', 9), ('inserted', 10), ('updated', 9), ('deleted', 9), ('rejected', 10)] -%}
        {%- do numbers.append(('-' if row[name] is none else '{:,}'.format(row[name] | int)).rjust(width)) -%}
    {%- endfor -%}
    {%- set lag = '-' -%}
    {%- if row.newest -%}
        {#- The session's time zone is UTC (profiles.yml): the text is a UTC time. -#}
        {%- set utc = modules.pytz.utc -%}
        {%- set newest = modules.datetime.datetime.fromisoformat(row.newest).replace(tzinfo=utc) -%}
        {%- set seconds = (modules.datetime.datetime.now(utc) - newest).total_seconds() | int -%}
        {%- set lag = '{}d {:02d}h{:02d}m'.format(seconds // 86400, (seconds % 86400) // 3600, (seconds % 3600) // 60)
            if seconds >= 86400 else '{:02d}h{:02d}m{:02d}s'.format(seconds // 3600, (seconds % 3600) // 60, seconds % 60) -%}
    {%- endif -%}
    {{ return('  ' ~ row.relation.ljust(24) ~ (row.kind or row.status).ljust(12) ~ (numbers | join('')) ~ '  ' ~ lag) }}
{% endmacro %}
