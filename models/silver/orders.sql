{{ config(unique_key=['order_id'], cdc_delete_mode='hard') }}

{{ cdc_current_state(ref('stg_northwind__orders_changes')) }}
