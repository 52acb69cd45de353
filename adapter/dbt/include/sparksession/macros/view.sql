{#
  dbt-spark's view DDL with the view's Spark schema in its table properties (see the adapter's
  view_schema.py): behind Iceberg's SparkSessionCatalog and a Hive metastore, Spark would
  otherwise read every view with Hive's column types (`timestamp_ntz` becomes `timestamp`).
  Iceberg only: Spark's own session catalog (under Delta's DeltaCatalog) keeps a view's
  schema in those same reserved `spark.sql.*` properties itself and refuses them from the DDL.
  Every format gets `cdc.view.fingerprint`: a digest of the DDL and of the query's schema
  (`describe query`), which the view materialization compares with the stored one to leave an
  unchanged view alone (sparksession_view_unchanged).
  The rest is spark__create_view_as as dbt-spark 1.11.0 has it.
#}
{% macro sparksession__create_view_as(relation, sql) -%}
  {%- set described = run_query('describe query select * from (\n' ~ sql ~ '\n) as dbt_view_query') -%}
  {%- if config.get('file_format', 'iceberg') == 'iceberg' -%}
    {%- set properties = adapter.view_schema_properties(described.rows) -%}
  {%- else -%}
    {%- set properties = {} -%}
  {%- endif -%}
  {%- set columns = [] -%}
  {%- for row in described.rows -%}
    {%- do columns.append(row[0] ~ ' ' ~ row[1]) -%}
  {%- endfor -%}
  {%- set ddl -%}
  create or replace view {{ relation }}
  {% if config.persist_column_docs() -%}
    {% set model_columns = model.columns %}
    {% set query_columns = get_columns_in_query(sql) %}
    (
    {{ get_persist_docs_column_list(model_columns, query_columns) }}
    )
  {% endif %}
  {{ comment_clause() }}
  {%- set contract_config = config.get('contract') -%}
  {%- if contract_config.enforced -%}
    {{ get_assert_columns_equivalent(sql) }}
  {%- endif %}
  tblproperties (
    {%- for key, value in properties.items() %}
    {{ adapter.sql_string(key) }} = {{ adapter.sql_string(value) }},
    {%- endfor %}
    'cdc.view.fingerprint' = '{{ sparksession_fingerprint_placeholder() }}'
  )
  as
    {{ sql }}
  {%- endset -%}
  {#- The schema counts as well as the text: Spark keeps the columns a view's query had when it
      was created, so a view over `select *` must be created again when its input changes. -#}
  {{ ddl | replace(sparksession_fingerprint_placeholder(), local_md5(ddl ~ '\n' ~ (columns | join(', ')))) }}
{% endmacro %}


{#- True when `existing` (a relation from dbt's cache, listed at the start of the run) is a view
    whose stored fingerprint is the one in `ddl` (sparksession__create_view_as): the same text
    over the same schema, so replacing it would only write a new version of the same view. -#}
{% macro sparksession_view_unchanged(existing, ddl) %}
  {%- if existing is none or not existing.is_view or should_full_refresh() -%}
    {{ return(false) }}
  {%- endif -%}
  {%- set wanted = modules.re.findall("'cdc[.]view[.]fingerprint' = '([0-9a-f]{32})'", ddl) -%}
  {{ return(wanted | length == 1 and wanted[0] == sparksession_stored_fingerprint(existing, 'cdc.view.fingerprint')) }}
{% endmacro %}
