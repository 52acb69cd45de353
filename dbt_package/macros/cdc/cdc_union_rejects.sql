{#
  Union of the rejected landing lines of the given bronze models, with the model name:
  reason, file, line, Kafka offset, raw text and load time.
#}
{% macro cdc_union_rejects(bronze_models) %}
    {%- for relation in bronze_models %}
    select
        '{{ relation.identifier }}' as bronze_model,
        _cdc_file,
        _cdc_line,
        _cdc_offset,
        _cdc_reject_reason,
        _cdc_raw,
        _cdc_loaded_at
    from {{ relation }}
    where _cdc_reject_reason is not null
    {%- if not loop.last %}
    union all
    {%- endif %}
    {%- endfor %}
{% endmacro %}
