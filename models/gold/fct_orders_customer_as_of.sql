with orders as (
    select * from {{ ref('orders') }}
),

order_versions as (
    select * from {{ ref('orders_history') }}
),

customer_versions as (
    select * from {{ ref('customers_history') }}
),

-- An order is placed at the commit time of its first version, for the customer key it had then
-- (a customer's key can change later: ON UPDATE CASCADE rewrites the order).
first_versions as (
    select
        *,
        row_number() over (partition by order_id order by _cdc_valid_from_seq) as version_number
    from order_versions
),

orders_placed as (
    select
        order_id,
        customer_id as placed_customer_id,
        valid_from as placed_at
    from first_versions
    where version_number = 1
),

final as (
    select
        orders.order_id,
        orders.customer_id,
        orders.order_date,
        orders.status,
        orders_placed.placed_customer_id,
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
            orders_placed.placed_customer_id = customer_versions.customer_id
            and {{ cdc_lakehouse.cdc_valid_at('customer_versions', 'orders_placed.placed_at') }}
)

select * from final
