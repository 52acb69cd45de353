{#
  on-run-end hook: print the tables this run built in silver and gold with their row counts,
  so `make run` ends with what was built. Takes dbt's `results`. The counts are one query (a
  `union all` of the tables' counts): a statement per table cost a second of a no-op run of the
  sample's 15 tables. Off with the var `cdc_run_summary: false`: the long-lived driver
  (cdc_lakehouse.runner.continuous) sets it, as it reports each run itself and the counts read
  every table the run built (a second of a five-table run of the 50-table benchmark).
#}
{% macro cdc_run_summary(results) %}
    {%- if not execute or flags.WHICH not in ('build', 'run') or var('cdc_run_summary', true) in (false, 'false') -%}
        {{ return('') }}
    {%- endif -%}
    {%- set relations = [] -%}
    {%- for result in results -%}
        {%- set node = result.node -%}
        {%- if node.resource_type == 'model' and result.status == 'success' and node.schema in ('silver', 'gold') -%}
            {%- do relations.append(api.Relation.create(schema=node.schema, identifier=node.alias)) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if not relations -%}
        {{ return('') }}
    {%- endif -%}
    {%- set counts = [] -%}
    {%- for relation in relations -%}
        {%- do counts.append('select ' ~ loop.index0 ~ ' as position, count(*) as n from ' ~ relation) -%}
    {%- endfor -%}
    {%- set rows = run_query(counts | join('\nunion all\n')).rows -%}
    {%- set lines = [] -%}
    {%- for row in rows | sort(attribute=0) -%}
        {%- do lines.append('  ' ~ (relations[row[0] | int] | string).ljust(36) ~ ('{:>10,}'.format(row[1])) ~ ' rows') -%}
    {%- endfor -%}
    {{ print('\nBuilt in the lakehouse:\n' ~ (lines | join('\n'))) }}
    {{ return('') }}
{% endmacro %}
