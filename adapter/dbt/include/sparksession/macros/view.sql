{#
  dbt-spark's view DDL with the view's Spark schema in its table properties (see the adapter's
  view_schema.py): behind Iceberg's SparkSessionCatalog and a Hive metastore, Spark would
  otherwise read every view with Hive's column types (`timestamp_ntz` becomes `timestamp`).
  Iceberg only: Spark's own session catalog (under Delta's DeltaCatalog) keeps a view's
  schema in those same reserved `spark.sql.*` properties itself and refuses them from the DDL.
  The rest is spark__create_view_as as dbt-spark 1.11.0 has it.
#}
{% macro sparksession__create_view_as(relation, sql) -%}
  {%- if config.get('file_format', 'iceberg') == 'iceberg' -%}
    {%- set described = run_query('describe query select * from (\n' ~ sql ~ '\n) as dbt_view_query') -%}
    {%- set properties = adapter.view_schema_properties(described.rows) -%}
  {%- else -%}
    {%- set properties = {} -%}
  {%- endif -%}
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
  {%- if properties %}
  tblproperties (
    {%- for key, value in properties.items() %}
    {{ adapter.sql_string(key) }} = {{ adapter.sql_string(value) }}{{ "," if not loop.last }}
    {%- endfor %}
  )
  {%- endif %}
  as
    {{ sql }}
{% endmacro %}
