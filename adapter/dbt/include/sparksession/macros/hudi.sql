{#
  Hudi tables (file_format 'hudi'). dbt-spark's options clause names the record key as
  `primaryKey` but renders a list `unique_key` as "['id']" (Hudi then fails: "Can't find
  primaryKey `['id']`"): here the record key is the model's `hudi_record_key` config, else its
  `unique_key`, joined with commas (a snapshot's: `dbt_scd_id`). A table without either (bronze, gold, seeds) has no record
  key: Hudi 1.0 generates one and every write is an insert.
  Every Hudi table is copy-on-write (readers need no merge), without the metadata table (a
  second table per commit; file listing is cheap on the folders this project writes) and, where
  it has a record key, with COMMIT_TIME_ORDERING: the last write of a key wins, as SQL's MERGE,
  UPDATE and DELETE say. (Hudi's default with an ordering field, EVENT_TIME_ORDERING, would
  silently keep a stored row over a later write with a smaller ordering value.) No precombine
  field: the project's batches hold one row per key.
#}
{% macro sparksession__options_clause() -%}
  {%- if config.get('file_format') != 'hudi' -%}
    {{ return(spark__options_clause()) }}
  {%- endif -%}
  {#- A snapshot holds versions of its `unique_key`: dbt's snapshot MERGE matches `dbt_scd_id`. -#}
  {%- set key = 'dbt_scd_id' if model.resource_type == 'snapshot' else config.get('hudi_record_key') or config.get('unique_key') -%}
  {%- set options = hudi_table_options(key) -%}
  {%- do options.update(config.get('options') or {}) %}
    options (
      {%- for option in options -%}
      {{ option }} "{{ options[option] }}" {% if not loop.last %}, {% endif %}
      {%- endfor %}
    )
{%- endmacro %}


{#- The options of a Hudi table with record key `key` (a column, a list of them, or none). -#}
{% macro hudi_table_options(key=none) %}
  {%- set options = {'type': 'cow', 'hoodie.metadata.enable': 'false'} -%}
  {%- if key -%}
    {%- do options.update({
      'primaryKey': key if key is string else key | join(','),
      'hoodie.record.merge.mode': 'COMMIT_TIME_ORDERING',
    }) -%}
  {%- endif -%}
  {{ return(options) }}
{% endmacro %}


{#- Before a Hudi table is created (dropped first: no REPLACE TABLE AS SELECT): the folder a
    killed create left without a catalog entry (Spark would refuse the create with
    LOCATION_ALREADY_EXISTS), deleted and logged. -#}
{% macro cdc_clear_orphan_table_folder(relation) %}
    {%- if execute -%}
        {%- set cleared = adapter.clear_orphan_table_folder(relation) -%}
        {%- if cleared -%}
            {{ log(relation ~ ": deleted " ~ cleared ~ ", left without a table by an earlier run that stopped", info=True) }}
        {%- endif -%}
    {%- endif -%}
{% endmacro %}
