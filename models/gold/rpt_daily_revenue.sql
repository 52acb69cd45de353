with orders as (
    select * from {{ ref('fct_orders') }}
),

final as (
    select
        order_date,
        cast(sum(items_total) as decimal(16, 2)) as items_revenue,
        cast(sum(freight) as decimal(16, 2)) as freight_revenue,
        cast(sum(order_total) as decimal(16, 2)) as total_revenue,
        count(*) as order_count,
        count(distinct customer_id) as customer_count
    from orders
    where status != 'cancelled'
    group by order_date
)

select * from final
