{{ cdc_history(
    ref('stg_northwind__products_changes'),
    unique_key=['product_id'],
    delete_mode='hard',
) }}
