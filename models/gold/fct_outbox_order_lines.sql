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
        ) as order_lines
    from {{ ref('cdc_events') }}
),

exploded as (
    select
        order_id,
        customer_id,
        status,
        explode(order_lines) as order_line
    from documents
),

final as (
    select
        exploded.order_id,
        exploded.order_line.product_id,
        exploded.order_line.unit_price,
        exploded.order_line.quantity,
        exploded.order_line.discount,
        exploded.customer_id,
        exploded.status as order_status
    from exploded
)

select * from final
