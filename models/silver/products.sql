{{ config(unique_key=['product_id'], cdc_delete_mode='hard') }}

{{ cdc_current_state(ref('stg_northwind__products_changes')) }}
