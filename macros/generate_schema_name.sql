{#
  Layer schemas are used as named (bronze, staging, silver, gold), not prefixed with the target
  schema: lakehouse users expect `silver.customers`. Models without a layer use the target schema.
#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
