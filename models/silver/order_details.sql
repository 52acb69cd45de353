{{ config(unique_key=['order_id', 'product_id'], cdc_delete_mode='hard') }}

{{ cdc_current_state(ref('stg_northwind__order_details_changes')) }}
