{#- Every rejected landing line of every flatten model. Add a new flatten model to the list. -#}
with rejects as (
    {{ cdc_union_rejects([
        ref('flat_northwind__customers'),
        ref('flat_northwind__products'),
        ref('flat_northwind__orders'),
        ref('flat_northwind__order_details'),
        ref('flat_northwind__suppliers'),
    ]) }}
)

select * from rejects
