with source as (
    select * from {{ ref('flat_northwind__orders') }}
),

changes as (
    select
        {{- cdc_staging_columns(ref('flat_northwind__orders'), ['order_id']) }}
    from source
    where _cdc_reject_reason is null
)

select * from changes
