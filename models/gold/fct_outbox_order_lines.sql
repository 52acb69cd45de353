{#- The order lines of the outbox documents: one row per element of `order_items`. Built from
    the outbox alone (what a consumer of the outbox topic sees), it must equal the source's
    `order_details` (the oracle checks it). -#}
with documents as (
    select
        order_id,
        customer_id,
        status,
        from_json(
            order_items,
            'array<struct<product_id: int, unit_price: decimal(10, 2), quantity: int, discount: decimal(4, 2)>>'
        ) as items
    from {{ ref('cdc_events') }}
),

lines as (
    select
        documents.order_id,
        documents.customer_id,
        documents.status,
        line.product_id,
        line.unit_price,
        line.quantity,
        line.discount
    from documents
    lateral view explode(documents.items) exploded as line
),

final as (
    select
        order_id,
        product_id,
        unit_price,
        quantity,
        discount,
        customer_id,
        status as order_status
    from lines
)

select * from final
