{{ cdc_history(
    ref('stg_northwind__customers_changes'),
    unique_key=['customer_id'],
    ignore_columns=['updated_at'],
    delete_mode='soft',
) }}
