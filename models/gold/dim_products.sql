with products as (
    select * from {{ ref('products') }}
),

order_details as (
    select * from {{ ref('order_details') }}
),

sales as (
    select
        product_id,
        cast(sum(unit_price * quantity * (1 - discount)) as decimal(16, 2)) as revenue,
        sum(quantity) as units_sold
    from order_details
    group by product_id
),

final as (
    select
        products.product_id,
        products.product_name,
        products.category,
        products.unit_price,
        products.units_in_stock,
        products.discontinued,
        coalesce(sales.units_sold, 0) as units_sold,
        coalesce(sales.revenue, cast(0 as decimal(16, 2))) as revenue
    from products
    left join sales on products.product_id = sales.product_id
)

select * from final
