{{ cdc_current_state(
    ref('stg_northwind__customers_changes'),
    unique_key=['customer_id'],
    delete_mode='soft',
) }}
