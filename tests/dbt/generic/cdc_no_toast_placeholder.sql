{#
  Fails for rows where a string column holds Debezium's unchanged-TOAST placeholder: silver must
  keep the previous value, never write the placeholder.
#}
{% test cdc_no_toast_placeholder(model, placeholder='__debezium_unavailable_value') %}
    {%- set string_columns = [] -%}
    {%- if execute -%}
        {%- for column in adapter.get_columns_in_relation(model) -%}
            {%- if column.data_type == 'string' and not column.name.startswith('_cdc_') -%}
                {%- do string_columns.append(column.name) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    select *
    from {{ model }}
    where
        {%- for column in string_columns %}
        {{ adapter.quote(column) }} = '{{ placeholder }}'{{ " or" if not loop.last }}
        {%- else %}
        false
        {%- endfor %}
{% endtest %}
