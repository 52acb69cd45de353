{#
  dbt-spark's table materialization (dbt-spark 1.11.0, unchanged but for the places marked
  "sparksession") for the session adapter: an Iceberg table whose SQL and inputs are those it was
  last built from is left as it is. A gold table is rebuilt in full by every run; when nothing
  it reads committed since, the rebuild rewrites the same rows, and a run with nothing landed
  should write nothing. What the table was built from is its fingerprint (table property
  `cdc.build.fingerprint`): a digest of its DDL and of the metadata log of each table it reads
  (each commit, schema or property change adds an entry). It is rebuilt when the fingerprint
  differs, on `--full-refresh`, when an input is not an Iceberg table (a view, a Delta table, a
  source folder: what they read can change without a trace here), when its SQL reads the clock
  or a random value, and when the model sets `cdc_skip_unchanged: false` (for SQL that reads a
  table without `ref` or `source`).
#}
{% materialization table, adapter = 'sparksession', supported_languages=['sql', 'python'] %}
  {%- set language = model['language'] -%}
  {%- set identifier = model['alias'] -%}
  {%- set grant_config = config.get('grants') -%}

  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}
  {%- set target_relation = api.Relation.create(identifier=identifier,
                                                schema=schema,
                                                database=database,
                                                type='table') -%}

  {{ run_hooks(pre_hooks) }}

  -- setup: if the target relation already exists, drop it
  -- in case if the existing and future table is delta or iceberg, we want to do a
  -- create or replace table instead of dropping, so we don't have the table unavailable
  {% if old_relation is not none %}
    {% set is_delta = (old_relation.is_delta and config.get('file_format', validator=validation.any[basestring]) == 'delta') %}
    {% set is_iceberg = (old_relation.is_iceberg and config.get('file_format', validator=validation.any[basestring]) == 'iceberg') %}
    {% set old_relation_type = old_relation.type %}
  {% else %}
    {% set is_delta = false %}
    {% set is_iceberg = false %}
    {% set old_relation_type = target_relation.type %}
  {% endif %}

  {#-- sparksession: the DDL, its fingerprint, and whether the table already holds its result --#}
  {%- set ddl = create_table_as(False, target_relation, compiled_code, language) -%}
  {%- set fingerprint = sparksession_table_fingerprint(ddl) if language == 'sql' else none -%}
  {%- set ddl = ddl | replace(sparksession_fingerprint_placeholder(), fingerprint or 'none') -%}
  {%- if fingerprint is not none and is_iceberg and not should_full_refresh()
        and sparksession_stored_fingerprint(old_relation, 'cdc.build.fingerprint') == fingerprint -%}
    {%- call noop_statement('main', 'unchanged', 'OK', 0) -%}
      -- the table's SQL and every table it reads are those it was built from
    {%- endcall -%}
  {%- else -%}

  {% if not is_delta and not is_iceberg %}
    {% set existing_relation = target_relation %}
    {{ adapter.drop_relation(existing_relation.incorporate(type=old_relation_type)) }}
  {% endif %}

  -- build model
  {%- call statement('main', language=language) -%}
    {{ ddl }}
  {%- endcall -%}

  {% do persist_docs(target_relation, model) %}

  {% do persist_constraints(target_relation, model) %}

  {%- endif -%}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]})}}

{% endmaterialization %}


{#- dbt-spark's clause, plus `cdc.build.fingerprint` on an Iceberg table model (see the table
    materialization). -#}
{% macro sparksession__tblproperties_clause() -%}
  {%- set tblproperties = dict(config.get('tblproperties') or {}) -%}
  {%- if model.config.materialized == 'table' and config.get('file_format') == 'iceberg' -%}
    {%- do tblproperties.update({'cdc.build.fingerprint': sparksession_fingerprint_placeholder()}) -%}
  {%- endif -%}
  {%- if tblproperties %}
    tblproperties (
      {%- for prop in tblproperties -%}
      '{{ prop }}' = '{{ tblproperties[prop] }}' {% if not loop.last %}, {% endif %}
      {%- endfor %}
    )
  {%- endif %}
{%- endmacro -%}


{#- The digest of `ddl` and of the metadata log of every table the model reads (one query), or
    none when the table must be built whatever it holds (see the materialization). -#}
{% macro sparksession_table_fingerprint(ddl) %}
  {%- if not config.get('cdc_skip_unchanged', true) or config.get('file_format') != 'iceberg' -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set volatile = '(current_(date|timestamp|timezone|user)|now|rand|randn|random|uuid|unix_timestamp|localtimestamp|shuffle|input_file_name)\\s*\\(|\\bcurrent_(date|timestamp)\\b' -%}
  {%- if modules.re.search(volatile, compiled_code, modules.re.IGNORECASE) -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set inputs = [] -%}
  {%- for unique_id in model.depends_on.nodes | sort -%}
    {%- set node = graph.nodes.get(unique_id) or graph.sources.get(unique_id) -%}
    {%- if node is none -%}
      {{ return(none) }}
    {%- endif -%}
    {%- set name = node.identifier if node.resource_type == 'source' else node.alias -%}
    {%- set relation = adapter.get_relation(node.database, node.schema, name) -%}
    {#- A relation this run created has no catalog information in dbt's cache: its model's
        config says what it is. -#}
    {%- set built_here = node.resource_type in ('model', 'seed', 'snapshot')
          and node.config.get('file_format') == 'iceberg'
          and node.config.get('materialized') not in ('view', 'ephemeral') -%}
    {%- if relation is none or relation.is_view or not (relation.is_iceberg or built_here) -%}
      {{ return(none) }}
    {%- endif -%}
    {%- do inputs.append(relation) -%}
  {%- endfor -%}
  {%- set log = [] -%}
  {%- if inputs -%}
    {%- set queries = [] -%}
    {%- for relation in inputs -%}
      {%- do queries.append("select '" ~ relation ~ "' as input, count(*) as versions, cast(max(timestamp) as string) as newest from " ~ relation ~ ".metadata_log_entries") -%}
    {%- endfor -%}
    {%- for row in run_query(queries | join(' union all ')).rows -%}
      {%- do log.append(row | join(' ')) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(local_md5(ddl ~ '\n' ~ (log | sort | join('\n')))) }}
{% endmacro %}
