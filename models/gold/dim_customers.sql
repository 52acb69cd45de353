with customers as (
    select * from {{ ref('customers') }}
    where not _cdc_is_deleted
),

regions as (
    select * from {{ ref('country_regions') }}
),

orders as (
    select * from {{ ref('fct_orders') }}
),

customer_orders as (
    select
        customer_id,
        cast(sum(order_total) as decimal(16, 2)) as lifetime_revenue,
        count(*) as order_count,
        min(order_date) as first_order_date,
        max(order_date) as last_order_date
    from orders
    where status != 'cancelled'
    group by customer_id
),

final as (
    select
        customers.customer_id,
        customers.company_name,
        customers.contact_name,
        customers.country,
        customers.loyalty_tier,
        customers.credit_limit,
        customers.created_at,
        customer_orders.first_order_date,
        customer_orders.last_order_date,
        coalesce(regions.region, 'Unknown') as region,
        coalesce(customer_orders.order_count, 0) as order_count,
        coalesce(customer_orders.lifetime_revenue, cast(0 as decimal(16, 2))) as lifetime_revenue
    from customers
    left join regions on customers.country = regions.country
    left join customer_orders on customers.customer_id = customer_orders.customer_id
)

select * from final
