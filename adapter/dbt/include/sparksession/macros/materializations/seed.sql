{#
  dbt's seed materialization (dbt-core 1.11) for the session adapter, unchanged but for one thing:
  a seed table whose CSV file and settings are those it was loaded from (its fingerprint, table
  property `cdc.build.fingerprint`, from dbt's checksum of the file) is left as it is. dbt-spark
  drops and loads every seed on every run, a new table each time, so what reads it (a gold
  table) would be rebuilt on every run too. `--full-refresh` loads it again.
#}
{% materialization seed, adapter='sparksession' %}

  {%- set identifier = model['alias'] -%}
  {%- set full_refresh_mode = (should_full_refresh()) -%}

  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}

  {%- set exists_as_table = (old_relation is not none and old_relation.is_table) -%}
  {%- set exists_as_view = (old_relation is not none and old_relation.is_view) -%}

  {%- set grant_config = config.get('grants') -%}
  {%- set agate_table = load_agate_table() -%}
  -- grab current tables grants config for comparison later on

  {%- do store_result('agate_table', response='OK', agate_table=agate_table) -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}

  -- `BEGIN` happens here:
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {#-- sparksession: the seed as it was loaded --#}
  {%- set unchanged = exists_as_table and not full_refresh_mode
        and sparksession_stored_fingerprint(old_relation, 'cdc.build.fingerprint') == sparksession_seed_fingerprint(model) -%}

  -- build model
  {% set create_table_sql = "" %}
  {% if exists_as_view %}
    {{ exceptions.raise_compiler_error("Cannot seed to '{}', it is a view".format(old_relation.render())) }}
  {% elif unchanged %}
    {% set create_table_sql = "" %}
  {% elif exists_as_table %}
    {% set create_table_sql = reset_csv_table(model, full_refresh_mode, old_relation, agate_table) %}
  {% else %}
    {% set create_table_sql = create_csv_table(model, agate_table) %}
  {% endif %}

  {% set code = 'CREATE' if full_refresh_mode else 'INSERT' %}
  {% set rows_affected = (agate_table.rows | length) %}
  {% set sql = "" %}
  {% if unchanged %}
    {% set code, rows_affected = 'unchanged', 0 %}
  {% elif rows_affected > 0 %}
    {% set sql = load_csv_rows(model, agate_table) %}
  {% endif %}

  {% call noop_statement('main', code ~ ' ' ~ rows_affected, code, rows_affected) %}
    {{ get_csv_sql(create_table_sql, sql) }};
  {% endcall %}

  {% set target_relation = this.incorporate(type='table') %}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke=should_revoke) %}

  {% if not unchanged %}
  {% do persist_docs(target_relation, model) %}
  {% endif %}

  {% if full_refresh_mode or not exists_as_table %}
    {% do create_indexes(target_relation) %}
  {% endif %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}

  -- `COMMIT` happens here
  {{ adapter.commit() }}

  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}

{% endmaterialization %}


{#- A seed's fingerprint: dbt's checksum of its file and the settings that shape its table. -#}
{% macro sparksession_seed_fingerprint(model) %}
  {%- set config = model['config'] -%}
  {{ return(local_md5(tojson([
      model['checksum']['checksum'], config.get('column_types', {}), config.get('quote_columns'),
      config.get('file_format'), config.get('partition_by'), config.get('location_root'),
      model.get('description'), config.get('persist_docs', {}),
  ]))) }}
{% endmacro %}


{#- dbt-spark's seed table DDL (spark__create_csv_table, dbt-spark 1.11.0) with the seed's
    fingerprint as a table property. -#}
{% macro sparksession__create_csv_table(model, agate_table) %}
  {%- set column_override = model['config'].get('column_types', {}) -%}
  {%- set quote_seed_column = model['config'].get('quote_columns', None) -%}

  {% set sql %}
    create table {{ this.render() }} (
        {%- for col_name in agate_table.column_names -%}
            {%- set inferred_type = adapter.convert_type(agate_table, loop.index0) -%}
            {%- set type = column_override.get(col_name, inferred_type) -%}
            {%- set column_name = (col_name | string) -%}
            {{ adapter.quote_seed_column(column_name, quote_seed_column) }} {{ type }} {%- if not loop.last -%}, {%- endif -%}
        {%- endfor -%}
    )
    {{ file_format_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ clustered_cols(label="clustered by") }}
    {{ location_clause() }}
    {{ comment_clause() }}
    tblproperties ('cdc.build.fingerprint' = '{{ sparksession_seed_fingerprint(model) }}')
  {% endset %}

  {% call statement('_') -%}
    {{ sql }}
  {%- endcall %}

  {{ return(sql) }}
{% endmacro %}
