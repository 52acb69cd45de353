{#- Every rejected landing line of every flatten model. Add a new flatten model to the list. -#}
{%- set flatten_models = [
    ref('flat_northwind__customers'),
    ref('flat_northwind__products'),
    ref('flat_northwind__orders'),
    ref('flat_northwind__order_details'),
    ref('flat_northwind__suppliers'),
] -%}

with rejects as (
    {%- for relation in flatten_models %}
    select
        '{{ relation.identifier }}' as flatten_model,
        _cdc_file,
        _cdc_line,
        _cdc_offset,
        _cdc_reject_reason,
        _cdc_raw,
        _cdc_loaded_at
    from {{ relation }}
    where _cdc_reject_reason is not null
    {{- "\n    union all" if not loop.last }}
    {%- endfor %}
)

select * from rejects
