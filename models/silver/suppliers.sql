{{ config(unique_key=['supplier_id'], cdc_delete_mode='hard') }}

{{ cdc_current_state(ref('stg_northwind__suppliers_changes')) }}
