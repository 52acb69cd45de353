{{ cdc_history(
    ref('stg_northwind__order_details_changes'),
    unique_key=['order_id', 'product_id'],
    delete_mode='hard',
) }}
