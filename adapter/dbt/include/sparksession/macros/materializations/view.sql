{#
  dbt's view materialization (create_or_replace_view, dbt-core 1.11) for the session adapter,
  unchanged but for one thing: a view whose DDL and query schema are those it was created with
  (sparksession_view_unchanged) is left as it is. Replacing it would write a new version of the
  same view to the catalog on every run (an Iceberg view keeps each one as a metadata file),
  where a run with nothing new landed should change nothing. `--full-refresh` replaces it.
#}
{% materialization view, adapter='sparksession' -%}
  {%- set identifier = model['alias'] -%}

  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}
  {%- set exists_as_view = (old_relation is not none and old_relation.is_view) -%}

  {%- set target_relation = api.Relation.create(
      identifier=identifier, schema=schema, database=database,
      type='view') -%}
  {% set grant_config = config.get('grants') %}

  {{ run_hooks(pre_hooks) }}

  {%- if old_relation is not none and old_relation.is_table -%}
    {{ handle_existing_table(should_full_refresh(), old_relation) }}
  {%- endif -%}

  {%- set ddl = get_create_view_as_sql(target_relation, sql) -%}
  {%- if sparksession_view_unchanged(old_relation, ddl) -%}
    {%- call noop_statement('main', 'unchanged', 'OK', 0) -%}
      -- the view's definition and its query's schema are those it was created with
    {%- endcall -%}
  {%- else -%}
    {% call statement('main') -%}
      {{ ddl }}
    {%- endcall %}
  {%- endif -%}

  {% set should_revoke = should_revoke(exists_as_view, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke=should_revoke) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}
