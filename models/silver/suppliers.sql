{{ cdc_current_state(
    ref('stg_northwind__suppliers_changes'),
    unique_key=['supplier_id'],
    delete_mode='hard',
) }}
