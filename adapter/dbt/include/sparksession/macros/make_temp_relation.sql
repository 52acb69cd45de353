{#
  dbt-spark names a model's temporary view `<model>__dbt_tmp`. Temporary views live in the one
  SparkSession every dbt thread shares, and the unit-test materialization creates and drops one
  per test: two unit tests of the same model running on two threads would drop each other's
  view. A unit test's view carries the test's name; everything else keeps dbt-spark's name.
#}
{% macro sparksession__make_temp_relation(base_relation, suffix) %}
    {%- if model is defined and model.resource_type == 'unit_test' -%}
        {%- set suffix = '__' ~ local_md5(model.unique_id)[:10] ~ suffix -%}
    {%- endif -%}
    {{ return(spark__make_temp_relation(base_relation, suffix)) }}
{% endmacro %}
