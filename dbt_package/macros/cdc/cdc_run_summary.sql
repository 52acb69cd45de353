{#
  on-run-end hook: print the tables this run built in silver and gold with their row counts,
  so `make run` ends with what was built. Takes dbt's `results`.
#}
{% macro cdc_run_summary(results) %}
    {%- if not execute or flags.WHICH not in ('build', 'run') -%}
        {{ return('') }}
    {%- endif -%}
    {%- set lines = [] -%}
    {%- for result in results -%}
        {%- set node = result.node -%}
        {%- if node.resource_type == 'model' and result.status == 'success' and node.schema in ('silver', 'gold') -%}
            {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias) -%}
            {%- set count = run_query('select count(*) from ' ~ relation).rows[0][0] -%}
            {%- do lines.append('  ' ~ (relation | string).ljust(36) ~ ('{:>10,}'.format(count)) ~ ' rows') -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if lines -%}
        {{ print('\nBuilt in the lakehouse:\n' ~ (lines | join('\n'))) }}
    {%- endif -%}
    {{ return('') }}
{% endmacro %}
