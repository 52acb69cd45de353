{#
  dbt-spark's snapshot materialization (dbt-spark 1.11.0, unchanged but for the places marked
  "sparksession") for the session adapter: an Iceberg snapshot whose SQL, settings and inputs
  are those of its last run is left as it is. A snapshot run compares what it reads with the
  snapshot table and records the differences; when nothing it reads committed since its last
  run, there are none, yet dbt-spark still creates a staging view, describes it and the
  snapshot, MERGEs (an Iceberg commit of no rows) and drops the view: 12 statements and a
  commit per snapshot in a build with nothing landed. Its fingerprint (table property
  `cdc.snapshot.fingerprint`, set after each run that wrote: one more commit there) is a digest
  of its compiled SQL, its config and the metadata log of each table it reads
  (sparksession_table_fingerprint, as for a table model); when it equals the stored one, the run
  does nothing. Always run: an input that is not an Iceberg table, SQL that reads the clock or
  a random value, a snapshot with `cdc_skip_unchanged: false`, a snapshot table in another
  format.
#}
{% materialization snapshot, adapter='sparksession' %}

  {%- set target_table = model.get('alias', model.get('name')) -%}

  {%- set strategy_name = config.get('strategy') -%}
  {%- set unique_key = config.get('unique_key') %}
  {%- set file_format = config.get('file_format') or 'parquet' -%}
  {%- set grant_config = config.get('grants') -%}

  {% set target_relation_exists, target_relation = get_or_create_relation(
          database=none,
          schema=model.schema,
          identifier=target_table,
          type='table') -%}

  {%- if file_format not in ['delta', 'iceberg', 'hudi'] -%}
    {% set invalid_format_msg -%}
      Invalid file format: {{ file_format }}
      Snapshot functionality requires file_format be set to 'delta' or 'iceberg' or 'hudi'
    {%- endset %}
    {% do exceptions.raise_compiler_error(invalid_format_msg) %}
  {% endif %}

  {%- if target_relation_exists -%}
    {%- if not target_relation.is_delta and not target_relation.is_iceberg and not target_relation.is_hudi -%}
      {% set invalid_format_msg -%}
        The existing table {{ model.schema }}.{{ target_table }} is in another format than 'delta' or 'iceberg' or 'hudi'
      {%- endset %}
      {% do exceptions.raise_compiler_error(invalid_format_msg) %}
    {% endif %}
  {% endif %}

  {% if not adapter.check_schema_exists(model.database, model.schema) %}
    {% do create_schema(model.schema) %}
  {% endif %}

  {%- if not target_relation.is_table -%}
    {% do exceptions.relation_wrong_type(target_relation, 'table') %}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}

  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {#-- sparksession: what the snapshot would be built from, and whether it was, last time --#}
  {%- set fingerprint = sparksession_table_fingerprint(tojson(model['config']) ~ '\n' ~ model['compiled_code'])
        if not target_relation_exists or target_relation.is_iceberg else none -%}
  {%- set unchanged = fingerprint is not none and target_relation_exists
        and sparksession_stored_fingerprint(target_relation, 'cdc.snapshot.fingerprint') == fingerprint -%}

  {#-- sparksession: the strategy only for a run (the check strategy describes the query and the snapshot) --#}
  {% if not unchanged %}
  {% set strategy_macro = strategy_dispatch(strategy_name) %}
  {% set strategy = strategy_macro(model, "snapshotted_data", "source_data", model['config'], target_relation_exists) %}
  {% endif %}

  {% if unchanged %}

      {%- call noop_statement('main', 'unchanged', 'OK', 0) -%}
        -- the snapshot's SQL, settings and every table it reads are those of its last run
      {%- endcall -%}

  {% elif not target_relation_exists %}

      {% set build_sql = build_snapshot_table(strategy, model['compiled_code']) %}
      {% set final_sql = create_table_as(False, target_relation, build_sql) %}

  {% else %}

      {% set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() %}

      {{ adapter.valid_snapshot_target(target_relation, columns) }}

      {% set staging_table = spark_build_snapshot_staging_table(strategy, sql, target_relation) %}

      -- this may no-op if the database does not require column expansion
      {% do adapter.expand_target_column_types(from_relation=staging_table,
                                               to_relation=target_relation) %}

      {% set missing_columns = adapter.get_missing_columns(staging_table, target_relation)
                                   | rejectattr('name', 'equalto', 'dbt_change_type')
                                   | rejectattr('name', 'equalto', 'DBT_CHANGE_TYPE')
                                   | rejectattr('name', 'equalto', 'dbt_unique_key')
                                   | rejectattr('name', 'equalto', 'DBT_UNIQUE_KEY')
                                   | list %}

      {% do create_columns(target_relation, missing_columns) %}

      {% set source_columns = adapter.get_columns_in_relation(staging_table)
                                   | rejectattr('name', 'equalto', 'dbt_change_type')
                                   | rejectattr('name', 'equalto', 'DBT_CHANGE_TYPE')
                                   | rejectattr('name', 'equalto', 'dbt_unique_key')
                                   | rejectattr('name', 'equalto', 'DBT_UNIQUE_KEY')
                                   | list %}

      {% set quoted_source_columns = [] %}
      {% for column in source_columns %}
        {% do quoted_source_columns.append(adapter.quote(column.name)) %}
      {% endfor %}

      {% set final_sql = snapshot_merge_sql(
            target = target_relation,
            source = staging_table,
            insert_cols = quoted_source_columns
         )
      %}

  {% endif %}

  {% if not unchanged %}
  {% call statement('main') %}
      {{ final_sql }}
  {% endcall %}

  {#-- sparksession: the fingerprint of what this run read (a run stopped before it runs again) --#}
  {% if fingerprint is not none %}
  {% call statement('cdc_snapshot_fingerprint') %}
      alter table {{ target_relation }} set tblproperties ('cdc.snapshot.fingerprint' = '{{ fingerprint }}')
  {% endcall %}
  {% endif %}
  {% endif %}

  {% set should_revoke = should_revoke(target_relation_exists, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}

  {{ adapter.commit() }}

  {% if staging_table is defined %}
      {% do post_snapshot(staging_table) %}
  {% endif %}

  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}

{% endmaterialization %}
