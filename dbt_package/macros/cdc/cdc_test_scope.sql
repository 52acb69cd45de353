{#
  The rows of a CDC model's data tests: the model's rows whose key had an event loaded since
  `CDC_TESTS_SINCE` (epoch microseconds), all of them after a truncate loaded since; every row
  when the variable is unset (a plain dbt command), on `--full-refresh`, over Thrift, or for a
  relation no CDC model builds. The runners (`cdc_lakehouse.runner.changed`, `continuous
  --changed-only`) set the variable for each run to the start of the oldest run since which
  a selected table's data tests have not all passed (cdc_lakehouse/runner/changed.py,
  tests_since): every event loaded before it was tested then, so the rows a run can have
  changed are those of keys with an event since (a new column filling rows of every key comes
  with a change to the project, after which the runners test every row), and a failed test
  keeps the moment where it was, so the next run tests those keys again. On a table of millions
  of rows the tests then read the model filtered by the batch's keys instead of aggregating,
  windowing or comparing every row. An environment variable, not a dbt var: a var that changes
  with every run would make dbt parse the whole project again each time.
#}
{% macro cdc_tested_rows(relation) %}
    {%- set scope = cdc_lakehouse.cdc_test_scope(relation) -%}
    {%- if scope is none -%}
        {{ return(relation) }}
    {%- endif -%}
    {%- set since = 'timestamp_micros(' ~ scope.since ~ ')' -%}
    {{ return(
        '(select * from ' ~ relation ~ ' where (' ~ scope.key_list ~ ') in (select ' ~ scope.key_list
        ~ ' from ' ~ scope.changes ~ ' where _cdc_loaded_at >= ' ~ since ~ ')'
        ~ ' or (select count(*) from ' ~ scope.changes ~ " where _cdc_op = 't' and _cdc_loaded_at >= "
        ~ since ~ ') > 0)'
    ) }}
{% endmacro %}


{#- The scope of cdc_tested_rows: none (every row), or the moment (epoch microseconds), the
    model's key columns and its change log. -#}
{% macro cdc_test_scope(relation) %}
    {%- set since = env_var('CDC_TESTS_SINCE', '') if execute else '' -%}
    {%- if not since or flags.FULL_REFRESH or target.method != 'session' -%}
        {{ return(none) }}
    {%- endif -%}
    {%- if not (since | string).isdigit() -%}
        {{ exceptions.raise_compiler_error("CDC_TESTS_SINCE must be epoch microseconds, not " ~ since) }}
    {%- endif -%}
    {%- set node = cdc_lakehouse.cdc_model_node_of(relation) -%}
    {%- if node is none or node.config.get('incremental_strategy') not in ('cdc_merge', 'cdc_history') -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set keys = node.config.get('unique_key') or [] -%}
    {%- set keys = [keys] if keys is string else keys -%}
    {%- if not keys -%}
        {{ return(none) }}
    {%- endif -%}
    {{ return({
        'since': since,
        'key_list': cdc_lakehouse.cdc_column_list(keys),
        'changes': cdc_lakehouse.cdc_upstream_change_log(node),
    }) }}
{% endmacro %}
