with orders as (
    select * from {{ ref('orders') }}
),

order_details as (
    select * from {{ ref('order_details') }}
),

order_lines as (
    select
        order_id,
        cast(
            sum(unit_price * quantity * (1 - discount)) as decimal(14, 2)
        ) as items_total,
        count(*) as line_count,
        sum(quantity) as item_quantity
    from order_details
    group by order_id
),

final as (
    select
        orders.order_id,
        orders.customer_id,
        orders.order_date,
        orders.required_date,
        orders.shipped_at,
        orders.ship_country,
        orders.status,
        orders.freight,
        cast(
            coalesce(order_lines.items_total, 0) + coalesce(orders.freight, 0) as decimal(14, 2)
        ) as order_total,
        orders._cdc_source_ts as source_updated_at,
        coalesce(order_lines.line_count, 0) as line_count,
        coalesce(order_lines.item_quantity, 0) as item_quantity,
        coalesce(order_lines.items_total, cast(0 as decimal(14, 2))) as items_total
    from orders
    left join order_lines on orders.order_id = order_lines.order_id
)

select * from final
