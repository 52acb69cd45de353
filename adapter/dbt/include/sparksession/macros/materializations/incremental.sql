{#
  dbt-spark's incremental materialization (dbt-spark 1.11.0, unchanged but for the places marked
  "sparksession") for the session adapter. A Python model runs in the SparkSession dbt's SQL
  uses, so its batch can be a temporary view, as a SQL model's is, rather than a table written
  to the warehouse and read back: an incremental Python model writes its batch once.
#}
{% materialization incremental, adapter='sparksession', supported_languages=['sql', 'python'] -%}
  {#-- Validate early so we don't run SQL if the file_format + strategy combo is invalid --#}
  {%- set raw_file_format = config.get('file_format', default='parquet') -%}
  {%- set raw_strategy = config.get('incremental_strategy') or 'append' -%}
  {%- set grant_config = config.get('grants') -%}

  {%- set file_format = dbt_spark_validate_get_file_format(raw_file_format) -%}
  {#-- sparksession: a strategy dbt-spark does not know runs the macro dbt names for it,
       get_incremental_<strategy>_sql(arg_dict), from the project or the cdc_lakehouse package
       (sparksession_strategy_macro); dbt-spark hard-codes its own list. --#}
  {%- set strategy_macro = sparksession_strategy_macro(raw_strategy) -%}
  {%- if strategy_macro is not none -%}
    {%- if file_format not in ('iceberg', 'delta', 'hudi') -%}
      {{ exceptions.raise_compiler_error("incremental_strategy '" ~ raw_strategy ~ "' needs file_format 'iceberg', 'delta' or 'hudi', got " ~ file_format) }}
    {%- endif -%}
    {%- set strategy = raw_strategy -%}
  {%- else -%}
    {%- set strategy = dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) -%}
  {%- endif -%}

  {#-- Set vars --#}

  {%- set unique_key = config.get('unique_key', none) -%}
  {%- set partition_by = config.get('partition_by', none) -%}
  {%- set language = model['language'] -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set incremental_predicates = config.get('predicates', none) or config.get('incremental_predicates', none) -%}
  {%- set target_relation = this -%}
  {%- set existing_relation = load_relation(this) -%}
  {% set tmp_relation = this.incorporate(path = {"identifier": this.identifier ~ '__dbt_tmp'}) -%}

  {#-- sparksession: a temporary view (no database or schema) for SQL and Python models --#}
  {%- set tmp_relation = tmp_relation.include(database=false, schema=false) -%}

  {#-- Set Overwrite Mode --#}
  {%- if strategy in ['insert_overwrite', 'microbatch'] and partition_by -%}
    {%- call statement() -%}
      set spark.sql.sources.partitionOverwriteMode = DYNAMIC
    {%- endcall -%}
  {%- endif -%}

  {#-- Run pre-hooks --#}
  {{ run_hooks(pre_hooks) }}

  {#-- Incremental run logic --#}
  {%- if existing_relation is none -%}
    {#-- Relation must be created --#}
    {%- call statement('main', language=language) -%}
      {{ create_table_as(False, target_relation, compiled_code, language) }}
    {%- endcall -%}
    {% do persist_constraints(target_relation, model) %}
  {%- elif existing_relation.is_view or should_full_refresh() -%}
    {#-- Relation must be dropped & recreated --#}
    {% set is_delta = (file_format == 'delta' and existing_relation.is_delta) %}
    {% if not is_delta %} {#-- If Delta, we will `create or replace` below, so no need to drop --#}
      {% do adapter.drop_relation(existing_relation) %}
    {% endif %}
    {%- call statement('main', language=language) -%}
      {{ create_table_as(False, target_relation, compiled_code, language) }}
    {%- endcall -%}
    {% do persist_constraints(target_relation, model) %}
  {%- else -%}
    {#-- Relation must be merged --#}
    {#-- sparksession: a strategy may resolve a SQL model's batch once, into a relation it names
         (sparksession_incremental_batch_table), where a temporary view is analysed and run
         again by every statement that reads it. A relation without a schema is a checkpoint
         in this process's session (sparksession_checkpoint_view); one with a schema, a table
         (a Thrift target has no session in this process). --#}
    {%- set batch_table_macro = sparksession_package_macro('sparksession_incremental_batch_table') -%}
    {%- set batch_table = batch_table_macro(strategy, target_relation) if language == 'sql' else none -%}
    {%- if batch_table is not none -%}
      {%- set tmp_relation = batch_table -%}
      {%- if not batch_table.include_policy.schema -%}
        {%- call statement('create_tmp_relation', language='python') -%}
          {{ sparksession_checkpoint_view(compiled_code, batch_table) }}
        {%- endcall -%}
      {%- else -%}
      {#-- Hudi's catalog has no REPLACE TABLE AS SELECT: drop, then create (and clear what a
           killed create left, see clear_orphan_table_folder) --#}
      {%- if file_format == 'hudi' -%}
        {%- call statement('drop_batch_table') -%}
          drop table if exists {{ batch_table }} purge
        {%- endcall -%}
        {%- do cdc_clear_orphan_table_folder(batch_table) -%}
      {%- endif -%}
      {%- call statement('create_tmp_relation') -%}
        {{ 'create table' if file_format == 'hudi' else 'create or replace table' }} {{ batch_table }} using {{ file_format }} as {{ compiled_code }}
      {%- endcall -%}
      {%- endif -%}
    {%- else -%}
    {%- call statement('create_tmp_relation', language=language) -%}
      {{ create_table_as(True, tmp_relation, compiled_code, language) }}
    {%- endcall -%}
    {%- endif -%}
    {#-- sparksession: a Python batch known to be empty (py_write_temp_view) writes nothing,
         not even an empty snapshot --#}
    {%- set known_rows = load_result('create_tmp_relation').response.rows_affected if language == 'python' else none -%}
    {%- if known_rows == 0 -%}
      {%- call noop_statement('main', 'OK', 'OK', 0) -%}
        -- the Python model returned an empty batch: nothing to write
      {%- endcall -%}
    {%- else -%}
    {#-- sparksession: the batch and the table are described once, not three times each
         (dbt's process_schema_changes, the type check, the append's column list); only a
         batch whose columns differ from the table's describes them again after the change. --#}
    {%- set source_columns = none -%}
    {%- set target_columns = none -%}
    {%- if on_schema_change != 'ignore' -%}
      {%- set schema_changes = check_for_schema_changes(tmp_relation, existing_relation) -%}
      {%- if schema_changes['schema_changed'] -%}
        {%- do process_schema_changes(on_schema_change, tmp_relation, existing_relation) -%}
      {%- else -%}
        {%- set source_columns = schema_changes['source_columns'] -%}
        {%- set target_columns = schema_changes['target_columns'] -%}
      {%- endif -%}
      {#-- sparksession: a column whose type changed at the source (column_types.sql) --#}
      {%- do widen_column_types(tmp_relation, existing_relation, source_columns, target_columns) -%}
    {%- endif -%}
    {%- call statement('main') -%}
      {#-- sparksession: append fills the table's columns the batch lacks with NULL --#}
      {%- if strategy == 'append' -%}
        {{ sparksession_insert_into_sql(tmp_relation, target_relation, source_columns, target_columns) }}
      {%- elif strategy_macro is not none -%}
        {{ strategy_macro({
            'target_relation': target_relation, 'temp_relation': tmp_relation,
            'unique_key': unique_key, 'dest_columns': none,
            'incremental_predicates': incremental_predicates,
        }) }}
      {%- else -%}
        {{ dbt_spark_get_incremental_sql(strategy, tmp_relation, target_relation, existing_relation, unique_key, incremental_predicates) }}
      {%- endif -%}
    {%- endcall -%}
    {%- endif -%}
    {%- if language == 'python' -%}
      {#--
      This is yucky.
      See note in dbt-spark/dbt/include/spark/macros/adapters.sql
      re: python models and temporary views.

      Also, why do neither drop_relation or adapter.drop_relation work here?!
      --#}
      {#-- sparksession: the Python model's batch is a temporary view --#}
      {% call statement('drop_relation') -%}
        drop view if exists {{ tmp_relation }}
      {%- endcall %}
    {%- endif -%}
  {%- endif -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}

{%- endmaterialization %}


{#
  dbt-spark's append (`get_insert_into_sql`) selects every column of the table from the batch, so
  a batch without one of them fails with UNRESOLVED_COLUMN (dbt-labs/dbt-spark#124): a column
  dropped or renamed at the source is missing from every batch decoded after the change, while
  `append_new_columns` keeps it in the table. Such columns read NULL in the batch's rows, as
  dbt-databricks does (databricks/dbt-databricks#604).
#}
{% macro sparksession_insert_into_sql(source_relation, target_relation, source_columns=none, target_columns=none) %}
  {%- set present = (source_columns or adapter.get_columns_in_relation(source_relation)) | map(attribute='name') | map('lower') | list -%}
  insert into table {{ target_relation }}
  select
  {%- for column in target_columns or adapter.get_columns_in_relation(target_relation) %}
    {% if column.name | lower in present -%}
      {{ column.quoted }}
    {%- else -%}
      cast(null as {{ column.data_type }}) as {{ column.quoted }}
    {%- endif %}{{ "," if not loop.last }}
  {%- endfor %}
  from {{ source_relation }}
{% endmacro %}


{#-- sparksession: the relation an incremental run of `relation` with `strategy` resolves its
     batch into, or none for a temporary view (dbt-spark's way). A project or the cdc_lakehouse
     package overrides this macro by name for its own strategies (sparksession_package_macro);
     the strategy then reads that relation and drops it: a table (with a schema), or a temporary
     view without one (sparksession_checkpoint_view). --#}
{% macro sparksession_incremental_batch_table(strategy, relation) %}
  {{ return(none) }}
{% endmacro %}


{#-- sparksession: Python run in the session dbt's SQL uses (method: session): the select,
     computed once and checkpointed in this process as a temporary view (see
     python_submissions.checkpoint_view: why a checkpoint, not a cached view or a table). --#}
{% macro sparksession_checkpoint_view(compiled_code, relation) %}
from dbt.adapters.sparksession.python_submissions import checkpoint_view
checkpoint_view(spark, {{ tojson(compiled_code) }}, {{ tojson(relation.identifier) }})
{% endmacro %}


{#-- sparksession: the macro `name` of the project, else of the cdc_lakehouse dbt package (an
     adapter macro sees a package's macros only through its namespace), else none. --#}
{% macro sparksession_package_macro(name, default=true) %}
  {%- if context.get(name) is not none and context[name].macro.package_name != 'dbt_sparksession' -%}
    {{ return(context[name]) }}
  {%- endif -%}
  {%- set package = context.get('cdc_lakehouse') -%}
  {%- if package is not none and package.get(name) is not none -%}
    {{ return(package[name]) }}
  {%- endif -%}
  {{ return(context.get(name) if default else none) }}
{% endmacro %}


{#-- sparksession: get_incremental_<strategy>_sql of the project or the cdc_lakehouse package
     (dbt's name for a custom strategy's macro; it takes one dict: target_relation,
     temp_relation, unique_key, dest_columns, incremental_predicates), or none: a strategy of
     dbt-spark's own. --#}
{% macro sparksession_strategy_macro(strategy) %}
  {%- if strategy in ('append', 'merge', 'insert_overwrite', 'microbatch') -%}
    {{ return(none) }}
  {%- endif -%}
  {{ return(sparksession_package_macro('get_incremental_' ~ strategy ~ '_sql', default=false)) }}
{% endmacro %}
