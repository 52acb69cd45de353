{{ cdc_history(
    ref('stg_northwind__suppliers_changes'),
    unique_key=['supplier_id'],
    ignore_columns=['last_update'],
    delete_mode='hard',
) }}
