with orders as (
    select * from {{ ref('orders') }}
),

order_versions as (
    select * from {{ ref('orders_history') }}
),

customer_versions as (
    select * from {{ ref('customers_history') }}
),

-- An order is placed at the commit time of its first version.
orders_placed as (
    select
        order_id,
        min(valid_from) as placed_at
    from order_versions
    group by order_id
),

final as (
    select
        orders.order_id,
        orders.customer_id,
        orders.order_date,
        orders.status,
        orders_placed.placed_at,
        customer_versions.company_name as customer_company_name,
        customer_versions.country as customer_country,
        customer_versions.loyalty_tier as customer_loyalty_tier,
        customer_versions.credit_limit as customer_credit_limit,
        customer_versions.valid_from as customer_version_valid_from,
        customer_versions._cdc_valid_from_seq as customer_version_seq
    from orders
    inner join orders_placed on orders.order_id = orders_placed.order_id
    left join customer_versions
        on
            orders.customer_id = customer_versions.customer_id
            and {{ cdc_valid_at('customer_versions', 'orders_placed.placed_at') }}
)

select * from final
