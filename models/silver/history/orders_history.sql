{{ cdc_history(
    ref('stg_northwind__orders_changes'),
    unique_key=['order_id'],
    delete_mode='hard',
) }}
